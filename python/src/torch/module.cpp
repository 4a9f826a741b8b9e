// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// gradwire._C_torch: binds the libtorch adapter's c10d backend
// (gradwire/torch/process_group.h, in libgradwire_torch) and the kernels
// behind gradwire's DDP comm hooks (gradwire/torch/c10d_hooks.h) for
// gradwire.torch, which registers the backend with torch.distributed. Only
// what is Python's lives here: the GIL, Ctrl-C during a wait, Python
// futures. Built against torch's own pybind11 and sharing its internals,
// so c10d's Python types (Store, Backend) convert.
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "gradwire/torch/c10d_hooks.h"
#include "gradwire/torch/process_group.h"
#include "module.h"

namespace gradwire::python {
namespace {

// Note [interruptible wait] (python/src/common.cpp) for c10d's Work.wait,
// which torch's binding calls with the GIL released: between slices the
// Python main thread takes the GIL briefly to run signal handlers. The
// backend calls this through set_wait_interrupt().
uint64_t g_main_thread = 0;  // threading.main_thread().ident

void check_signals() {
  if (!Py_IsInitialized() || PyThread_get_thread_ident() != g_main_thread) return;
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

}  // namespace
}  // namespace gradwire::python

PYBIND11_MODULE(_C_torch, m) {
  using namespace gradwire::python;
  using gradwire::torch::Backend;
  namespace py = pybind11;
  // Registers c10d's Python types (Store, Backend) that our signatures use.
  py::module_::import("torch.distributed");
  g_main_thread =
      py::module_::import("threading").attr("main_thread")().attr("ident").cast<uint64_t>();
  gradwire::torch::set_wait_interrupt(&check_signals);

  py::class_<Backend, c10d::Backend, c10::intrusive_ptr<Backend>>(
      m, "Backend", "torch.distributed backend running on a gradwire Communicator.")
      .def_property_readonly("provider", [](Backend& b) { return b.communicator().provider(); });

  m.def(
      "create_backend",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
         std::chrono::duration<float> timeout) {
        py::gil_scoped_release nogil;
        return Backend::create(store, rank, size,
                               std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      "The creator torch.distributed calls for each group's members.");

  register_powersgd(m);
  register_sharded(m);

  m.def(
      "_shutdown_all",
      [] {
        py::gil_scoped_release nogil;  // engine threads may run Python callbacks
        Backend::shutdown_all();
      },
      "Closes the Communicator of every gradwire Backend still alive (atexit).");

  // Under mpirun, torch.distributed's env:// needs MASTER_ADDR/MASTER_PORT
  // that no one set. gradwire.torch calls this (collective over the mpirun
  // job): rank 0 picks an address and a free port, every rank gets them.
  m.def(
      "_mpi_rendezvous",
      [](const std::string& master_addr, bool single_host) {
        py::gil_scoped_release nogil;
        return gradwire::torch::mpi_master_address(master_addr, single_host);
      },
      py::arg("master_addr"), py::arg("single_host"));

  // The fp16/bf16 hooks' kernels (gradwire.torch.hooks).
  m.def(
      "compress",
      [](const at::Tensor& src, at::Tensor& dst, int divisor) {
        py::gil_scoped_release nogil;
        gradwire::torch::compress(src, dst, divisor);
      },
      py::arg("src"), py::arg("dst"), py::arg("divisor"));
  m.def(
      "decompress",
      [](const at::Tensor& src, at::Tensor& dst) {
        py::gil_scoped_release nogil;
        gradwire::torch::decompress(src, dst);
      },
      py::arg("src"), py::arg("dst"));
}
