// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The files of a checkpoint directory (Note [checkpoint layout] in
// checkpoint.cpp): names, atomic writes, capped reads, the step
// directories, choosing the newest complete one, and reading a manifest
// and a verified shard. Shared by save/load_latest_checkpoint and the
// sharded engine's checkpoints (sharded.cpp), which read other ranks'
// shards.
#include "checkpoint/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "base/fd.h"
#include "base/logging.h"
#include "base/raise.h"
#include "sharded/agree.h"

namespace gradwire::checkpoint {

namespace fs = std::filesystem;
using Fd = UniqueFd;

std::string step_name(uint64_t step) { return fmt::format("step-{:012d}", step); }
std::string shard_name(int rank) { return fmt::format("shard-{:05d}.bin", rank); }
void fsync_dir(const std::string& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0 || ::fsync(fd.get()) != 0) {
    raise(ErrorCode::InvalidArgument, "cannot fsync directory {}: {}", dir, errno_text(errno));
  }
}

// `bytes` to `path` atomically: a temporary file, fsync, rename, fsync of
// the directory.
void write_atomically(const std::string& dir, const std::string& name, std::string_view bytes) {
  const std::string path = dir + "/" + name;
  const std::string tmp = path + ".tmp";
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) {
    raise(ErrorCode::InvalidArgument, "cannot create {}: {}", tmp, errno_text(errno));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      raise(ErrorCode::InvalidArgument, "cannot write {}: {}", tmp, errno_text(errno));
    }
    done += size_t(n);
  }
  if (::fsync(fd.get()) != 0) {
    raise(ErrorCode::InvalidArgument, "cannot fsync {}: {}", tmp, errno_text(errno));
  }
  if (::close(fd.release()) != 0) {
    raise(ErrorCode::InvalidArgument, "cannot close {}: {}", tmp, errno_text(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    raise(ErrorCode::InvalidArgument, "cannot rename {} to {}: {}", tmp, path, errno_text(errno));
  }
  fsync_dir(dir);
}

// The whole file, refusing more than `cap` bytes (ENOENT -> nullopt).
std::optional<std::string> read_file(const std::string& path, uint64_t cap) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::nullopt;
    raise(ErrorCode::InvalidArgument, "cannot open {}: {}", path, errno_text(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    raise(ErrorCode::InvalidArgument, "cannot stat {}: {}", path, errno_text(errno));
  }
  if (uint64_t(st.st_size) > cap) {
    raise(ErrorCode::Protocol, "{} has {} bytes, more than expected ({}): corrupt or not ours",
          path, uint64_t(st.st_size), cap);
  }
  std::string out(size_t(st.st_size), '\0');
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(fd.get(), out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) raise(ErrorCode::InvalidArgument, "cannot read {}: {}", path, errno_text(errno));
    if (n == 0) break;  // shrank meanwhile: the checksum will say so
    done += size_t(n);
  }
  out.resize(done);
  return out;
}

// Step directories under `dir`, newest first, with whether each has a
// MANIFEST.
std::vector<StepDir> list_steps(const std::string& dir) {
  std::vector<StepDir> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() != 17 || name.rfind("step-", 0) != 0) continue;
    uint64_t step = 0;
    bool digits = true;
    for (char c : name.substr(5)) {
      if (c < '0' || c > '9') digits = false;
      step = step * 10 + uint64_t(c - '0');
    }
    if (!digits || !e.is_directory(ec)) continue;
    out.push_back({step, e.path().string(), fs::exists(e.path() / kManifest, ec)});
  }
  std::sort(out.begin(), out.end(), [](const StepDir& a, const StepDir& b) { return a.step > b.step; });
  return out;
}

void prune(const std::string& dir, uint64_t newest, size_t keep) {
  size_t complete_seen = 0;
  for (const StepDir& s : list_steps(dir)) {
    if (s.step > newest) continue;  // a later (incomplete) save of another run: not ours
    bool remove = false;
    if (s.complete) remove = ++complete_seen > keep;
    else remove = s.step < newest;  // an interrupted save, superseded
    if (!remove) continue;
    std::error_code ec;
    // The MANIFEST first: a prune killed half-way leaves an incomplete
    // directory, never a complete one with missing shards.
    fs::remove(fs::path(s.path) / kManifest, ec);
    fs::remove_all(s.path, ec);
    if (ec) log().warn("checkpoint: could not remove {}: {}", s.path, ec.message());
  }
}


int64_t choose_latest(Communicator& comm, const std::string& dir) {
  // Rank 0 picks the newest complete step; everybody loads that one.
  int64_t chosen = -1;
  const sharded::Outcome s = sharded::attempt([&] {
    if (comm.rank() != 0) return;
    const std::vector<StepDir> steps = list_steps(dir);
    for (const StepDir& d : steps) {
      if (d.complete) {
        chosen = int64_t(d.step);
        break;
      }
    }
    if (chosen >= 0 || steps.empty()) return;
    // Note [a lost checkpoint is not a fresh start].
    const auto committed = read_file(dir + "/" + kCommitted, 64);
    if (!committed && steps.size() < 2) return;  // an interrupted first save
    std::vector<std::string> names;
    for (const StepDir& d : steps) names.push_back(step_name(d.step));
    std::string cm;  // the step, digits only: the file is not trusted
    if (committed) {
      for (char ch : *committed)
        if (ch >= '0' && ch <= '9') cm += ch;
    }
    if (cm.empty()) cm = "?";
    raise(ErrorCode::Protocol,
          "{} holds step directories ({}) but no complete checkpoint: none has its {}, {}; "
          "its manifests were deleted or lost. Refusing to start afresh, which would discard "
          "the run: restore the {} files, or remove or rename {} to start afresh deliberately",
          dir, fmt::join(names, ", "), kManifest,
          committed ? fmt::format("though checkpoint step {} was completed here ({})",
                                  cm, kCommitted)
                    : "though only completed saves leave more than one",
          kManifest, dir);
  });
  sharded::agree(comm, s, fmt::format("looking for checkpoints in {}", dir));
  comm.broadcast(&chosen, &chosen, 1, DataType::Int64, 0).wait();
  return chosen;
}

Manifest read_manifest(const std::string& step_dir, uint64_t step) {
  const std::string manifest_path = step_dir + "/" + kManifest;
  auto text = read_file(manifest_path, kMaxManifestBytes);
  if (!text) {
    raise(ErrorCode::InvalidArgument, "{} is missing on this rank (rank 0 sees it): the "
          "checkpoint directory must be shared by all ranks", manifest_path);
  }
  Manifest m = decode_manifest(*text, manifest_path);
  if (m.step != step) {
    raise(ErrorCode::Protocol, "{} says step {}, its directory step {}", manifest_path, m.step,
          step);
  }
  return m;
}

std::string read_verified_shard(const std::string& step_dir, const Manifest& m, int rank) {
  const ShardRecord& rec = m.shards.at(size_t(rank));
  const std::string shard_path = step_dir + "/" + shard_name(rank);
  auto bytes = read_file(shard_path, rec.bytes);
  if (!bytes) raise(ErrorCode::Protocol, "{} is missing (the manifest lists it)", shard_path);
  if (bytes->size() != rec.bytes) {
    raise(ErrorCode::Protocol, "{} has {} bytes, the manifest says {}: truncated", shard_path,
          bytes->size(), rec.bytes);
  }
  const std::string sum = sha256_hex(*bytes);
  if (sum != rec.sha256) {
    raise(ErrorCode::Protocol, "{} is corrupt: SHA-256 {} but the manifest says {}", shard_path,
          sum, rec.sha256);
  }
  return std::move(*bytes);
}

}  // namespace gradwire::checkpoint
