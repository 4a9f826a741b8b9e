// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// gradwire's PowerSGD (src/compress/powersgd.cpp) as a torch DDP comm hook:
// gradwire.torch.hooks.powerSGD_hook hands each GradBucket here. The bucket
// runs through the same C++ hook the C++ Reducer uses, on the group's
// gradwire Communicator (gradwire::torch::run_comm_hook, which also divides
// the bucket by the world size first), and the result comes back as a
// torch Future.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/pybind.h>

#include <memory>
#include <vector>

#include "gradwire/compress.h"
#include "gradwire/reducer.h"
#include "gradwire/torch/c10d_hooks.h"
#include "gradwire/torch/process_group.h"
#include "module.h"

namespace gradwire::python {

namespace {

// The hook state of one DDP model: gradwire's PowerSGDState and its hook.
struct PowerSGDHookState {
  std::shared_ptr<PowerSGDState> state;
  CommHook hook;
};

// A torch.futures.Future (the Python object) over `future`. Call with the
// GIL held.
py::object python_future(c10::intrusive_ptr<c10::ivalue::Future> future) {
  return py::cast(std::make_shared<::torch::jit::PythonFutureWrapper>(std::move(future)));
}

}  // namespace

void register_powersgd(py::module_& m) {
  py::class_<PowerSGDHookState, std::shared_ptr<PowerSGDHookState>>(
      m, "PowerSGDHookState", "gradwire's PowerSGD state behind gradwire.torch.hooks.PowerSGDState.")
      .def(py::init([](size_t matrix_approximation_rank, uint64_t start_powerSGD_iter,
                       double min_compression_rate, bool use_error_feedback, bool warm_start,
                       float orthogonalization_epsilon, uint64_t random_seed,
                       bool batch_tensors_with_same_shape) {
             PowerSGDOptions o;
             o.matrix_approximation_rank = matrix_approximation_rank;
             o.start_powersgd_iter = start_powerSGD_iter;  // torch's keyword, our field
             o.min_compression_rate = min_compression_rate;
             o.use_error_feedback = use_error_feedback;
             o.warm_start = warm_start;
             o.orthogonalization_epsilon = orthogonalization_epsilon;
             o.random_seed = random_seed;
             o.batch_tensors_with_same_shape = batch_tensors_with_same_shape;
             auto s = std::make_shared<PowerSGDHookState>();
             s->state = std::make_shared<PowerSGDState>(o);
             s->hook = powersgd_hook(s->state);
             return s;
           }),
           py::arg("matrix_approximation_rank"), py::arg("start_powerSGD_iter"),
           py::arg("min_compression_rate"), py::arg("use_error_feedback"), py::arg("warm_start"),
           py::arg("orthogonalization_epsilon"), py::arg("random_seed"),
           py::arg("batch_tensors_with_same_shape"))
      .def("numel_before_compression",
           [](const PowerSGDHookState& s) { return s.state->numel_before_compression(); })
      .def("numel_after_compression",
           [](const PowerSGDHookState& s) { return s.state->numel_after_compression(); })
      .def("save_state", [](const PowerSGDHookState& s) { return py::bytes(s.state->save_state()); })
      .def("load_state",
           [](PowerSGDHookState& s, const py::bytes& b) { s.state->load_state(std::string(b)); })
      .def("reset_error_feedback", [](PowerSGDHookState& s) { s.state->reset_error_feedback(); });

  // One bucket: divide by the world size, run gradwire's hook on the group's
  // communicator, return a Future of the averaged bucket.
  m.def(
      "_powersgd_bucket",
      [](PowerSGDHookState& s, gradwire::torch::Backend& backend, at::Tensor buffer,
         const std::vector<std::vector<int64_t>>& shapes, size_t index, uint64_t step) {
        c10::intrusive_ptr<c10::ivalue::Future> future;
        {
          py::gil_scoped_release nogil;
          future = gradwire::torch::run_comm_hook(s.hook, backend.communicator(), buffer, shapes,
                                                  index, step, "gradwire powerSGD_hook");
        }
        return python_future(std::move(future));
      },
      py::arg("state"), py::arg("backend"), py::arg("buffer"), py::arg("shapes"),
      py::arg("index"), py::arg("step"));
}

}  // namespace gradwire::python
