// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "gradwire/torch/elastic.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include <cstring>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "gradwire/error.h"

namespace gradwire::torch {

namespace {

// Length-prefixed fields: [u64 count] then per field [u64 size][bytes].
std::string pack(const std::vector<std::string>& fields) {
  std::string out;
  auto put = [&](uint64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(fields.size());
  for (const auto& f : fields) {
    put(f.size());
    out += f;
  }
  return out;
}

std::vector<std::string> unpack(const std::string& s) {
  size_t at = 0;
  auto get = [&]() {
    uint64_t v = 0;
    if (s.size() - at < sizeof v) {
      throw Error(ErrorCode::Protocol, "elastic DDP: the committed state is truncated");
    }
    std::memcpy(&v, s.data() + at, sizeof v);
    at += sizeof v;
    return v;
  };
  const uint64_t n = get();
  if (n > 16) throw Error(ErrorCode::Protocol, "elastic DDP: the committed state is malformed");
  std::vector<std::string> out;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t len = get();
    if (len > s.size() - at) {
      throw Error(ErrorCode::Protocol, "elastic DDP: the committed state is truncated");
    }
    out.push_back(s.substr(at, size_t(len)));
    at += size_t(len);
  }
  return out;
}

// Parameters and buffers under their names. Loading copies into the
// existing tensors, so the optimizer's references stay valid.
std::string module_bytes(::torch::nn::Module& m) {
  ::torch::serialize::OutputArchive archive;
  for (const auto& p : m.named_parameters()) archive.write("param:" + p.key(), p.value());
  for (const auto& b : m.named_buffers()) archive.write("buffer:" + b.key(), b.value(), true);
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

void load_module(::torch::nn::Module& m, const std::string& bytes) {
  ::torch::serialize::InputArchive archive;
  std::istringstream in(bytes);
  archive.load_from(in);
  ::torch::NoGradGuard no_grad;
  for (auto& p : m.named_parameters()) {
    ::torch::Tensor t;
    archive.read("param:" + p.key(), t);
    p.value().copy_(t);
  }
  for (auto& b : m.named_buffers()) {
    ::torch::Tensor t;
    archive.read("buffer:" + b.key(), t, true);
    b.value().copy_(t);
  }
}

std::string optimizer_bytes(::torch::optim::Optimizer& o) {
  ::torch::serialize::OutputArchive archive;
  o.save(archive);
  std::ostringstream out;
  archive.save_to(out);
  return out.str();
}

void load_optimizer(::torch::optim::Optimizer& o, const std::string& bytes) {
  ::torch::serialize::InputArchive archive;
  std::istringstream in(bytes);
  archive.load_from(in);
  o.load(archive);
}

std::string rng_bytes() {
  auto state = at::detail::getDefaultCPUGenerator().get_state();
  return std::string(static_cast<const char*>(state.data_ptr()), size_t(state.numel()));
}

void load_rng(const std::string& bytes) {
  auto state = ::torch::empty({int64_t(bytes.size())}, ::torch::kUInt8);
  std::memcpy(state.data_ptr(), bytes.data(), bytes.size());
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  gen.set_state(state);
}

}  // namespace

ElasticDistributedDataParallel::ElasticDistributedDataParallel(
    ElasticGroup& group, std::shared_ptr<::torch::nn::Module> module,
    ::torch::optim::Optimizer& optimizer, ElasticDDPOptions options)
    : group_(group), module_(std::move(module)), optimizer_(optimizer),
      onebit_(dynamic_cast<OneBitOptimizer*>(&optimizer)), options_(std::move(options)) {
  if (options_.commit_every < 1) {
    throw Error(ErrorCode::InvalidArgument, "ElasticDDPOptions::commit_every is 0 (expected >= 1)");
  }
  if (bool(options_.save_extra) != bool(options_.load_extra)) {
    throw Error(ErrorCode::InvalidArgument,
                "ElasticDDPOptions: save_extra and load_extra go together (one is empty)");
  }
  if (options_.powersgd && !options_.ddp.comm_hook) {
    throw Error(ErrorCode::InvalidArgument,
                "ElasticDDPOptions::powersgd is set but ddp.comm_hook is empty (expected "
                "powersgd_hook(powersgd))");
  }
  if (onebit_) {
    if (options_.powersgd || options_.ddp.comm_hook) {
      throw Error(ErrorCode::InvalidArgument,
                  "ElasticDDPOptions: a comm hook (powersgd or ddp.comm_hook) with a 1-bit "
                  "optimizer, which averages the gradients itself (there is no DDP)");
    }
    if (&onebit_->communicator() != &group_.communicator()) {
      throw Error(ErrorCode::InvalidArgument,
                  "ElasticDistributedDataParallel: the 1-bit optimizer is not over "
                  "group.communicator() (build it over the current generation's, right before "
                  "this)");
    }
    onebit_generation_ = group_.generation();
  }
  adopt(group_.state());
  // A job's first generation commits its starting point, so that a failure
  // before the first step_done() has a state to return to.
  if (!group_.state().restored) commit();
}

ElasticDistributedDataParallel::~ElasticDistributedDataParallel() = default;

DistributedDataParallel& ElasticDistributedDataParallel::ddp() {
  if (!ddp_) {
    throw Error(ErrorCode::InvalidArgument,
                "ElasticDistributedDataParallel::ddp(): there is no DDP with a 1-bit optimizer "
                "(it averages the gradients itself): call the module directly");
  }
  return *ddp_;
}

void ElasticDistributedDataParallel::adopt(const ElasticState& state) {
  ddp_.reset();
  if (onebit_ && onebit_generation_ != group_.generation()) {
    // Collective, matching the constructor of a joiner's optimizer over this
    // generation (Note [1-bit optimizers under elastic generations]); the
    // parameters broadcast from rank 0 are also what a fresh start (nothing
    // committed) needs.
    onebit_->rebind(group_.communicator());
    onebit_generation_ = group_.generation();
  }
  std::vector<std::string> fields;
  if (state.restored) {
    fields = unpack(state.shared);
    if (fields.size() != 5) {
      throw Error(ErrorCode::Protocol, "elastic DDP: the committed state has " +
                                           std::to_string(fields.size()) + " parts, not 5");
    }
    load_module(*module_, fields[0]);
    if (onebit_) {
      onebit_->core().load_state(fields[1]);  // replicated: the error feedback restarts at zero
    } else {
      load_optimizer(optimizer_, fields[1]);
    }
    if (options_.load_extra) options_.load_extra(fields[2]);
    step_ = state.step;
    // This member's own: [generator][PowerSGD state], or nothing (a joiner).
    const auto local = state.local.empty() ? std::vector<std::string>{} : unpack(state.local);
    if (!local.empty()) load_rng(local[0]);
    if (options_.powersgd) {
      if (local.size() == 2 && !local[1].empty()) {
        options_.powersgd->load_state(local[1]);
      } else if (!fields[4].empty()) {
        options_.powersgd->load_state(fields[4]);  // the broadcasting survivor's Q and counters
        options_.powersgd->reset_error_feedback();
      }
    }
  }
  if (onebit_) return;  // no DDP: the optimizer averages the gradients itself
  DDPOptions ddp_options = options_.ddp;
  ddp_options.broadcast_from_rank0 = true;  // members that joined must match bit for bit
  ddp_ = std::make_unique<DistributedDataParallel>(module_, group_.communicator(), ddp_options);
  // The Bucket plan the PowerSGD state's Buckets belong to.
  if (state.restored && !fields[3].empty()) ddp_->load_state(fields[3]);
}

void ElasticDistributedDataParallel::commit() {
  const std::string hook_state = options_.powersgd ? options_.powersgd->save_state() : "";
  // A 1-bit optimizer's replicated state: the same bytes on every member.
  std::string shared = pack({module_bytes(*module_),
                             onebit_ ? onebit_->core().save_replicated_state()
                                     : optimizer_bytes(optimizer_),
                             options_.save_extra ? options_.save_extra() : std::string(),
                             ddp_ ? ddp_->save_state() : std::string(), hook_state});
  if (group_.commit(step_, std::move(shared), pack({rng_bytes(), hook_state}))) {
    ++changes_;
    adopt(group_.state());
  }
}

bool ElasticDistributedDataParallel::step_done() {
  ++step_;
  if (step_ % options_.commit_every != 0) return false;
  const uint64_t before = changes_;
  commit();
  return changes_ != before;
}

uint64_t ElasticDistributedDataParallel::recover(std::exception_ptr error) {
  // A member lost while the next generation builds its DDP (the broadcast
  // from rank 0) fails that generation too: recover again, a bounded number
  // of times (each generation needs at least one more member gone).
  for (int attempt = 0;; ++attempt) {
    ddp_.reset();  // its hooks and Buckets belong to the failed communicator
    const ElasticState& state = group_.recover(error);
    ++changes_;
    try {
      if (!state.restored) {
        // Nothing committed anywhere (a failure inside the first commit):
        // every member restarts from step 0 with rank 0's module.
        step_ = 0;
      }
      adopt(state);
      if (!state.restored) commit();
      return step_;
    } catch (...) {
      if (attempt >= 16) throw;
      error = std::current_exception();
    }
  }
}

}  // namespace gradwire::torch
