// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// gradwire._C: the direct API. Bindings only: argument conversion, buffer
// views, GIL handling; every collective is the C++ Communicator's.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "buffer.h"
#include "common.h"
#include "gradwire/gradwire.h"

namespace gradwire::python {
void register_compress(py::module_& m);  // compress.cpp
void register_elastic(py::module_& m);   // elastic.cpp
namespace {

using CommPtr = std::shared_ptr<Communicator>;

// A Work plus the Communicator it runs on, which must outlive it.
struct PyWork {
  Work work;
  CommPtr comm;
};

[[noreturn]] void invalid(const std::string& msg) {
  throw Error(ErrorCode::InvalidArgument, msg);
}

std::string op_name(const char* op, const Communicator& c) {
  return std::string("rank ") + std::to_string(c.rank()) + ": " + op;
}

void require_same_dtype(const BufferView& a, const BufferView& b, const std::string& op) {
  if (a.dtype != b.dtype) {
    invalid(op + ": send is " + std::string(to_string(a.dtype)) + " but recv is " +
            std::string(to_string(b.dtype)));
  }
}

void require_count(const BufferView& v, size_t expected, const std::string& op, const char* which,
                   const std::string& rule) {
  if (v.count != expected) {
    invalid(op + ": " + which + " holds " + std::to_string(v.count) + " elements, expected " +
            std::to_string(expected) + " (" + rule + ")");
  }
}

// Submits with the GIL released (submission may wait for queue space) and
// pins the buffers until the collective completes (Note [pinned buffers]).
template <typename Fn>
PyWork submit(const CommPtr& comm, std::vector<py::object> pinned, Fn&& fn) {
  release_unpinned();
  Work w;
  {
    py::gil_scoped_release nogil;
    w = fn();
  }
  pin(w, pinned);
  return PyWork{std::move(w), comm};
}

// "nan", "-1", "0.5": a Python float as a user wrote it, for messages.
std::string number_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

}  // namespace

Options make_options(std::optional<double> timeout, std::optional<std::string> provider,
                     std::optional<std::string> iface) {
  Options o;
  if (timeout) {
    // NaN compares false with everything: test for the good range.
    if (!(std::isfinite(*timeout) && *timeout > 0 && *timeout <= 1e7)) {
      invalid("Communicator.create: timeout must be a number of seconds in (0, 1e7] (got " +
              number_text(*timeout) + ")");
    }
    o.timeout = std::chrono::milliseconds(std::max<long long>(1, std::llround(*timeout * 1000)));
  }
  if (provider) o.transport.provider = *provider;
  if (iface) o.transport.iface = *iface;
  return o;
}

}  // namespace gradwire::python

PYBIND11_MODULE(_C, m) {
  using namespace gradwire;
  using namespace gradwire::python;
  m.doc() = "gradwire's direct API (bindings of the C++ Communicator). See help(gradwire).";
  register_errors(m);

  py::class_<PyWork>(m, "Work",
                     "An asynchronous collective. Copies share state; dropping it does not "
                     "cancel the collective.")
      .def(
          "wait",
          [](PyWork& self, std::optional<double> timeout) {
            if (timeout && !(std::isfinite(*timeout) && *timeout >= 0)) {
              invalid("Work.wait: timeout must be a number of seconds >= 0, or None to wait for "
                      "the collective's own deadline (got " + number_text(*timeout) + ")");
            }
            release_unpinned();
            if (!wait_interruptibly(self.work, timeout ? *timeout : -1.0)) {
              throw Error(ErrorCode::Timeout,
                          self.work.describe() + ": wait(timeout=" + std::to_string(*timeout) +
                              ") returned before the collective finished (it keeps running; "
                              "wait again or raise the timeout)");
            }
            release_unpinned();
          },
          py::arg("timeout") = py::none(),
          "Blocks until the collective finished; raises its gradwire.Error. With `timeout` "
          "(seconds): gradwire.TimeoutError once it passes (the collective keeps running). "
          "Ctrl-C interrupts the wait.")
      .def("test", [](PyWork& self) { return self.work.test(); },
           "True once finished (successfully or not); never raises.")
      .def("describe", [](PyWork& self) { return self.work.describe(); })
      .def("__repr__", [](PyWork& self) {
        return "<gradwire.Work " + self.work.describe() + (self.work.test() ? " done>" : ">");
      });

  // SharedBuffer (Communicator.allocate_shared): bytes with the buffer
  // protocol, so numpy.frombuffer / torch.frombuffer view it without a copy;
  // collectives on such views take the direct path (README "Shared buffers").
  py::class_<SharedBuffer, std::shared_ptr<SharedBuffer>>(m, "SharedBuffer", py::buffer_protocol(),
                                                          "Memory every rank of the host maps "
                                                          "(Communicator.allocate_shared).")
      .def_buffer([](SharedBuffer& b) {
        return py::buffer_info(b.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {py::ssize_t(b.size())}, {py::ssize_t(1)});
      })
      .def("__len__", &SharedBuffer::size)
      .def_property_readonly("direct", &SharedBuffer::direct,
                             "True when the other ranks of the host map it too.");

  py::class_<Communicator, CommPtr>(m, "Communicator",
                                    "A set of ranks running collectives. Buffers: anything "
                                    "with the buffer protocol or __dlpack__, C-contiguous, on "
                                    "the host; used in place, without copies.")
      .def_static(
          "create",
          [](std::optional<double> timeout, std::optional<std::string> provider,
             std::optional<std::string> iface) {
            Options o = make_options(timeout, provider, iface);
            py::gil_scoped_release nogil;
            return CommPtr(Communicator::create(o));
          },
          py::arg("timeout") = py::none(), py::arg("provider") = py::none(),
          py::arg("iface") = py::none(),
          "Joins the job the environment describes (mpirun, torchrun, GRADWIRE_STORE_DIR, or "
          "a world of one). Collective over all ranks. timeout: seconds per collective.")
      .def_property_readonly("rank", &Communicator::rank)
      .def_property_readonly("size", &Communicator::size)
      .def_property_readonly("provider", &Communicator::provider)
      .def_property_readonly("host_count", &Communicator::host_count)
      .def_property_readonly("hierarchical", &Communicator::hierarchical)
      .def(
          "allocate_shared",
          [](const CommPtr& c, size_t nbytes) {
            py::gil_scoped_release nogil;
            return std::make_shared<SharedBuffer>(c->allocate_shared(nbytes));
          },
          py::arg("nbytes"),
          "nbytes of host memory every rank of this host maps (collective: every rank calls "
          "it). View it with numpy.frombuffer(buf, dtype) or torch.frombuffer(buf, dtype=...): "
          "allreduce, reduce_scatter and allgather whose buffers all lie in such memory run "
          "directly between the ranks' memory. Keep the SharedBuffer alive while views exist.")
      .def(
          "split",
          [](const CommPtr& self, std::vector<int> ranks) -> std::optional<CommPtr> {
            std::unique_ptr<Communicator> child;
            {
              py::gil_scoped_release nogil;
              child = self->split(ranks);
            }
            if (!child) return std::nullopt;
            return CommPtr(std::move(child));
          },
          py::arg("ranks"),
          "A sub-communicator of `ranks` (collective over every rank of this one, all passing "
          "the same list); None on ranks that are not members.")
      .def(
          "allreduce",
          [](const CommPtr& c, py::object send, py::object recv, const std::string& op) {
            const std::string what = op_name("allreduce", *c);
            BufferView s = view_buffer(send, recv.is_none(), (what + " send").c_str());
            BufferView r = recv.is_none() ? s : view_buffer(recv, true, (what + " recv").c_str());
            require_same_dtype(s, r, what);
            require_count(r, s.count, what, "recv", "recv has as many elements as send");
            const ReduceOp rop = parse_reduce_op(op);
            return submit(c, {s.owner, r.owner}, [&] {
              return c->allreduce(s.data, r.data, s.count, s.dtype, rop);
            });
          },
          py::arg("send"), py::arg("recv") = py::none(), py::arg("op") = "sum",
          "recv[i] = op over ranks of send[i]; in place when recv is None.")
      .def(
          "reduce_scatter",
          [](const CommPtr& c, py::object send, py::object recv, const std::string& op) {
            const std::string what = op_name("reduce_scatter", *c);
            BufferView s = view_buffer(send, false, (what + " send").c_str());
            BufferView r = view_buffer(recv, true, (what + " recv").c_str());
            require_same_dtype(s, r, what);
            require_count(r, shard_count(s.count, c->size(), c->rank()), what, "recv",
                          "this rank's shard of send: gradwire.shard_count(len(send), size, rank)");
            const ReduceOp rop = parse_reduce_op(op);
            return submit(c, {s.owner, r.owner}, [&] {
              return c->reduce_scatter(s.data, r.data, s.count, s.dtype, rop);
            });
          },
          py::arg("send"), py::arg("recv"), py::arg("op") = "sum",
          "recv = this rank's shard of the reduction of send (shard_count/shard_offset).")
      .def(
          "allgather",
          [](const CommPtr& c, py::object send, py::object recv) {
            const std::string what = op_name("allgather", *c);
            BufferView s = view_buffer(send, false, (what + " send").c_str());
            BufferView r = view_buffer(recv, true, (what + " recv").c_str());
            require_same_dtype(s, r, what);
            require_count(s, shard_count(r.count, c->size(), c->rank()), what, "send",
                          "this rank's shard of recv: gradwire.shard_count(len(recv), size, rank)");
            return submit(c, {s.owner, r.owner}, [&] {
              return c->allgather(s.data, r.data, r.count, r.dtype);
            });
          },
          py::arg("send"), py::arg("recv"),
          "recv = every rank's send, rank r's at shard_offset(len(recv), size, r).")
      .def(
          "broadcast",
          [](const CommPtr& c, py::object buffer, int root) {
            const std::string what = op_name("broadcast", *c);
            BufferView b = view_buffer(buffer, true, (what + " buffer").c_str());
            return submit(c, {b.owner}, [&] {
              return c->broadcast(b.data, b.data, b.count, b.dtype, root);
            });
          },
          py::arg("buffer"), py::arg("root") = 0, "buffer (every rank) = buffer of `root`.")
      .def(
          "alltoall",
          [](const CommPtr& c, py::object send, py::object recv) {
            const std::string what = op_name("alltoall", *c);
            BufferView s = view_buffer(send, recv.is_none(), (what + " send").c_str());
            BufferView r = recv.is_none() ? s : view_buffer(recv, true, (what + " recv").c_str());
            require_same_dtype(s, r, what);
            require_count(r, s.count, what, "recv", "recv has as many elements as send");
            if (s.count % size_t(c->size()) != 0) {
              invalid(what + ": " + std::to_string(s.count) +
                      " elements do not split into " + std::to_string(c->size()) +
                      " equal blocks");
            }
            return submit(c, {s.owner, r.owner}, [&] {
              return c->alltoall(s.data, r.data, s.count / size_t(c->size()), s.dtype);
            });
          },
          py::arg("send"), py::arg("recv") = py::none(),
          "Block j of send goes to rank j; block i of recv comes from rank i.")
      .def("barrier", [](const CommPtr& c) { return submit(c, {}, [&] { return c->barrier(); }); })
      .def(
          "abort",
          [](const CommPtr& c, const std::string& reason) {
            py::gil_scoped_release nogil;
            c->abort(reason);
          },
          py::arg("reason"),
          "Fails pending and future collectives with AbortedError; no buffer is written after "
          "it returns.")
      .def("__repr__", [](const CommPtr& c) {
        return "<gradwire.Communicator rank " + std::to_string(c->rank()) + " of " +
               std::to_string(c->size()) + " over " + c->provider() + ">";
      });

  m.def("shard_count", &shard_count, py::arg("count"), py::arg("size"), py::arg("rank"));
  m.def("shard_offset", &shard_offset, py::arg("count"), py::arg("size"), py::arg("rank"));
  m.attr("__version__") = gradwire::version();
  register_compress(m);
  register_elastic(m);

  // Under srun, torch.distributed's env:// needs torchrun's names, which
  // gradwire.torch fills from this (README "Launching under Slurm"): None
  // when this process is not a task that srun started, else (rank, size,
  // local rank or -1, the step's first node, gradwire's store port, the
  // job). Raises as Rendezvous::from_slurm() does, naming the variable.
  m.def("_slurm_rendezvous", []() -> std::optional<py::tuple> {
    const Rendezvous r = Rendezvous::from_slurm();
    if (r.kind != Rendezvous::Kind::TcpStore) return std::nullopt;
    return py::make_tuple(r.rank, r.size, r.local_rank, r.host, int(r.port), r.job);
  });
}
