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
#include <algorithm>
#include <cstdio>

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

}  // namespace

void save_sharded_checkpoint(Communicator& comm, const std::string& dir, uint64_t step,
                             const ShardedEngine& engine, const CheckpointOptions& options) {
  const ShardedState s = engine.state();
  CheckpointOptions o = options;
  o.meta[kMetaFingerprint] = hex(s.fingerprint);
  o.meta[kMetaStage] = std::to_string(s.stage);
  o.meta[kMetaOptimizer] = s.optimizer;
  save_checkpoint(comm, dir, step, {{kEntry, s.encode()}}, o);
}

std::optional<uint64_t> load_sharded_checkpoint(Communicator& comm, const std::string& dir,
                                                ShardedEngine& engine) {
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
    const Manifest m = read_manifest(path, uint64_t(chosen));
    const auto fp = m.meta.find(kMetaFingerprint);
    if (fp == m.meta.end()) {
      raise(ErrorCode::InvalidArgument, "rank {}: {} is not a sharded engine's checkpoint (its "
            "manifest has no {}: written by save_checkpoint?); load it with "
            "load_latest_checkpoint", rank, path, kMetaFingerprint);
    }
    const std::string ours = hex(parameter_list_fingerprint(engine.parameters()));
    if (fp->second != ours) {
      raise(ErrorCode::InvalidArgument, "rank {}: {} is a checkpoint of another model "
            "(fingerprint {}; this engine's parameters: {}, {} parameters): the number, sizes "
            "or dtypes of the parameters differ", rank, path, fp->second, ours, engine.size());
    }
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
      if (s.world != comm.size() || s.rank != rank) {
        s.error_feedback_layout = 0;
        s.error_feedback.clear();
      }
      // The first state stays even if empty: load_state checks each
      // source's model, stage and optimizer.
      if (r == 0 || !s.records.empty()) states.push_back(std::move(s));
    }
  });
  sharded::agree(comm, outcome, fmt::format("reading sharded checkpoint {}", path));
  std::vector<const ShardedState*> sources;
  for (const auto& s : states) sources.push_back(&s);
  engine.load_state(sources);
  return uint64_t(chosen);
}

}  // namespace gradwire
