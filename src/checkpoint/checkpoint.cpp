// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
//
// Note [checkpoint layout]:
//
//   <dir>/step-000000000100/shard-00000.bin   rank 0's entries
//                          /shard-00001.bin   rank 1's entries ...
//                          /MANIFEST          written last, by rank 0
//
// A checkpoint exists when its MANIFEST does. Every file is written under a
// temporary name, fsynced, renamed into place and its directory fsynced, so
// a process killed at any moment leaves either no file or a whole one. The
// order is: every rank's shard durable -> an allgather of their sizes and
// SHA-256s -> rank 0's MANIFEST durable. A save killed before the MANIFEST
// rename leaves a step directory without one, which loading ignores (and the
// next save deletes); the previous checkpoint is untouched, because saves
// only delete checkpoints older than the newest `keep` complete ones, after
// the new MANIFEST is durable. Re-saving a step that already has a
// checkpoint first removes its MANIFEST (durably), so the step is never
// "complete" with shards of two different saves.
//
// Note [a lost checkpoint is not a fresh start]: after each MANIFEST,
// rank 0 also writes <dir>/COMMITTED (atomically) with that step. A
// directory with step directories but no complete checkpoint is then either
// a first save that was interrupted (one step directory, no COMMITTED:
// loading returns nullopt and the job starts afresh, losing nothing) or a
// run whose manifests were deleted or lost (COMMITTED exists, or several
// step directories do, which only completed saves leave): loading refuses
// with Protocol on every rank rather than return nullopt, which a training
// script takes for "start afresh" and would then overwrite the run (issue
// 17). To start afresh deliberately, remove or rename the directory.
//
// Loading picks the newest step directory with a MANIFEST (rank 0 looks,
// broadcasts the step), then every rank reads the manifest and its own
// shard and checks the shard's size and SHA-256; an allgather of the
// outcomes makes every rank raise the same error, naming the rank and file.
#include "gradwire/checkpoint.h"
#include "gradwire/digest.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <vector>

#include "base/fd.h"
#include "base/logging.h"
#include "base/raise.h"
#include "checkpoint/files.h"
#include "checkpoint/format.h"
#include "gradwire/version.h"
#include "sharded/agree.h"

namespace gradwire {

namespace fs = std::filesystem;
using namespace checkpoint;

const std::string& Checkpoint::get(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    std::vector<std::string> names;
    for (const auto& e : entries_) names.push_back(e.first);
    raise(ErrorCode::InvalidArgument, "rank {}: checkpoint {} has no entry '{}' in this rank's "
          "shard (it holds: {})", rank_, path_, name, fmt::join(names, ", "));
  }
  return it->second;
}

std::string sha256_hex(std::string_view bytes) { return checkpoint::sha256_hex(bytes); }

void save_checkpoint(Communicator& comm, const std::string& dir, uint64_t step,
                     const std::map<std::string, std::string>& entries,
                     const CheckpointOptions& options) {
  const int rank = comm.rank();
  const std::string step_dir = dir + "/" + step_name(step);
  // Phase 1 (rank 0): the step directory, without a MANIFEST.
  sharded::Outcome s = sharded::attempt([&] {
    if (rank != 0) return;
    std::error_code ec;
    fs::create_directories(step_dir, ec);
    if (ec) raise(ErrorCode::InvalidArgument, "cannot create {}: {}", step_dir, ec.message());
    const std::string manifest = step_dir + "/" + kManifest;
    if (::unlink(manifest.c_str()) == 0) {
      fsync_dir(step_dir);  // re-saving a step: it is incomplete from here on
    } else if (errno != ENOENT) {
      raise(ErrorCode::InvalidArgument, "cannot remove {}: {}", manifest, errno_text(errno));
    }
  });
  sharded::agree(comm, s, fmt::format("checkpoint step {}: creating {}", step, step_dir));

  // Phase 2 (every rank): its shard, durable; then sizes and checksums.
  ShardRecord mine;
  s = sharded::attempt([&] {
    const std::string bytes = checkpoint::encode_shard(entries);
    mine.bytes = bytes.size();
    mine.sha256 = checkpoint::sha256_hex(bytes);
    write_atomically(step_dir, shard_name(rank), bytes);
  });
  sharded::agree(comm, s, fmt::format("checkpoint step {}: writing the shards", step));
  std::vector<uint64_t> sizes(size_t(comm.size()));
  comm.allgather(&mine.bytes, sizes.data(), sizes.size(), DataType::Int64).wait();  // same bits
  std::vector<char> sums(64 * size_t(comm.size()));
  comm.allgather(mine.sha256.data(), sums.data(), sums.size(), DataType::UInt8).wait();

  // Phase 3 (rank 0): the MANIFEST, which makes the checkpoint exist; then
  // older checkpoints go.
  s = sharded::attempt([&] {
    if (rank != 0) return;
    Manifest m;
    m.step = step;
    m.world_size = comm.size();
    m.version = std::string(version());
    m.meta = options.meta;
    for (int r = 0; r < comm.size(); ++r) {
      m.shards.push_back({sizes[size_t(r)], std::string(sums.data() + 64 * size_t(r), 64)});
    }
    write_atomically(step_dir, kManifest, checkpoint::encode_manifest(m));
    write_atomically(dir, kCommitted, std::to_string(step) + "\n");
    prune(dir, step, std::max<size_t>(1, options.keep));
  });
  sharded::agree(comm, s, fmt::format("checkpoint step {}: writing the manifest", step));
  log().info("rank {}: checkpoint step {} written to {}", rank, step, step_dir);
}

std::optional<Checkpoint> load_latest_checkpoint(Communicator& comm, const std::string& dir) {
  const int rank = comm.rank();
  const int64_t chosen = choose_latest(comm, dir);
  if (chosen < 0) return std::nullopt;

  Checkpoint c;
  c.rank_ = rank;
  c.step_ = uint64_t(chosen);
  c.path_ = dir + "/" + step_name(c.step_);
  const sharded::Outcome s = sharded::attempt([&] {
    const Manifest m = read_manifest(c.path_, c.step_);
    if (m.world_size != comm.size()) {
      raise(ErrorCode::InvalidArgument, "{} was written by {} ranks and this job has {}; "
            "gradwire does not re-shard these checkpoints (error-feedback buffers are per rank; "
            "a sharded engine's checkpoint re-shards: load_sharded_checkpoint): resume with {} "
            "ranks", c.path_, m.world_size, comm.size(), m.world_size);
    }
    const std::string shard_path = c.path_ + "/" + shard_name(rank);
    c.entries_ = decode_shard(read_verified_shard(c.path_, m, rank), shard_path);
    c.meta_ = m.meta;
    c.world_size_ = m.world_size;
  });
  sharded::agree(comm, s, fmt::format("loading checkpoint {}", c.path_));
  log().info("rank {}: loaded checkpoint step {} from {}", rank, c.step_, c.path_);
  return c;
}

}  // namespace gradwire
