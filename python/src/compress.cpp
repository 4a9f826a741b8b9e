// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// gradwire._C: bindings of the 1-bit optimizers (gradwire/compress.h) over
// flat float32 buffers; gradwire.torch.optim wraps them as torch.optim
// optimizers. Bindings only: every formula is the C++ one.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "buffer.h"
#include "gradwire/compress.h"
#include "gradwire/gradwire.h"

namespace gradwire::python {
namespace {

// A flat float32 buffer of exactly `count` elements, writable.
BufferView flat(const py::handle& obj, size_t count, const char* what) {
  BufferView v = view_buffer(obj, /*writable=*/true, what);
  if (v.dtype != DataType::Float32 || v.count != count) {
    throw Error(ErrorCode::InvalidArgument,
                std::string(what) + ": needs " + std::to_string(count) +
                    " float32 elements, got " + std::to_string(v.count) + " " +
                    std::string(to_string(v.dtype)));
  }
  return v;
}

// The options the two optimizers share (same names as in compress.h).
void set_common(OneBitOptions& o, float beta1, float beta2, float eps, float weight_decay,
                uint64_t freeze_step, bool bias_correction, bool precondition_compression,
                float momentum_clip) {
  o.beta1 = beta1;
  o.beta2 = beta2;
  o.eps = eps;
  o.weight_decay = weight_decay;
  o.freeze_step = freeze_step;
  o.bias_correction = bias_correction;
  o.precondition_compression = precondition_compression;
  o.momentum_clip = momentum_clip;
}

// The optimizer plus the Communicator it uses, which must outlive it.
template <typename Opt>
struct Holder {
  std::shared_ptr<Communicator> comm;
  std::unique_ptr<Opt> opt;
};

template <typename Opt>
void bind_common(py::class_<Holder<Opt>>& cls) {
  cls.def(
         "step",
         [](Holder<Opt>& h, const py::handle& params, const py::handle& grad, float lr) {
           const size_t n = h.opt->count();
           BufferView p = flat(params, n, "step: params");
           BufferView g = flat(grad, n, "step: grad");
           h.opt->options().lr = lr;
           py::gil_scoped_release nogil;  // collectives inside; bounded by the deadline
           h.opt->step(static_cast<float*>(p.data), static_cast<float*>(g.data));
         },
         py::arg("params"), py::arg("grad"), py::arg("lr"),
         "One step on flat float32 buffers: params (updated in place) and this rank's local, "
         "unaveraged gradient (used as scratch).")
      .def(
          "_step_device",
          [](Holder<Opt>& h, uintptr_t params, uintptr_t grad, float lr, uintptr_t stream) {
            // gradwire.torch.optim on CUDA parameters: the flat buffers'
            // device addresses (torch's data_ptr()) and the current stream.
            if (h.opt->device().is_host()) {
              throw Error(ErrorCode::InvalidArgument,
                          "_step_device: this optimizer was made for host memory (device=-1)");
            }
            h.opt->options().lr = lr;
            py::gil_scoped_release nogil;
            h.opt->step(reinterpret_cast<float*>(params), reinterpret_cast<float*>(grad),
                        Stream(reinterpret_cast<void*>(stream)));
          },
          py::arg("params"), py::arg("grad"), py::arg("lr"), py::arg("stream"),
          "One step on flat float32 CUDA buffers given by address, on `stream` "
          "(a cudaStream_t as an integer); for optimizers made with device >= 0.")
      .def_property_readonly("device", [](const Holder<Opt>& h) { return h.opt->device().index(); })
      .def_property_readonly("steps", [](const Holder<Opt>& h) { return h.opt->steps(); })
      .def_property_readonly("compressing", [](const Holder<Opt>& h) { return h.opt->compressing(); })
      .def_property_readonly("last_wire_bytes",
                             [](const Holder<Opt>& h) { return h.opt->last_wire_bytes(); })
      .def_property_readonly("count", [](const Holder<Opt>& h) { return h.opt->count(); })
      .def("save_state", [](const Holder<Opt>& h) { return py::bytes(h.opt->save_state()); })
      .def(
          "save_replicated_state",
          [](const Holder<Opt>& h) { return py::bytes(h.opt->save_replicated_state()); },
          "The state every rank holds alike (save_state() without the error feedback), for "
          "elastic commits; load_state() takes it and restarts the error feedback at zero.")
      .def(
          "rebind",
          [](Holder<Opt>& h, std::shared_ptr<Communicator> comm) {
            h.opt->rebind(*comm);
            h.comm = std::move(comm);
          },
          py::arg("comm"),
          "Moves the optimizer onto `comm` (a new elastic generation's): the error feedback "
          "restarts at zero, laid out for its world; the rest stays. Not collective.")
      .def(
          "is_over",
          [](const Holder<Opt>& h, const std::shared_ptr<Communicator>& comm) {
            return comm && h.comm.get() == comm.get();
          },
          py::arg("comm"),
          "True if the optimizer runs over `comm` (the same Communicator, e.g. an elastic "
          "group's current one, not merely one of the same ranks).")
      .def("load_state", [](Holder<Opt>& h, const py::bytes& state) {
        h.opt->load_state(std::string(state));
      });
}

// The constructor: comm, the shape (count or layer_sizes), the shared
// options with their C++ defaults (`d`: LAMB's eps differs), the
// optimizer's own keyword arguments, then device.
template <typename Opt, typename Init, typename... Own>
void bind_init(py::class_<Holder<Opt>>& cls, Init init, py::arg shape, const OneBitOptions& d,
               Own... own) {
  cls.def(py::init(std::move(init)), py::arg("comm"), shape, py::arg("beta1") = d.beta1,
          py::arg("beta2") = d.beta2, py::arg("eps") = d.eps,
          py::arg("weight_decay") = d.weight_decay, py::arg("freeze_step") = d.freeze_step,
          py::arg("bias_correction") = d.bias_correction,
          py::arg("precondition_compression") = d.precondition_compression,
          py::arg("momentum_clip") = d.momentum_clip, own..., py::arg("device") = -1);
}

}  // namespace

void register_compress(py::module_& m) {
  using AdamH = Holder<OneBitAdam>;
  py::class_<AdamH> adam(m, "OneBitAdam",
                         "1-bit Adam (gradwire/compress.h) over one flat float32 buffer.");
  bind_init<OneBitAdam>(
      adam,
      [](std::shared_ptr<Communicator> comm, size_t count, float beta1, float beta2, float eps,
         float weight_decay, uint64_t freeze_step, bool bias_correction,
         bool precondition_compression, float momentum_clip, int device) {
        OneBitAdamOptions o;
        set_common(o, beta1, beta2, eps, weight_decay, freeze_step, bias_correction,
                   precondition_compression, momentum_clip);
        // -1: host memory (Device::cuda of a negative index is the host).
        auto opt = std::make_unique<OneBitAdam>(*comm, count, o, Device::cuda(device));
        return AdamH{std::move(comm), std::move(opt)};
      },
      py::arg("count"), OneBitAdamOptions{});
  bind_common<OneBitAdam>(adam);

  using LambH = Holder<OneBitLamb>;
  py::class_<LambH> lamb(m, "OneBitLamb",
                         "1-bit LAMB (gradwire/compress.h) over flat float32 layers.");
  bind_init<OneBitLamb>(
      lamb,
      [](std::shared_ptr<Communicator> comm, std::vector<size_t> layers, float beta1, float beta2,
         float eps, float weight_decay, uint64_t freeze_step, bool bias_correction,
         bool precondition_compression, float momentum_clip, bool live_coefficients,
         int device) {
        OneBitLambOptions o;
        set_common(o, beta1, beta2, eps, weight_decay, freeze_step, bias_correction,
                   precondition_compression, momentum_clip);
        o.live_coefficients = live_coefficients;
        auto opt = std::make_unique<OneBitLamb>(*comm, std::move(layers), o, Device::cuda(device));
        return LambH{std::move(comm), std::move(opt)};
      },
      py::arg("layer_sizes"), OneBitLambOptions{},
      py::arg("live_coefficients") = OneBitLambOptions{}.live_coefficients);
  bind_common<OneBitLamb>(lamb);
}

}  // namespace gradwire::python
