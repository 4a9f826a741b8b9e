// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The engine's state: this rank's pieces, the whole model, and loading
// from any set of states that covers this rank's pieces (Note
// [re-sharding]).
#include <algorithm>
#include <cstring>

#include "base/raise.h"
#include "sharded/agree.h"
#include "sharded/engine_impl.h"

namespace gradwire {

namespace {

bool by_position(const ShardedState::Record& a, const ShardedState::Record& b) {
  return a.parameter != b.parameter ? a.parameter < b.parameter : a.offset < b.offset;
}

}  // namespace

ShardedState ShardedEngine::Impl::state() {
  wait_exchanges_quietly();
  ShardedState s;
  s.fingerprint = parameter_list_fingerprint(params_);
  s.stage = options_.stage;
  s.world = world_;
  s.rank = rank_;
  s.optimizer = optimizer_ ? optimizer_->kind() : "";
  s.state_names = state_names_;
  s.step = steps_;
  s.loss_scale = scale_;
  s.good_steps = good_steps_;
  for (const auto& p : params_) s.dtypes.push_back(p.dtype);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bk = *buckets_[b];
    const size_t es = element_size(bk.dtype);
    const std::byte* values = own_params(b);
    for (const ShardPiece& pc : bk.planned->pieces[size_t(rank_)]) {
      ShardedState::Record r;
      r.parameter = pc.parameter;
      r.offset = pc.offset;
      r.count = pc.count;
      r.values.assign(values + pc.shard_offset * es, values + (pc.shard_offset + pc.count) * es);
      r.master.assign(bk.master + pc.shard_offset, bk.master + pc.shard_offset + pc.count);
      for (const auto& st : bk.state) {
        r.state.emplace_back(st.begin() + ptrdiff_t(pc.shard_offset),
                             st.begin() + ptrdiff_t(pc.shard_offset + pc.count));
      }
      s.records.push_back(std::move(r));
    }
  }
  std::sort(s.records.begin(), s.records.end(), by_position);
  save_error_feedback(s);
  return s;
}

// Collective: each Bucket's shards allgathered in Bucket order (the same
// collectives on every rank), one Bucket at a time.
ShardedState ShardedEngine::Impl::full_state() {
  ShardedState s = state();
  s.stage = 0;
  s.world = 1;
  s.rank = 0;
  s.records.clear();
  s.error_feedback_layout = 0;  // per rank: not part of the whole model
  s.error_feedback.clear();
  auto gather = [&](const void* shard, void* full, size_t padded, DataType dt) {
    if (padded == 0) return;
    comm_.allgather(shard, full, padded, dt).wait();
  };
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bk = *buckets_[b];
    const ShardedBucket& pb = *bk.planned;
    const size_t es = element_size(bk.dtype);
    std::vector<std::byte> values_temp;
    const std::byte* values = bk.params.get();
    if (options_.stage == 3) {
      values_temp.resize(pb.padded * es);
      gather(bk.params.get(), values_temp.data(), pb.padded, bk.dtype);
      values = values_temp.data();
    }
    std::vector<float> master(pb.padded);
    gather(bk.master, master.data(), pb.padded, DataType::Float32);
    std::vector<std::vector<float>> states(bk.state.size(), std::vector<float>(pb.padded));
    for (size_t k = 0; k < bk.state.size(); ++k) {
      gather(bk.state[k].data(), states[k].data(), pb.padded, DataType::Float32);
    }
    for (size_t k = 0; k < pb.parameters.size(); ++k) {
      const size_t i = pb.parameters[k], at = pb.offsets[k], n = params_[i].elements;
      if (n == 0) continue;
      ShardedState::Record r;
      r.parameter = i;
      r.count = n;
      r.values.assign(values + at * es, values + (at + n) * es);
      r.master.assign(master.begin() + ptrdiff_t(at), master.begin() + ptrdiff_t(at + n));
      for (const auto& st : states) {
        r.state.emplace_back(st.begin() + ptrdiff_t(at), st.begin() + ptrdiff_t(at + n));
      }
      s.records.push_back(std::move(r));
    }
  }
  std::sort(s.records.begin(), s.records.end(), by_position);
  return s;
}

// Note [re-sharding]: a state is a set of parameter element ranges, not a
// shard of some plan, so whatever world size (and shard boundaries) wrote
// it, loading is the same: for each piece of this rank's shards, find the
// records that cover its elements, in whichever sources hold them, and copy
// the overlaps. A checkpoint of N ranks loads into M ranks for any M, and a
// full state (every parameter whole, stage 0) loads into any stage. The
// new shards are built aside and installed only once every rank has built
// its own (Note [every rank raises the same error] in agree.h), so a
// failed load leaves every engine as it was.
void ShardedEngine::Impl::load_state(const std::vector<const ShardedState*>& sources) {
  wait_exchanges_quietly();
  struct Built {
    std::vector<std::byte> values;  // this rank's shard of the parameters
    std::vector<float> master;
    std::vector<std::vector<float>> state;
  };
  std::vector<Built> built(buckets_.size());
  const ShardedState* first = nullptr;
  const sharded::Outcome outcome = sharded::attempt([&] {
    const std::string who = fmt::format("{}: load_state", where());
    if (sources.empty()) raise(ErrorCode::InvalidArgument, "{}: no states given", who);
    const uint64_t fingerprint = parameter_list_fingerprint(params_);
    const std::string kind = optimizer_ ? optimizer_->kind() : "";
    first = sources[0];
    // Where each parameter's records are: (offset, count, source, record).
    struct Range {
      size_t offset, count;
      const ShardedState::Record* record;
    };
    std::vector<std::vector<Range>> ranges(params_.size());
    for (size_t k = 0; k < sources.size(); ++k) {
      const ShardedState& s = *sources[k];
      const std::string src = fmt::format("state {} (rank {} of {})", k, s.rank, s.world);
      if (s.fingerprint != fingerprint || s.dtypes.size() != params_.size()) {
        raise(ErrorCode::InvalidArgument, "{}: {} is of another model ({} parameters, fingerprint "
              "{:016x}; this engine's: {} parameters, {:016x})", who, src, s.dtypes.size(),
              s.fingerprint, params_.size(), fingerprint);
      }
      if (s.stage != 0 && s.stage != options_.stage) {
        raise(ErrorCode::InvalidArgument, "{}: {} was saved by a stage-{} engine and this one is "
              "stage {}; convert through a full state (full_state() of the stage-{} engine)", who,
              src, s.stage, options_.stage, s.stage);
      }
      if (s.optimizer != kind || s.state_names != state_names_) {
        raise(ErrorCode::InvalidArgument, "{}: {} holds the state of optimizer '{}' and this "
              "engine's is '{}'", who, src, s.optimizer, kind);
      }
      if (s.step != first->step) {
        raise(ErrorCode::InvalidArgument, "{}: the states are of different steps ({} and {})",
              who, first->step, s.step);
      }
      for (const auto& r : s.records) {
        const size_t es = element_size(params_[r.parameter].dtype);
        if (r.offset > params_[r.parameter].elements ||
            r.count > params_[r.parameter].elements - r.offset || r.values.size() != r.count * es ||
            r.master.size() != r.count || r.state.size() != state_names_.size()) {
          raise(ErrorCode::InvalidArgument, "{}: {}: a record of parameter {} (elements [{}, "
                "+{})) does not fit it ({} elements)", who, src, name_of(r.parameter), r.offset,
                r.count, params_[r.parameter].elements);
        }
        ranges[r.parameter].push_back({r.offset, r.count, &r});
      }
    }
    for (auto& v : ranges) {
      std::sort(v.begin(), v.end(), [](const Range& a, const Range& b) { return a.offset < b.offset; });
    }
    for (size_t b = 0; b < buckets_.size(); ++b) {
      const Bucket& bk = *buckets_[b];
      const size_t n = bk.planned->shard, es = element_size(bk.dtype);
      Built& out = built[b];
      out.values.assign(n * es, std::byte{0});
      out.master.assign(n, 0.0f);
      out.state.assign(state_names_.size(), std::vector<float>(n, 0.0f));
      for (const ShardPiece& pc : bk.planned->pieces[size_t(rank_)]) {
        size_t at = pc.offset;
        const size_t end = pc.offset + pc.count;
        for (const Range& rg : ranges[pc.parameter]) {
          if (at == end) break;
          if (rg.offset + rg.count <= at || rg.offset > at) continue;
          const size_t to = std::min(end, rg.offset + rg.count), cnt = to - at;
          const size_t from = at - rg.offset, dst = pc.shard_offset + (at - pc.offset);
          std::memcpy(out.values.data() + dst * es, rg.record->values.data() + from * es, cnt * es);
          std::memcpy(out.master.data() + dst, rg.record->master.data() + from, cnt * 4);
          for (size_t k = 0; k < out.state.size(); ++k) {
            std::memcpy(out.state[k].data() + dst, rg.record->state[k].data() + from, cnt * 4);
          }
          at = to;
        }
        if (at != end) {
          raise(ErrorCode::InvalidArgument, "{}: elements [{}, {}) of parameter {} are in none of "
                "the {} given states (a checkpoint's shards missing?)", who, at, end,
                name_of(pc.parameter), sources.size());
        }
      }
    }
  });
  sharded::agree(comm_, outcome, "loading the sharded state");

  if (options_.stage == 3) release_all_units();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bk = *buckets_[b];
    if (bk.planned->shard == 0) continue;
    std::memcpy(own_params(b), built[b].values.data(), built[b].values.size());
    // For float32 parameters the master is that same memory: it wins.
    std::memcpy(bk.master, built[b].master.data(), built[b].master.size() * 4);
    for (size_t k = 0; k < bk.state.size(); ++k) bk.state[k] = std::move(built[b].state[k]);
  }
  steps_ = first->step;
  // This rank's own error feedback if a source has it, else zeros (Note
  // [compressed gradient reduce-scatter] in compressed.cpp).
  load_error_feedback(sources);
  scale_ = options_.loss_scaling.enabled ? first->loss_scale : 1.0f;
  good_steps_ = first->good_steps;
  phase_ = Phase::Idle;
  if (options_.stage < 3) {
    start_exchange();
    wait_parameters();
  }
}

}  // namespace gradwire
