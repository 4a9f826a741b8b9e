// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// gradwire._C_torch: the torch.distributed backend creator and the kernels
// behind gradwire's DDP comm hooks. Built against torch's own pybind11 and
// sharing its internals, so c10d's Python types (Store, Backend) convert.
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include <chrono>
#include <string>

#include "backend.h"
#include "gradwire/error.h"
#include "kernels/cpu/reduce.h"

namespace gradwire::python {
namespace {

[[noreturn]] void invalid(const std::string& msg) {
  throw Error(ErrorCode::InvalidArgument, msg);
}

void check_pair(const at::Tensor& wide, const at::Tensor& narrow, const char* what) {
  if (!wide.device().is_cpu() || !narrow.device().is_cpu()) {
    invalid(std::string(what) + ": CPU tensors only (the CUDA kernels come with the NCCL work)");
  }
  if (wide.scalar_type() != at::kFloat || !wide.is_contiguous()) {
    invalid(std::string(what) + ": the bucket must be a contiguous float32 tensor");
  }
  if ((narrow.scalar_type() != at::kHalf && narrow.scalar_type() != at::kBFloat16) ||
      !narrow.is_contiguous()) {
    invalid(std::string(what) + ": the compressed tensor must be contiguous float16 or bfloat16");
  }
  if (wide.numel() != narrow.numel()) {
    invalid(std::string(what) + ": " + std::to_string(wide.numel()) + " vs " +
            std::to_string(narrow.numel()) + " elements");
  }
}

}  // namespace
}  // namespace gradwire::python

PYBIND11_MODULE(_C_torch, m) {
  using namespace gradwire;
  using namespace gradwire::python;
  namespace py = pybind11;
  // Registers c10d's Python types (Store, Backend) that our signatures use.
  py::module_::import("torch.distributed");
  set_main_thread(py::module_::import("threading").attr("main_thread")().attr("ident").cast<uint64_t>());

  py::class_<GradwireBackend, c10d::Backend, c10::intrusive_ptr<GradwireBackend>>(
      m, "Backend", "torch.distributed backend running on a gradwire Communicator.")
      .def_property_readonly("provider",
                             [](GradwireBackend& b) { return b.communicator().provider(); });

  m.def(
      "create_backend",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
         std::chrono::duration<float> timeout) {
        py::gil_scoped_release nogil;
        return GradwireBackend::create(
            store, rank, size, std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      "The creator torch.distributed calls for each group's members.");

  register_powersgd(m);

  m.def(
      "_shutdown_all",
      [] {
        py::gil_scoped_release nogil;  // engine threads may run Python callbacks
        GradwireBackend::shutdown_all();
      },
      "Closes the Communicator of every gradwire Backend still alive (atexit).");

  // dst = 16-bit(src) / divisor, each element rounded once (the hooks'
  // compression, as torch's fp16_compress_hook does it: cast, then divide).
  m.def(
      "compress",
      [](const at::Tensor& src, at::Tensor& dst, int divisor) {
        check_pair(src, dst, "gradwire compress");
        const size_t n = size_t(src.numel());
        auto* out = static_cast<uint16_t*>(dst.data_ptr());
        const auto* in = src.const_data_ptr<float>();
        py::gil_scoped_release nogil;
        const bool half = dst.scalar_type() == at::kHalf;
        if (half) {
          kernels::float_to_half(out, in, n);
        } else {
          kernels::float_to_bf16(out, in, n);
        }
        if (divisor != 1) kernels::divide(out, n, half ? DataType::Float16 : DataType::BFloat16, divisor);
      },
      py::arg("src"), py::arg("dst"), py::arg("divisor"));
  m.def(
      "decompress",
      [](const at::Tensor& src, at::Tensor& dst) {
        check_pair(dst, src, "gradwire decompress");
        const size_t n = size_t(src.numel());
        const auto* in = static_cast<const uint16_t*>(src.const_data_ptr());
        auto* out = dst.data_ptr<float>();
        py::gil_scoped_release nogil;
        if (src.scalar_type() == at::kHalf) {
          kernels::half_to_float(out, in, n);
        } else {
          kernels::bf16_to_float(out, in, n);
        }
      },
      py::arg("src"), py::arg("dst"));
}
