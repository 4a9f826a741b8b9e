// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The files of a checkpoint directory (Note [checkpoint layout] in
// checkpoint.cpp), shared by the per-rank checkpoints and the sharded
// engine's, which re-shard and so read other ranks' shards (sharded.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/format.h"
#include "gradwire/communicator.h"

namespace gradwire::checkpoint {

inline constexpr const char* kManifest = "MANIFEST";
// Note [a lost checkpoint is not a fresh start] in checkpoint.cpp.
inline constexpr const char* kCommitted = "COMMITTED";

std::string step_name(uint64_t step);  // "step-000000000100"
std::string shard_name(int rank);      // "shard-00001.bin"

// Raise InvalidArgument naming the file and errno's text.
void fsync_dir(const std::string& dir);
// `bytes` to dir/name atomically: a temporary file, fsync, rename, fsync
// of the directory.
void write_atomically(const std::string& dir, const std::string& name, std::string_view bytes);
// The whole file, refusing more than `cap` bytes (ENOENT -> nullopt).
std::optional<std::string> read_file(const std::string& path, uint64_t cap);

// Step directories under `dir`, newest first, with whether each has a
// MANIFEST.
struct StepDir {
  uint64_t step;
  std::string path;
  bool complete;
};
std::vector<StepDir> list_steps(const std::string& dir);
// Keeps the newest `keep` complete checkpoints at or below `newest`.
void prune(const std::string& dir, uint64_t newest, size_t keep);

// Collective: the newest complete step in `dir` (rank 0 looks, broadcasts),
// -1 if there is none; Protocol on every rank where manifests were lost.
int64_t choose_latest(Communicator& comm, const std::string& dir);
// The step directory's MANIFEST, parsed and checked against `step`.
Manifest read_manifest(const std::string& step_dir, uint64_t step);
// Rank `rank`'s shard file, its size and SHA-256 checked against the
// manifest (Protocol naming the file: missing, truncated or corrupt).
std::string read_verified_shard(const std::string& step_dir, const Manifest& m, int rank);

}  // namespace gradwire::checkpoint
