// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [sharded checkpoints]: a sharded engine's checkpoint is an ordinary
// checkpoint (Note [checkpoint layout] in checkpoint.cpp) whose shards each
// hold one entry, the rank's ShardedState (its parameter element ranges
// with their values, master weights and optimizer state), and whose
// manifest records the model's fingerprint, stage, optimizer and writer's
// world size. Because a ShardedState is a set of element ranges rather
// than a shard of one plan, any number of ranks can load it (Note
// [re-sharding] in src/sharded/state.cpp): each loading rank reads every
// shard file in turn (verified against the manifest's size and SHA-256),
// keeps only the records that overlap its own pieces and drops the rest,
// so a rank holds at most one foreign shard plus what it needs. Reading
// errors are agreed on (Note [every rank raises the same error] in
// src/sharded/agree.h) before the engine's own collective load.
//
// Note [unsharded checkpoints]: an unsharded job (DDP: every rank holds
// every parameter whole, with its optimizer state) writes the same
// checkpoints, with stage 0 in its states and manifest: each rank saves a
// slice of the full state (save_sharded_state; the libtorch and Python
// adapters write elements [n*r/N, n*(r+1)/N) of each n-element parameter
// at rank r of N), rather than rank 0 writing everything, so the ranks
// share the writing and the files hold one copy of the model, not N. The
// engine's load_state takes stage-0 records at any stage (Note
// [re-sharding] in src/sharded/state.cpp), so load_sharded_checkpoint
// loads such a checkpoint into any stage and world size unchanged. The
// other way, load_full_sharded_checkpoint reads every shard of a sharded
// (or unsharded) checkpoint on every rank and joins the records into one
// whole record per parameter: the full state an unsharded job holds. It
// checks what load_state would (model, optimizer, step, coverage) itself,
// as no engine does it.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "base/raise.h"
#include "checkpoint/files.h"
#include "checkpoint/format.h"
#include "gradwire/checkpoint.h"
#include "gradwire/sharded.h"
#include "sharded/agree.h"

namespace gradwire {

using namespace checkpoint;

namespace {

constexpr const char* kEntry = "sharded_engine";
constexpr const char* kMetaFingerprint = "gradwire.sharded.fingerprint";
constexpr const char* kMetaStage = "gradwire.sharded.stage";
constexpr const char* kMetaOptimizer = "gradwire.sharded.optimizer";

std::string hex(uint64_t v) { return fmt::format("{:016x}", v); }

// Records of `s` that overlap the element ranges `mine` (by parameter).
void keep_overlapping(ShardedState& s,
                      const std::vector<std::vector<std::pair<size_t, size_t>>>& mine) {
  std::erase_if(s.records, [&](const ShardedState::Record& r) {
    if (r.parameter >= mine.size()) return false;  // load_state names the misfit
    for (const auto& [lo, hi] : mine[r.parameter]) {
      if (r.offset < hi && lo < r.offset + r.count) return false;
    }
    return true;
  });
}

// Reads every shard of the checkpoint at `path` (step `chosen`) that a
// model with `parameters` may load, keeping the records that overlap
// `mine` (by parameter); the first shard's state always. Raises; run it
// under sharded::attempt.
// `world`: this job's world size, or -1 where no state of the engine's
// gradient compression can be used (an unsharded loader).
std::vector<ShardedState> read_states(
    const std::string& path, uint64_t chosen, int rank, int world,
    const std::vector<ShardedParameter>& parameters,
    const std::vector<std::vector<std::pair<size_t, size_t>>>& mine, Manifest* manifest,
    const CheckpointMetaCheck* check_meta = nullptr) {
  const Manifest m = read_manifest(path, chosen);
  const auto fp = m.meta.find(kMetaFingerprint);
  if (fp == m.meta.end()) {
    raise(ErrorCode::InvalidArgument, "rank {}: {} is not a sharded engine's checkpoint (its "
          "manifest has no {}: written by save_checkpoint?); load it with "
          "load_latest_checkpoint", rank, path, kMetaFingerprint);
  }
  const std::string ours = hex(parameter_list_fingerprint(parameters));
  if (fp->second != ours) {
    raise(ErrorCode::InvalidArgument, "rank {}: {} is a checkpoint of another model "
          "(fingerprint {}; this model's: {}, {} parameters): the number, sizes "
          "or dtypes of the parameters differ", rank, path, fp->second, ours, parameters.size());
  }
  if (check_meta && *check_meta) (*check_meta)(m.meta, path);
  std::vector<ShardedState> states;
  for (int r = 0; r < m.world_size; ++r) {
    const std::string shard_path = path + "/" + shard_name(r);
    const auto entries = decode_shard(read_verified_shard(path, m, r), shard_path);
    const auto it = entries.find(kEntry);
    if (it == entries.end()) {
      raise(ErrorCode::Protocol, "rank {}: {} has no entry '{}'", rank, shard_path, kEntry);
    }
    ShardedState s = ShardedState::decode(it->second, shard_path);
    keep_overlapping(s, mine);
    // Another rank's error-feedback buffers (gradient compression) are
    // of no use here and as large as the model: drop them at once.
    if (s.world != world || s.rank != rank) {
      s.error_feedback_layout = 0;
      s.error_feedback.clear();
    }
    // The first state stays even if empty: the loader checks each
    // source's model, stage and optimizer.
    if (r == 0 || !s.records.empty()) states.push_back(std::move(s));
  }
  if (manifest) *manifest = m;
  return states;
}

// Joins `states` (records of any ranges) into one whole record per
// parameter (Note [unsharded checkpoints]); InvalidArgument for states
// that disagree or leave elements uncovered.
ShardedState join_states(const std::vector<ShardedState>& states,
                         const std::vector<ShardedParameter>& parameters,
                         const std::string& who) {
  const ShardedState& first = states.at(0);
  std::vector<std::vector<const ShardedState::Record*>> by_param(parameters.size());
  for (const ShardedState& s : states) {
    const std::string src = fmt::format("the state of rank {} of {}", s.rank, s.world);
    if (s.fingerprint != parameter_list_fingerprint(parameters) ||
        s.dtypes.size() != parameters.size()) {
      raise(ErrorCode::InvalidArgument, "{}: {} is of another model ({} parameters, "
            "fingerprint {}; this model: {} parameters)", who, src, s.dtypes.size(),
            hex(s.fingerprint), parameters.size());
    }
    if (s.optimizer != first.optimizer || s.state_names != first.state_names ||
        s.step != first.step) {
      raise(ErrorCode::InvalidArgument, "{}: the shards disagree: {} holds optimizer '{}' at "
            "step {}, rank {}'s '{}' at step {} (shards of two different saves?)", who, src,
            s.optimizer, s.step, first.rank, first.optimizer, first.step);
    }
    for (const auto& r : s.records) {
      const ShardedParameter& p = parameters[r.parameter];
      if (r.offset > p.elements || r.count > p.elements - r.offset ||
          r.values.size() != r.count * element_size(p.dtype) ||
          r.state.size() != first.state_names.size()) {
        raise(ErrorCode::InvalidArgument, "{}: {}: a record of parameter {} (elements [{}, +{})) "
              "does not fit it ({} elements)", who, src, p.name, r.offset, r.count, p.elements);
      }
      by_param[r.parameter].push_back(&r);
    }
  }
  ShardedState full = first;
  full.stage = 0;
  full.world = 1;
  full.rank = 0;
  full.records.clear();
  for (size_t i = 0; i < parameters.size(); ++i) {
    const size_t n = parameters[i].elements, es = element_size(parameters[i].dtype);
    if (n == 0) continue;
    auto& rs = by_param[i];
    std::sort(rs.begin(), rs.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
    ShardedState::Record out;
    out.parameter = i;
    out.count = n;
    out.values.resize(n * es);
    out.master.resize(n);
    out.state.assign(first.state_names.size(), std::vector<float>(n));
    size_t at = 0;
    for (const ShardedState::Record* r : rs) {
      if (at == n) break;
      if (r->offset > at) break;  // a gap
      if (r->offset + r->count <= at) continue;
      const size_t from = at - r->offset, cnt = r->offset + r->count - at;
      std::memcpy(out.values.data() + at * es, r->values.data() + from * es, cnt * es);
      std::memcpy(out.master.data() + at, r->master.data() + from, cnt * 4);
      for (size_t k = 0; k < out.state.size(); ++k) {
        std::memcpy(out.state[k].data() + at, r->state[k].data() + from, cnt * 4);
      }
      at += cnt;
    }
    if (at != n) {
      raise(ErrorCode::InvalidArgument, "{}: elements [{}, {}) of parameter {} are in none of "
            "the shards (a checkpoint's shards missing?)", who, at, n, parameters[i].name);
    }
    full.records.push_back(std::move(out));
  }
  return full;
}

}  // namespace

void save_sharded_state(Communicator& comm, const std::string& dir, uint64_t step,
                        const ShardedState& state, const CheckpointOptions& options) {
  CheckpointOptions o = options;
  o.meta[kMetaFingerprint] = hex(state.fingerprint);
  o.meta[kMetaStage] = std::to_string(state.stage);
  o.meta[kMetaOptimizer] = state.optimizer;
  save_checkpoint(comm, dir, step, {{kEntry, state.encode()}}, o);
}

std::optional<FullShardedCheckpoint> load_full_sharded_checkpoint(
    Communicator& comm, const std::string& dir, const std::vector<ShardedParameter>& parameters) {
  const int64_t chosen = choose_latest(comm, dir);
  if (chosen < 0) return std::nullopt;
  FullShardedCheckpoint out;
  out.step = uint64_t(chosen);
  out.path = dir + "/" + step_name(out.step);
  const int rank = comm.rank();
  std::vector<std::vector<std::pair<size_t, size_t>>> all(parameters.size());
  for (size_t i = 0; i < parameters.size(); ++i) all[i].emplace_back(0, parameters[i].elements);
  const sharded::Outcome outcome = sharded::attempt([&] {
    Manifest m;
    const std::vector<ShardedState> states =
        read_states(out.path, out.step, rank, -1, parameters, all, &m);
    out.world_size = m.world_size;
    out.meta = m.meta;
    out.stage = states.at(0).stage;
    out.state = join_states(states, parameters,
                            fmt::format("rank {}: loading {} whole", rank, out.path));
  });
  sharded::agree(comm, outcome, fmt::format("reading sharded checkpoint {}", out.path));
  return out;
}

void save_sharded_checkpoint(Communicator& comm, const std::string& dir, uint64_t step,
                             const ShardedEngine& engine, const CheckpointOptions& options) {
  save_sharded_state(comm, dir, step, engine.state(), options);
}

std::optional<uint64_t> load_sharded_checkpoint(Communicator& comm, const std::string& dir,
                                                ShardedEngine& engine,
                                                const CheckpointMetaCheck& check_meta) {
  const int64_t chosen = choose_latest(comm, dir);
  if (chosen < 0) return std::nullopt;
  const std::string path = dir + "/" + step_name(uint64_t(chosen));
  const int rank = comm.rank();

  // The element ranges this rank's shards hold, by parameter.
  std::vector<std::vector<std::pair<size_t, size_t>>> mine(engine.size());
  for (const ShardedBucket& b : engine.plan().buckets) {
    for (const ShardPiece& p : b.pieces[size_t(rank)]) {
      mine[p.parameter].emplace_back(p.offset, p.offset + p.count);
    }
  }
  std::vector<ShardedState> states;
  const sharded::Outcome outcome = sharded::attempt([&] {
    states = read_states(path, uint64_t(chosen), rank, comm.size(), engine.parameters(), mine,
                         nullptr, &check_meta);
  });
  sharded::agree(comm, outcome, fmt::format("reading sharded checkpoint {}", path));
  std::vector<const ShardedState*> sources;
  for (const auto& s : states) sources.push_back(&s);
  engine.load_state(sources);
  return uint64_t(chosen);
}

}  // namespace gradwire
