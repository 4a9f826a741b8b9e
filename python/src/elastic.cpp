// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// gradwire.ElasticGroup: elastic membership (gradwire/elastic.h) for
// Python. gradwire.torch.elastic builds torch DDP on top of it.
#include <pybind11/stl.h>

#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include "common.h"
#include "gradwire/elastic.h"

namespace gradwire::python {

namespace {

py::dict state_dict(const ElasticState& s) {
  py::dict d;
  d["restored"] = s.restored;
  d["step"] = s.step;
  d["shared"] = py::bytes(s.shared);
  d["local"] = py::bytes(s.local);
  return d;
}

}  // namespace

void register_elastic(py::module_& m) {
  using GroupPtr = std::shared_ptr<ElasticGroup>;
  py::class_<ElasticGroup, GroupPtr>(
      m, "ElasticGroup",
      "Elastic membership (C++: gradwire/elastic.h): generations of members over a store that "
      "outlives them. gradwire.torch.elastic builds torch DDP on it.")
      .def_static(
          "join",
          [](std::optional<double> timeout, std::optional<std::string> provider,
             std::optional<std::string> iface, std::optional<double> settle, int min_size) {
            Options o = make_options(timeout, provider, iface);
            ElasticOptions e;
            e.min_size = min_size;
            if (settle) {
              if (!(std::isfinite(*settle) && *settle >= 0 && *settle <= 1e6)) {
                throw Error(ErrorCode::InvalidArgument,
                            "ElasticGroup.join: settle must be seconds in [0, 1e6]");
              }
              e.settle = std::chrono::milliseconds(std::llround(*settle * 1000));
            }
            py::gil_scoped_release nogil;
            return GroupPtr(ElasticGroup::join(o, Rendezvous::from_environment(), e));
          },
          py::arg("timeout") = py::none(), py::arg("provider") = py::none(),
          py::arg("iface") = py::none(), py::arg("settle") = py::none(),
          py::arg("min_size") = 1,
          "Joins the elastic job of GRADWIRE_ETCD_ENDPOINTS (etcd, across hosts) or "
          "GRADWIRE_STORE_DIR (a shared directory) (RANK: the preferred rank, WORLD_SIZE: "
          "the first generation's size). The first WORLD_SIZE processes form generation 0; a "
          "later one waits until the members' next commit() lets it in.")
      .def_property_readonly("rank", &ElasticGroup::rank)
      .def_property_readonly("size", &ElasticGroup::size)
      .def_property_readonly("generation", &ElasticGroup::generation)
      .def_property_readonly("recoveries", &ElasticGroup::recoveries)
      .def_property_readonly(
          "communicator",
          [](const GroupPtr& g) {
            // Shares the group's ownership: the Communicator itself is the
            // generation's and is replaced at the next membership change.
            return std::shared_ptr<Communicator>(g, &g->communicator());
          },
          "The current generation's gradwire.Communicator (e.g. for a 1-bit optimizer given "
          "to gradwire.torch.elastic.ElasticDDP). Valid until the next membership change; "
          "do not keep it across one.")
      .def_property_readonly(
          "state", [](const ElasticGroup& g) { return state_dict(g.state()); },
          "What the latest membership change agreed on: {'restored', 'step', 'shared', "
          "'local'} (shared: the same bytes on every member).")
      .def(
          "commit",
          [](ElasticGroup& g, uint64_t step, const py::bytes& shared, const py::bytes& local) {
            std::string s = shared, l = local;
            py::gil_scoped_release nogil;
            return g.commit(step, std::move(s), std::move(l));
          },
          py::arg("step"), py::arg("shared"), py::arg("local") = py::bytes(),
          "Keeps (step, shared, local) in memory as this member's newest commit; collective. "
          "True if a process joined here (a new generation: read .state).")
      .def(
          "recover",
          [](ElasticGroup& g, const std::string& why) {
            // The caller (gradwire.torch.elastic) has decided that `why` is a
            // lost or stuck member: hand it on as one.
            auto error = std::make_exception_ptr(Error(ErrorCode::PeerLost, why));
            ElasticState state;
            {
              py::gil_scoped_release nogil;
              state = g.recover(error);
            }
            return state_dict(state);
          },
          py::arg("why"),
          "After a collective failed because a member was lost: forms the next generation "
          "with the members that are alive; returns .state.")
      .def(
          "broadcast",
          [](ElasticGroup& g, const py::bytes& data, int root) {
            // Small control data over the current generation (e.g. where its
            // torch store listens); the length first, so only root needs it.
            std::string bytes = data;
            {
              py::gil_scoped_release nogil;
              Communicator& c = g.communicator();
              uint64_t n = bytes.size();
              c.broadcast(&n, &n, 1, DataType::Int64, root).wait();
              if (n > (uint64_t(1) << 30)) {
                throw Error(ErrorCode::Protocol,
                            "ElasticGroup.broadcast: rank " + std::to_string(g.rank()) +
                                " was told of " + std::to_string(n) +
                                " bytes (at most 1 GiB): the members disagree on the root");
              }
              bytes.resize(size_t(n));
              if (n) c.broadcast(bytes.data(), bytes.data(), n, DataType::UInt8, root).wait();
            }
            return py::bytes(bytes);
          },
          py::arg("data"), py::arg("root") = 0,
          "Collective over the current generation: every member gets root's bytes (the others' "
          "`data` is ignored).")
      .def(
          "finish",
          [](ElasticGroup& g) {
            py::gil_scoped_release nogil;
            g.finish();
          },
          "The job is over: a process still waiting to join fails at once (AbortedError).");
}

}  // namespace gradwire::python
