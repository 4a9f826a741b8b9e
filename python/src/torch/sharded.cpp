// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// gradwire's sharded engine (ZeRO stages 1-3) for Python modules: binds the
// libtorch adapter's gradwire::torch::ShardedDataParallel
// (gradwire/torch/sharded_data_parallel.h) and the engine's optimizers for
// gradwire.torch.ShardedDataParallel (python/gradwire/torch/sharded.py).
//
// Note [mirror module]: the C++ class takes a torch::nn::Module, and a
// Python torch.nn.Module is not one. But its parameters and buffers are
// at::Tensors, and a tensor passed from Python is the same TensorImpl. So
// we build a C++ Module tree that registers exactly the Python module's
// tensors under their names (the same nesting, so the same names and
// order), and wrap that: the C++ class re-points the parameters
// (Tensor::set_data, seen by Python through the same TensorImpl), hooks
// their gradient accumulators (which Python's autograd engine runs, and
// whose final callback goes to the Python engine, the default one once
// torch._C is loaded) and steps the engine. Nothing of the adapter is
// written twice. Python's forward pre-hooks stand in for the use() calls a
// C++ forward makes (Note [forward waits per bucket], Note [stage 3 units]):
// use(name) takes the mirror of the named submodule.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/nn/module.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "gradwire/checkpoint.h"
#include "gradwire/error.h"
#include "gradwire/sharded.h"
#include "gradwire/torch/process_group.h"
#include "gradwire/torch/sharded_data_parallel.h"
#include "gradwire/torch/unsharded_checkpoint.h"
#include "module.h"

namespace gradwire::python {
namespace {

using gradwire::torch::ShardedDataParallel;
using gradwire::torch::ShardedDataParallelOptions;

// One wrapped Python module (Note [mirror module]).
struct PySharded {
  // What keeps the Communicator alive: the group's gradwire Backend.
  c10::intrusive_ptr<gradwire::torch::Backend> backend;
  std::shared_ptr<::torch::nn::Module> mirror;
  std::map<std::string, std::shared_ptr<::torch::nn::Module>> modules;  // by dotted name
  std::shared_ptr<::torch::nn::Module> root_own;  // the root's own parameters only
  std::unique_ptr<ShardedDataParallel> sdp;
  std::optional<ShardedEngine::NoSync> no_sync;

  ShardedDataParallel& get() {
    if (!sdp) throw Error(ErrorCode::InvalidArgument, "ShardedDataParallel: used after close()");
    return *sdp;
  }
};

std::vector<std::string> split(const std::string& name) {
  std::vector<std::string> out;
  size_t at = 0;
  for (;;) {
    const size_t dot = name.find('.', at);
    out.push_back(name.substr(at, dot == std::string::npos ? std::string::npos : dot - at));
    if (dot == std::string::npos) return out;
    at = dot + 1;
  }
}

// The mirror's submodule for the dotted prefix of `parts` (all but the
// last), created in first-use order (Python's order of the submodules).
::torch::nn::Module& owner(const std::shared_ptr<::torch::nn::Module>& root,
                           std::map<std::string, std::shared_ptr<::torch::nn::Module>>& modules,
                           const std::vector<std::string>& parts) {
  std::shared_ptr<::torch::nn::Module> m = root;
  std::string path;
  for (size_t k = 0; k + 1 < parts.size(); ++k) {
    path = path.empty() ? parts[k] : path + "." + parts[k];
    auto it = modules.find(path);
    if (it == modules.end()) {
      auto child = std::make_shared<::torch::nn::Module>(parts[k]);
      m->register_module(parts[k], child);
      it = modules.emplace(path, child).first;
    }
    m = it->second;
  }
  return *m;
}
::torch::nn::Module& owner(PySharded& s, const std::vector<std::string>& parts) {
  return owner(s.mirror, s.modules, parts);
}

// Note [mirror optimizer]: an unsharded (torch DDP) job's checkpoint in the
// sharded format is written and read by the libtorch functions
// (gradwire/torch/unsharded_checkpoint.h), which take a torch::nn::Module
// and a torch::optim optimizer. From Python we pass a mirror module of the
// Python module's parameters (Note [mirror module]) and a libtorch
// optimizer of the same class over the same tensors, whose state is the
// Python optimizer's per-parameter state (the same tensors on saving; on
// loading, handed back for Python to install). Only the class and the
// options that decide the state's layout matter (amsgrad, momentum): the
// hyperparameters are not saved.
struct MirrorOptimizer {
  std::shared_ptr<::torch::nn::Module> module;
  std::unique_ptr<::torch::optim::Optimizer> optimizer;
  std::vector<at::Tensor> params;
};

using ParamStates = std::vector<std::optional<std::pair<int64_t, std::vector<at::Tensor>>>>;

MirrorOptimizer mirror_optimizer(const std::vector<std::pair<std::string, at::Tensor>>& params,
                                 const std::string& kind, bool amsgrad, double momentum) {
  MirrorOptimizer out;
  out.module = std::make_shared<::torch::nn::Module>("mirror");
  std::map<std::string, std::shared_ptr<::torch::nn::Module>> modules;
  for (const auto& [name, t] : params) {
    const std::vector<std::string> parts = split(name);
    owner(out.module, modules, parts).register_parameter(parts.back(), t, t.requires_grad());
    out.params.push_back(t);
  }
  if (kind == "Adam") {
    out.optimizer = std::make_unique<::torch::optim::Adam>(
        out.params, ::torch::optim::AdamOptions().amsgrad(amsgrad));
  } else if (kind == "AdamW") {
    out.optimizer = std::make_unique<::torch::optim::AdamW>(
        out.params, ::torch::optim::AdamWOptions().amsgrad(amsgrad));
  } else if (kind == "SGD") {
    out.optimizer = std::make_unique<::torch::optim::SGD>(
        out.params, ::torch::optim::SGDOptions(0.1).momentum(momentum));
  } else {
    throw Error(ErrorCode::InvalidArgument,
                "the optimizer is torch.optim." + kind + ", not Adam, AdamW or SGD, the ones "
                "the sharded engine has: its state has no place in a sharded checkpoint");
  }
  return out;
}

void put_states(MirrorOptimizer& m, const std::string& kind, const ParamStates& states) {
  for (size_t i = 0; i < m.params.size() && i < states.size(); ++i) {
    if (!states[i]) continue;
    const auto& [step, ts] = *states[i];
    void* key = m.params[i].unsafeGetTensorImpl();
    auto at = [&](size_t k) { return k < ts.size() ? ts[k] : at::Tensor(); };
    if (kind == "SGD") {
      auto st = std::make_unique<::torch::optim::SGDParamState>();
      st->momentum_buffer(at(0));
      m.optimizer->state()[key] = std::move(st);
    } else if (kind == "Adam") {
      auto st = std::make_unique<::torch::optim::AdamParamState>();
      st->step(step);
      st->exp_avg(at(0));
      st->exp_avg_sq(at(1));
      m.optimizer->state()[key] = std::move(st);
    } else {
      auto st = std::make_unique<::torch::optim::AdamWParamState>();
      st->step(step);
      st->exp_avg(at(0));
      st->exp_avg_sq(at(1));
      m.optimizer->state()[key] = std::move(st);
    }
  }
}

ParamStates get_states(MirrorOptimizer& m, const std::string& kind) {
  ParamStates out;
  for (const auto& p : m.params) {
    auto it = m.optimizer->state().find(p.unsafeGetTensorImpl());
    if (it == m.optimizer->state().end() || !it->second) {
      out.emplace_back();
    } else if (kind == "SGD") {
      auto& st = static_cast<::torch::optim::SGDParamState&>(*it->second);
      out.emplace_back(std::make_pair(int64_t(0), std::vector<at::Tensor>{st.momentum_buffer()}));
    } else if (kind == "Adam") {
      auto& st = static_cast<::torch::optim::AdamParamState&>(*it->second);
      out.emplace_back(std::make_pair(st.step(),
                                      std::vector<at::Tensor>{st.exp_avg(), st.exp_avg_sq()}));
    } else {
      auto& st = static_cast<::torch::optim::AdamWParamState&>(*it->second);
      out.emplace_back(std::make_pair(st.step(),
                                      std::vector<at::Tensor>{st.exp_avg(), st.exp_avg_sq()}));
    }
  }
  return out;
}

DataType dtype_named(const std::string& name) {
  if (name == "float32") return DataType::Float32;
  if (name == "bfloat16") return DataType::BFloat16;
  if (name == "float16") return DataType::Float16;
  throw Error(ErrorCode::InvalidArgument,
              "ShardedDataParallel: reduce_dtype must be torch.float32, torch.bfloat16 or "
              "torch.float16, not " + name);
}

std::vector<ShardedState> decode_all(const std::vector<py::bytes>& blobs) {
  std::vector<ShardedState> out;
  for (size_t k = 0; k < blobs.size(); ++k) {
    out.push_back(ShardedState::decode(std::string(blobs[k]), "state " + std::to_string(k)));
  }
  return out;
}

}  // namespace

void register_sharded(py::module_& m) {
  // Note [mirror optimizer]: gradwire.torch.save_ddp_checkpoint / load_ddp_checkpoint.
  m.def(
      "_save_unsharded_checkpoint",
      [](const c10::intrusive_ptr<gradwire::torch::Backend>& backend,
         const std::vector<std::pair<std::string, at::Tensor>>& params, const std::string& kind,
         bool amsgrad, double momentum, const ParamStates& states, const std::string& dir,
         uint64_t step, size_t keep, std::map<std::string, std::string> meta) {
        MirrorOptimizer mo = mirror_optimizer(params, kind, amsgrad, momentum);
        put_states(mo, kind, states);
        CheckpointOptions o;
        o.keep = keep;
        o.meta = std::move(meta);
        py::gil_scoped_release nogil;
        gradwire::torch::save_unsharded_checkpoint(backend->communicator(), dir, step, *mo.module,
                                                   *mo.optimizer, o);
      },
      py::arg("backend"), py::arg("params"), py::arg("kind"), py::arg("amsgrad"),
      py::arg("momentum"), py::arg("states"), py::arg("dir"), py::arg("step"), py::arg("keep"),
      py::arg("meta"));
  m.def(
      "_load_unsharded_checkpoint",
      [](const c10::intrusive_ptr<gradwire::torch::Backend>& backend,
         const std::vector<std::pair<std::string, at::Tensor>>& params, const std::string& kind,
         bool amsgrad, double momentum,
         const std::string& dir) -> std::optional<std::pair<uint64_t, ParamStates>> {
        MirrorOptimizer mo = mirror_optimizer(params, kind, amsgrad, momentum);
        std::optional<uint64_t> step;
        {
          py::gil_scoped_release nogil;
          step = gradwire::torch::load_unsharded_checkpoint(backend->communicator(), dir,
                                                            *mo.module, *mo.optimizer);
        }
        if (!step) return std::nullopt;
        return std::make_pair(*step, get_states(mo, kind));
      },
      py::arg("backend"), py::arg("params"), py::arg("kind"), py::arg("amsgrad"),
      py::arg("momentum"), py::arg("dir"));
  py::class_<ShardOptimizer, std::shared_ptr<ShardOptimizer>>(
      m, "ShardOptimizer", "An optimizer of gradwire's sharded engine (gradwire/sharded.h).")
      .def_property_readonly("kind", &ShardOptimizer::kind)
      .def_property("lr", &ShardOptimizer::lr, &ShardOptimizer::set_lr);
  m.def(
      "_shard_adam",
      [](double lr, double beta1, double beta2, double eps, double weight_decay, bool decoupled) {
        return std::shared_ptr<ShardOptimizer>(ShardAdam::make(
            {.lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = eps,
             .weight_decay = weight_decay, .decoupled = decoupled}));
      },
      py::arg("lr"), py::arg("beta1"), py::arg("beta2"), py::arg("eps"),
      py::arg("weight_decay"), py::arg("decoupled"));
  m.def(
      "_shard_sgd",
      [](double lr, double momentum, double dampening, double weight_decay, bool nesterov) {
        return std::shared_ptr<ShardOptimizer>(ShardSgd::make(
            {.lr = lr, .momentum = momentum, .dampening = dampening,
             .weight_decay = weight_decay, .nesterov = nesterov}));
      },
      py::arg("lr"), py::arg("momentum"), py::arg("dampening"), py::arg("weight_decay"),
      py::arg("nesterov"));

  py::class_<PySharded, std::shared_ptr<PySharded>>(
      m, "ShardedDataParallel",
      "gradwire::torch::ShardedDataParallel over a mirror of a Python module's tensors "
      "(gradwire.torch.ShardedDataParallel wraps it).")
      .def(py::init([](const c10::intrusive_ptr<gradwire::torch::Backend>& backend,
                       const std::vector<std::tuple<std::string, at::Tensor, bool>>& tensors,
                       std::shared_ptr<ShardOptimizer> optimizer, int stage,
                       size_t first_bucket_bytes, size_t bucket_bytes, size_t alignment,
                       std::optional<std::string> reduce_dtype, double max_grad_norm,
                       bool loss_scaling, float initial_scale, float growth, float backoff,
                       uint64_t growth_interval, float min_scale, bool find_unused_parameters,
                       size_t max_buckets_in_flight, bool overlap_parameter_gather,
                       std::vector<std::string> units,
                       std::optional<std::string> gradient_compression,
                       size_t compression_block_size, bool error_feedback,
                       uint64_t compression_start_step, bool reshard_after_forward,
                       std::optional<std::string> parameter_compression,
                       size_t parameter_compression_block_size,
                       uint64_t parameter_compression_start_step) {
             auto s = std::make_shared<PySharded>();
             s->backend = backend;
             s->mirror = std::make_shared<::torch::nn::Module>("mirror");
             s->root_own = std::make_shared<::torch::nn::Module>("root");
             for (const auto& [name, t, buffer] : tensors) {
               const std::vector<std::string> parts = split(name);
               ::torch::nn::Module& o = owner(*s, parts);
               if (buffer) {
                 o.register_buffer(parts.back(), t);
               } else {
                 o.register_parameter(parts.back(), t, t.requires_grad());
                 if (parts.size() == 1) s->root_own->register_parameter(name, t, t.requires_grad());
               }
             }
             ShardedDataParallelOptions o;
             o.stage = stage;
             o.caps.first_bucket_bytes = first_bucket_bytes;
             o.caps.bucket_bytes = bucket_bytes;
             o.alignment = alignment;
             if (reduce_dtype) o.reduce_dtype = dtype_named(*reduce_dtype);
             o.optimizer = std::move(optimizer);
             o.max_grad_norm = max_grad_norm;
             o.loss_scaling = {.enabled = loss_scaling, .initial = initial_scale,
                               .growth = growth, .backoff = backoff,
                               .growth_interval = growth_interval, .min_scale = min_scale};
             o.find_unused_parameters = find_unused_parameters;
             o.max_buckets_in_flight = max_buckets_in_flight;
             o.overlap_parameter_gather = overlap_parameter_gather;
             o.units = std::move(units);
             o.reshard_after_forward = reshard_after_forward;
             if (gradient_compression && *gradient_compression == "int8") {
               o.gradient_compression.kind = gradwire::GradientCompression::Int8;
             } else if (gradient_compression && *gradient_compression != "none") {
               throw py::value_error("ShardedDataParallel: gradient_compression must be None, "
                                     "'none' or 'int8', not '" + *gradient_compression + "'");
             }
             o.gradient_compression.block_size = compression_block_size;
             o.gradient_compression.error_feedback = error_feedback;
             o.gradient_compression.start_step = compression_start_step;
             if (parameter_compression && *parameter_compression == "int8") {
               o.parameter_compression.kind = gradwire::ParameterCompression::Int8;
             } else if (parameter_compression && *parameter_compression != "none") {
               throw py::value_error("ShardedDataParallel: parameter_compression must be None, "
                                     "'none' or 'int8', not '" + *parameter_compression + "'");
             }
             o.parameter_compression.block_size = parameter_compression_block_size;
             o.parameter_compression.start_step = parameter_compression_start_step;
             py::gil_scoped_release nogil;
             s->sdp = std::make_unique<ShardedDataParallel>(s->mirror, backend->communicator(),
                                                            std::move(o));
             return s;
           }),
           py::arg("backend"), py::arg("tensors"), py::arg("optimizer"), py::arg("stage"),
           py::arg("first_bucket_bytes"), py::arg("bucket_bytes"), py::arg("alignment"),
           py::arg("reduce_dtype"), py::arg("max_grad_norm"), py::arg("loss_scaling"),
           py::arg("initial_scale"), py::arg("growth"), py::arg("backoff"),
           py::arg("growth_interval"), py::arg("min_scale"), py::arg("find_unused_parameters"),
           py::arg("max_buckets_in_flight"), py::arg("overlap_parameter_gather"),
           py::arg("units"), py::arg("gradient_compression") = std::nullopt,
           py::arg("compression_block_size") = 256, py::arg("error_feedback") = true,
           py::arg("compression_start_step") = 0, py::arg("reshard_after_forward") = true,
           py::arg("parameter_compression") = std::nullopt,
           py::arg("parameter_compression_block_size") = 256,
           py::arg("parameter_compression_start_step") = 0)
      .def("step",
           [](PySharded& s) {
             py::gil_scoped_release nogil;
             return s.get().step();
           })
      // "" is the root module's own parameters; else a dotted submodule name.
      .def("use",
           [](PySharded& s, const std::string& name) {
             ::torch::nn::Module* sub = nullptr;
             if (name.empty()) {
               sub = s.root_own.get();
             } else {
               auto it = s.modules.find(name);
               if (it == s.modules.end()) return;  // holds no tensors: nothing to gather
               sub = it->second.get();
             }
             py::gil_scoped_release nogil;
             s.get().use(*sub);
           })
      // After a unit's forward, with its output tensors (Note [reshard after
      // forward]); a name that holds no tensors has nothing to free.
      .def("after_forward",
           [](PySharded& s, const std::string& name, const std::vector<at::Tensor>& outputs) {
             auto it = s.modules.find(name);
             if (it == s.modules.end()) return;
             py::gil_scoped_release nogil;
             s.get().after_forward(*it->second, outputs);
           })
      .def("use_all",
           [](PySharded& s) {
             py::gil_scoped_release nogil;
             s.get().use_all();
           })
      .def("has_module", [](PySharded& s, const std::string& name) {
        return s.modules.count(name) != 0;
      })
      .def("enter_no_sync",
           [](PySharded& s) {
             if (s.no_sync) {
               throw Error(ErrorCode::InvalidArgument,
                           "ShardedDataParallel.no_sync(): already inside no_sync()");
             }
             s.no_sync.emplace(s.get().no_sync());
           })
      .def("exit_no_sync", [](PySharded& s) { s.no_sync.reset(); })
      .def_property_readonly("loss_scale", [](PySharded& s) { return s.get().loss_scale(); })
      .def_property_readonly("optimizer_steps",
                             [](PySharded& s) { return s.get().engine().optimizer_steps(); })
      .def_property_readonly("skipped_steps",
                             [](PySharded& s) { return s.get().engine().skipped_steps(); })
      .def_property_readonly("last_grad_norm",
                             [](PySharded& s) { return s.get().engine().last_grad_norm(); })
      .def_property_readonly("parameter_names",
                             [](PySharded& s) { return s.get().parameter_names(); })
      .def_property_readonly("buckets",
                             [](PySharded& s) { return s.get().engine().plan().buckets.size(); })
      .def("state",
           [](PySharded& s) {
             std::string b;
             {
               py::gil_scoped_release nogil;
               b = s.get().engine().state().encode();
             }
             return py::bytes(b);
           })
      .def("full_state",
           [](PySharded& s) {
             std::string b;
             {
               py::gil_scoped_release nogil;
               b = s.get().full_state().encode();
             }
             return py::bytes(b);
           })
      .def("load_state",
           [](PySharded& s, const std::vector<py::bytes>& blobs) {
             const std::vector<ShardedState> states = decode_all(blobs);
             std::vector<const ShardedState*> ptrs;
             for (const auto& st : states) ptrs.push_back(&st);
             py::gil_scoped_release nogil;
             s.get().load_state(ptrs);
           })
      .def(
          "save_checkpoint",
          [](PySharded& s, const std::string& dir, uint64_t step, size_t keep,
             std::map<std::string, std::string> meta) {
            CheckpointOptions o;
            o.keep = keep;
            o.meta = std::move(meta);
            py::gil_scoped_release nogil;
            s.get().save_checkpoint(dir, step, o);
          },
          py::arg("dir"), py::arg("step"), py::arg("keep"), py::arg("meta"))
      .def("load_checkpoint",
           [](PySharded& s, const std::string& dir) {
             py::gil_scoped_release nogil;
             return s.get().load_checkpoint(dir);
           })
      .def("memory",
           [](PySharded& s) {
             const ShardedMemory mem = s.get().engine().memory();
             py::dict d;
             d["parameters"] = mem.parameters;
             d["gathered"] = mem.gathered;
             d["peak_gathered"] = mem.peak_gathered;
             d["master"] = mem.master;
             d["optimizer_state"] = mem.optimizer_state;
             d["gradients"] = mem.gradients;
             d["bucket_buffers"] = mem.bucket_buffers;
             d["bucket_buffer_count"] = mem.bucket_buffer_count;
             d["scratch"] = mem.scratch;
             d["compression"] = mem.compression;
             d["total"] = mem.total();
             return d;
           })
      // The parameters become plain tensors again (ShardedDataParallel's
      // destructor: stages 1, 2 keep their values, stage 3 gathered whole).
      .def("close", [](PySharded& s) {
        s.no_sync.reset();
        py::gil_scoped_release nogil;
        s.sdp.reset();
      });
}

}  // namespace gradwire::python
