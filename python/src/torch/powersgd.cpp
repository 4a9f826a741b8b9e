// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// gradwire's PowerSGD (src/compress/powersgd.cpp) as a torch DDP comm hook:
// gradwire.torch.hooks.powerSGD_hook hands each GradBucket here. The bucket
// runs through the same C++ hook the C++ Reducer uses, on the group's
// gradwire Communicator, and the result comes back as a torch Future.
//
// Scaling: torch's DDP does not divide a bucket when a comm hook is
// registered; gradwire's hook expects the Reducer's division folded in
// (Note at the top of powersgd.cpp), so the bucket is divided here first.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <memory>
#include <vector>

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "backend.h"
#include "gradwire/device_stream.h"
#include "gradwire/compress.h"
#include "gradwire/error.h"
#include "gradwire/reducer.h"

namespace gradwire::python {

namespace py = pybind11;

namespace {

// The hook state of one DDP model: gradwire's PowerSGDState and its hook.
struct PowerSGDHookState {
  std::shared_ptr<PowerSGDState> state;
  CommHook hook;
};

void check_bucket(const at::Tensor& buffer) {
  const bool placed = buffer.device().is_cpu() || buffer.device().is_cuda();
  if (buffer.scalar_type() != at::kFloat || !placed || !buffer.is_contiguous()) {
    throw Error(ErrorCode::InvalidArgument,
                "gradwire powerSGD_hook: the bucket is a " +
                    std::string(c10::toString(buffer.scalar_type())) + " tensor on " +
                    buffer.device().str() +
                    "; gradwire's PowerSGD takes contiguous float32 CPU or CUDA buckets");
  }
}

// PyTorch's current stream on a CUDA bucket's device (nullptr on the CPU):
// where the bucket's contents become ready and the hook's GPU work goes.
void* bucket_stream(const at::Tensor& t) {
  if (!t.is_cuda()) return nullptr;
  return c10::impl::getDeviceGuardImpl(t.device().type())->getStream(t.device()).native_handle();
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
             o.start_powerSGD_iter = start_powerSGD_iter;
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
      [](PowerSGDHookState& s, GradwireBackend& backend, at::Tensor buffer,
         const std::vector<std::vector<int64_t>>& shapes, size_t index, uint64_t step) {
        check_bucket(buffer);
        Communicator& comm = backend.communicator();
        std::vector<size_t> gradients;
        std::vector<BucketContext::Tensor> tensors;
        size_t offset = 0;
        for (const auto& shape : shapes) {
          BucketContext::Tensor t;
          t.offset = offset;
          t.elements = 1;
          for (int64_t d : shape) t.elements *= size_t(d);
          t.rows = shape.empty() ? t.elements : size_t(shape[0]);
          t.cols = t.rows ? t.elements / t.rows : 0;
          offset += t.elements;
          gradients.push_back(gradients.size());
          tensors.push_back(t);
        }
        if (offset != size_t(buffer.numel())) {
          throw Error(ErrorCode::InvalidArgument,
                      "gradwire powerSGD_hook: the bucket's gradients hold " +
                          std::to_string(offset) + " elements, its buffer " +
                          std::to_string(buffer.numel()));
        }
        py::gil_scoped_release nogil;
        buffer.div_(comm.size());  // on the current stream for a CUDA bucket
        std::vector<std::byte> scratch;  // PowerSGD keeps its own buffers
        const int device = buffer.is_cuda() ? int(buffer.device().index()) : -1;
        void* stream = bucket_stream(buffer);
        // A CUDA bucket: PowerSGD on the device (Note [where PowerSGD's
        // buffers live]); its collectives follow the current stream. The
        // Work completes once the GPU is done, so the future's value is
        // readable by any stream.
        DeviceStreamScope scope(stream);
        BucketContext ctx(comm, step, index, DataType::Float32, offset, buffer.data_ptr(), 0,
                          offset, false, gradients, tensors, &scratch, device, stream);
        Work w = s.hook(ctx);
        py::gil_scoped_acquire gil;
        return future_of(std::move(w), buffer);
      },
      py::arg("state"), py::arg("backend"), py::arg("buffer"), py::arg("shapes"),
      py::arg("index"), py::arg("step"));
}

}  // namespace gradwire::python
