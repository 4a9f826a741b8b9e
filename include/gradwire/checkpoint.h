// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Checkpoints of everything a training job holds between steps, one shard
// per rank plus a manifest, written so that a process killed at any moment
// leaves the previous checkpoint loadable (Note [checkpoint layout] in
// src/checkpoint/checkpoint.cpp).
//
//   std::map<std::string, std::string> mine = {
//       {"reducer", ddp.reducer().save_state()},
//       {"powersgd", powersgd->save_state()}, ...};     // this rank's bytes
//   gradwire::save_checkpoint(comm, "ckpt", step, mine);   // collective
//   ...
//   if (auto c = gradwire::load_latest_checkpoint(comm, "ckpt")) {  // collective
//     reducer.load_state(c->get("reducer")); ...
//   }
//
// The entries are opaque bytes: the caller serialises device buffers to host
// bytes (the same bytes whether they came from a GPU or a CPU), so a
// checkpoint moves between accelerator kinds. Every rank writes its own
// shard (error-feedback buffers differ between ranks); rank 0 writes the
// manifest last, with each shard's size and SHA-256. The directory must be
// visible to every rank under the same path (a shared filesystem, as with
// torch.distributed.checkpoint).
#pragma once

#include "gradwire/export.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "gradwire/communicator.h"
#include "gradwire/sharded.h"

namespace gradwire {


struct GRADWIRE_API CheckpointOptions {
  // Complete checkpoints kept after a save (older ones are deleted); at
  // least 1.
  size_t keep = 2;
  // Job-wide facts recorded in the manifest (options, model name, ...);
  // rank 0's are written. load_latest_checkpoint returns them.
  std::map<std::string, std::string> meta;
};

class GRADWIRE_API Checkpoint {
 public:
  uint64_t step() const { return step_; }
  int world_size() const { return world_size_; }
  // Where it was read from ("ckpt/step-000000000100").
  const std::string& path() const { return path_; }
  bool has(const std::string& name) const { return entries_.count(name) != 0; }
  // This rank's entry `name`; InvalidArgument naming the shard if absent.
  const std::string& get(const std::string& name) const;
  const std::map<std::string, std::string>& entries() const { return entries_; }
  const std::map<std::string, std::string>& meta() const { return meta_; }

 private:
  friend std::optional<Checkpoint> load_latest_checkpoint(Communicator&, const std::string&);
  uint64_t step_ = 0;
  int world_size_ = 0;
  int rank_ = 0;
  std::string path_;
  std::map<std::string, std::string> entries_;
  std::map<std::string, std::string> meta_;
};

// Collective: every rank writes `entries` as its shard of checkpoint `step`
// in `dir`; returns once the manifest is durable on disk. Each file is
// written to a temporary name, fsynced and renamed; the manifest, renamed
// into place last, is what makes the checkpoint exist. Errors (disk full,
// permissions) are raised on every rank, naming the rank and the file.
GRADWIRE_API void save_checkpoint(Communicator& comm, const std::string& dir, uint64_t step,
                     const std::map<std::string, std::string>& entries,
                     const CheckpointOptions& options = {});

// Collective: the newest complete checkpoint in `dir` (one with a manifest;
// a save interrupted before its manifest is ignored), or nullopt if there is
// none. Each rank reads and verifies its own shard. Raised on every rank:
// a checkpoint written by a different number of ranks (InvalidArgument:
// re-sharding is not supported), a shard whose size or SHA-256 differs from
// the manifest (Protocol, naming the file: corrupted or truncated), a
// malformed manifest or shard (Protocol).
GRADWIRE_API std::optional<Checkpoint> load_latest_checkpoint(Communicator& comm, const std::string& dir);

// A sharded engine's checkpoint (Note [sharded checkpoints] in
// src/checkpoint/sharded.cpp): collective; every rank saves its pieces
// (parameters, fp32 master weights, optimizer state; ShardedState) as its
// shard, with the model's fingerprint, stage and optimizer in the manifest.
// Otherwise as save_checkpoint (same layout, atomicity and pruning).
GRADWIRE_API void save_sharded_checkpoint(Communicator& comm, const std::string& dir,
                                          uint64_t step, const ShardedEngine& engine,
                                          const CheckpointOptions& options = {});

// Collective: loads the newest complete sharded checkpoint in `dir` into
// `engine`, whatever number of ranks wrote it (re-sharding: each rank reads
// the shards that hold its pieces), and returns its step; nullopt if there
// is none. Raised on every rank, leaving every engine unchanged: a
// checkpoint of another model (InvalidArgument), stage or optimizer, or
// one written by save_checkpoint (InvalidArgument); a missing, truncated or
// corrupt shard (Protocol, naming the file).
// `check_meta`, if set, is called on every rank with the chosen
// checkpoint's manifest meta and path, after the fingerprint check and
// before any shard is read: what it raises is raised on every rank (agreed
// on), the engine unchanged. Adapters use it to refuse checkpoints of a
// model with the same fingerprint but other names or shapes.
using CheckpointMetaCheck =
    std::function<void(const std::map<std::string, std::string>& meta, const std::string& path)>;
GRADWIRE_API std::optional<uint64_t> load_sharded_checkpoint(
    Communicator& comm, const std::string& dir, ShardedEngine& engine,
    const CheckpointMetaCheck& check_meta = {});

// Note [unsharded checkpoints] in src/checkpoint/sharded.cpp: the same
// checkpoints for a job that holds its state itself (an unsharded DDP job).

// Collective: saves `state` (this rank's records: any element ranges of the
// parameters; stage 0 for a job that is not sharded) as this rank's shard
// of a sharded checkpoint, with the manifest save_sharded_checkpoint
// writes. Every rank's state must be of the same model, optimizer and step;
// together their records must cover every parameter, which the loaders
// check.
GRADWIRE_API void save_sharded_state(Communicator& comm, const std::string& dir, uint64_t step,
                                     const ShardedState& state,
                                     const CheckpointOptions& options = {});

// A sharded checkpoint read whole (load_full_sharded_checkpoint).
struct GRADWIRE_API FullShardedCheckpoint {
  uint64_t step = 0;   // the checkpoint's step (its directory)
  std::string path;    // "ckpt/step-000000000100"
  int world_size = 0;  // of the job that wrote it
  int stage = 0;       // of the job that wrote it (0: not sharded)
  std::map<std::string, std::string> meta;
  // Stage 0, world 1: one record per parameter with elements, each whole.
  ShardedState state;
};

// Collective: the newest sharded checkpoint in `dir` (any world size and
// stage, or an unsharded job's), every parameter whole on every rank:
// what an unsharded job loads. nullopt if there is none. Raised on every
// rank: a checkpoint of another model than `parameters` (InvalidArgument;
// the number, sizes or dtypes differ), one written by save_checkpoint
// (InvalidArgument), shards that disagree on the optimizer or step or
// leave elements uncovered (InvalidArgument, naming the parameter), a
// missing, truncated or corrupt shard (Protocol, naming the file).
GRADWIRE_API std::optional<FullShardedCheckpoint> load_full_sharded_checkpoint(
    Communicator& comm, const std::string& dir, const std::vector<ShardedParameter>& parameters);

}  // namespace gradwire
