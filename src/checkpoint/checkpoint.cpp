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

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "base/fd.h"
#include "checkpoint/format.h"
#include "base/raise.h"
#include "base/logging.h"
#include "gradwire/version.h"

namespace gradwire {

namespace fs = std::filesystem;

namespace {

std::string step_name(uint64_t step) { return fmt::format("step-{:012d}", step); }
std::string shard_name(int rank) { return fmt::format("shard-{:05d}.bin", rank); }
constexpr const char* kManifest = "MANIFEST";
constexpr const char* kCommitted = "COMMITTED";  // Note [a lost checkpoint is not a fresh start]

using Fd = UniqueFd;

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
struct StepDir {
  uint64_t step;
  std::string path;
  bool complete;
};
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

// One rank's outcome of a phase, exchanged so that every rank raises the
// same error: [code + 1 or 0 for success][message, NUL-padded].
constexpr size_t kStatusBytes = 512;
struct Status {
  int code = -1;  // -1: success
  std::string message;
};
std::vector<char> encode_status(const Status& s) {
  std::vector<char> out(kStatusBytes, '\0');
  out[0] = char(s.code + 1);
  std::memcpy(out.data() + 1, s.message.data(), std::min(s.message.size(), kStatusBytes - 2));
  return out;
}
Status decode_status(const char* p) {
  Status s;
  s.code = int(uint8_t(p[0])) - 1;
  s.message.assign(p + 1, strnlen(p + 1, kStatusBytes - 1));
  return s;
}

template <typename Fn>
Status attempt(Fn&& fn) {
  Status s;
  try {
    fn();
  } catch (const Error& e) {
    s.code = int(e.code());
    s.message = e.message();
  } catch (const std::exception& e) {
    s.code = int(ErrorCode::Internal);
    s.message = e.what();
  }
  return s;
}

// Every rank's status; raises the first failure on every rank.
void agree(Communicator& comm, const Status& mine, const char* phase) {
  std::vector<char> all(kStatusBytes * size_t(comm.size()));
  const auto buf = encode_status(mine);
  comm.allgather(buf.data(), all.data(), all.size(), DataType::UInt8).wait();
  std::vector<int> failed;
  Status first;
  for (int r = 0; r < comm.size(); ++r) {
    Status s = decode_status(all.data() + size_t(r) * kStatusBytes);
    if (s.code < 0) continue;
    if (failed.empty()) first = s;
    failed.push_back(r);
  }
  if (failed.empty()) return;
  const ErrorCode code = first.code <= int(ErrorCode::Unauthenticated) ? ErrorCode(first.code)
                                                                        : ErrorCode::Internal;
  raise(code, "rank {}: {} failed on rank(s) {}; rank {}: {}", comm.rank(), phase,
        fmt::join(failed, ", "), failed[0], first.message);
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

}  // namespace

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
  Status s = attempt([&] {
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
  agree(comm, s, fmt::format("checkpoint step {}: creating {}", step, step_dir).c_str());

  // Phase 2 (every rank): its shard, durable; then sizes and checksums.
  checkpoint::ShardRecord mine;
  s = attempt([&] {
    const std::string bytes = checkpoint::encode_shard(entries);
    mine.bytes = bytes.size();
    mine.sha256 = checkpoint::sha256_hex(bytes);
    write_atomically(step_dir, shard_name(rank), bytes);
  });
  agree(comm, s, fmt::format("checkpoint step {}: writing the shards", step).c_str());
  std::vector<uint64_t> sizes(size_t(comm.size()));
  comm.allgather(&mine.bytes, sizes.data(), sizes.size(), DataType::Int64).wait();  // same bits
  std::vector<char> sums(64 * size_t(comm.size()));
  comm.allgather(mine.sha256.data(), sums.data(), sums.size(), DataType::UInt8).wait();

  // Phase 3 (rank 0): the MANIFEST, which makes the checkpoint exist; then
  // older checkpoints go.
  s = attempt([&] {
    if (rank != 0) return;
    checkpoint::Manifest m;
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
  agree(comm, s, fmt::format("checkpoint step {}: writing the manifest", step).c_str());
  log().info("rank {}: checkpoint step {} written to {}", rank, step, step_dir);
}

std::optional<Checkpoint> load_latest_checkpoint(Communicator& comm, const std::string& dir) {
  const int rank = comm.rank();
  // Rank 0 picks the newest complete step; everybody loads that one.
  int64_t chosen = -1;
  Status s = attempt([&] {
    if (rank != 0) return;
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
  agree(comm, s, fmt::format("looking for checkpoints in {}", dir).c_str());
  comm.broadcast(&chosen, &chosen, 1, DataType::Int64, 0).wait();
  if (chosen < 0) return std::nullopt;

  Checkpoint c;
  c.rank_ = rank;
  c.step_ = uint64_t(chosen);
  c.path_ = dir + "/" + step_name(c.step_);
  s = attempt([&] {
    const std::string manifest_path = c.path_ + "/" + kManifest;
    auto text = read_file(manifest_path, checkpoint::kMaxManifestBytes);
    if (!text) {
      raise(ErrorCode::InvalidArgument, "{} is missing on this rank (rank 0 sees it): the "
            "checkpoint directory must be shared by all ranks", manifest_path);
    }
    const checkpoint::Manifest m = checkpoint::decode_manifest(*text, manifest_path);
    if (m.step != c.step_) {
      raise(ErrorCode::Protocol, "{} says step {}, its directory step {}", manifest_path, m.step,
            c.step_);
    }
    if (m.world_size != comm.size()) {
      raise(ErrorCode::InvalidArgument, "{} was written by {} ranks and this job has {}; "
            "gradwire does not re-shard checkpoints (error-feedback buffers are per rank): "
            "resume with {} ranks", c.path_, m.world_size, comm.size(), m.world_size);
    }
    const checkpoint::ShardRecord& rec = m.shards[size_t(rank)];
    const std::string shard_path = c.path_ + "/" + shard_name(rank);
    auto bytes = read_file(shard_path, rec.bytes);
    if (!bytes) raise(ErrorCode::Protocol, "{} is missing (the manifest lists it)", shard_path);
    if (bytes->size() != rec.bytes) {
      raise(ErrorCode::Protocol, "{} has {} bytes, the manifest says {}: truncated", shard_path,
            bytes->size(), rec.bytes);
    }
    const std::string sum = checkpoint::sha256_hex(*bytes);
    if (sum != rec.sha256) {
      raise(ErrorCode::Protocol, "{} is corrupt: SHA-256 {} but the manifest says {}", shard_path,
            sum, rec.sha256);
    }
    c.entries_ = checkpoint::decode_shard(*bytes, shard_path);
    c.meta_ = m.meta;
    c.world_size_ = m.world_size;
  });
  agree(comm, s, fmt::format("loading checkpoint {}", c.path_).c_str());
  log().info("rank {}: loaded checkpoint step {} from {}", rank, c.step_, c.path_);
  return c;
}

}  // namespace gradwire
