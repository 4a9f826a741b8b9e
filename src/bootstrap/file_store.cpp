// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The file store: one file per key in a directory every rank can see (a
// local tmpdir for tests, or a shared file system). A reader must never see
// half a value, so set() writes a temporary file, fsyncs it and renames it
// into place; rename is atomic within a directory, on NFS too.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <optional>
#include <thread>

#include "bootstrap/socket.h"
#include "bootstrap/store.h"
#include "base/raise.h"

namespace gradwire::bootstrap {

namespace {

using std::chrono::milliseconds;

// FNV-1a: stable across processes and builds, unlike std::hash, so every
// rank maps a long key to the same file name.
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// Keys such as "ag/3/1" become "ag%2F3%2F1": letters, digits, '-', '_' and
// '.' are kept, everything else is %XX. A leading '.' is escaped too, so no
// key can become ".", "..", or collide with our ".tmp." files. Names that
// would exceed NAME_MAX keep a readable prefix plus a hash of the whole key.
std::string file_name_for(const std::string& key) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (size_t i = 0; i < key.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(key[i]);
    bool keep = std::isalnum(c) || c == '-' || c == '_' || (c == '.' && i > 0);
    if (keep) {
      out += char(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (out.size() > 200) out = fmt::format("{}~{:016x}", out.substr(0, 160), fnv1a(key));
  return out;
}

// Whole-file read. nullopt if the file does not exist (yet).
std::optional<std::string> read_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return std::nullopt;
    raise(ErrorCode::Transport, "file store: cannot open {}: {}", path, errno_text(errno));
  }
  std::string out;
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n > 0) {
      out.append(buf, size_t(n));
    } else if (n == 0) {
      return out;
    } else if (errno != EINTR) {
      raise(ErrorCode::Transport, "file store: cannot read {}: {}", path, errno_text(errno));
    }
  }
}

class FileStore final : public Store {
 public:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}

  void set(const std::string& key, const std::string& value) override {
    count_store_request();
    check_key(key);
    std::string final_path = path_for(key);
    std::string tmp = write_temporary(key, value);
    if (::rename(tmp.c_str(), final_path.c_str()) != 0) fail_and_unlink("rename", tmp, errno);
    sync_dir();
  }

  // link(2), unlike rename(2), fails with EEXIST when the name is taken, so
  // a complete value appears under the key atomically, and only once.
  bool set_if_absent(const std::string& key, const std::string& value) override {
    count_store_request();
    check_key(key);
    std::string final_path = path_for(key);
    std::string tmp = write_temporary(key, value);
    const int rc = ::link(tmp.c_str(), final_path.c_str());
    const int err = errno;
    ::unlink(tmp.c_str());
    if (rc != 0 && err == EEXIST) return false;
    if (rc != 0) fail("link", final_path, err);
    sync_dir();
    return true;
  }

 private:
  // The value in a new temporary file of the directory, fsynced; its path.
  std::string write_temporary(const std::string& key, const std::string& value) {
    static std::atomic<uint64_t> counter{0};
    // Unique per process and per call, so concurrent writers never share a
    // temporary file; the leading '.' keeps it out of the key namespace.
    std::string tmp = fmt::format("{}/.tmp.{}.{}.{}", dir_, ::getpid(), counter++,
                                  file_name_for(key).substr(0, 64));
    {
      UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
      if (!fd) fail("create", tmp, errno);
      size_t off = 0;
      while (off < value.size()) {
        ssize_t n = ::write(fd.get(), value.data() + off, value.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail_and_unlink("write", tmp, errno);
        off += size_t(n);
      }
      // Without fsync a crash between rename and writeback could expose an
      // empty file under the final name.
      if (::fsync(fd.get()) != 0) fail_and_unlink("fsync", tmp, errno);
    }
    return tmp;
  }

  void sync_dir() {
    UniqueFd dfd(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dfd) ::fsync(dfd.get());  // best effort: make the rename itself durable
  }

 public:
  std::string get(const std::string& key, Deadline deadline,
                  const std::string& waiting_for) override {
    count_store_request();
    check_key(key);
    auto t0 = Clock::now();
    std::string path = path_for(key);
    // Polling is the only portable way to wait on a shared file system
    // (inotify does not see writes made on other NFS clients).
    auto backoff = milliseconds(1);
    for (;;) {
      if (auto v = read_file(path)) return *v;
      if (deadline.expired()) break;
      std::this_thread::sleep_for(std::min(backoff, deadline.remaining()));
      backoff = std::min(backoff * 2, milliseconds(100));
    }
    raise(ErrorCode::Timeout,
          "file store {}: timed out after {} ms waiting for {} (key '{}', file {}); has that "
          "rank started, with the same GRADWIRE_STORE_DIR?",
          dir_,
          std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count(), waiting_for, key,
          path);
  }

  std::optional<std::string> try_get(const std::string& key) override {
    count_store_request();
    check_key(key);
    return read_file(path_for(key));
  }

  std::string describe() const override { return "file store " + dir_; }

 private:
  std::string path_for(const std::string& key) const { return dir_ + "/" + file_name_for(key); }

  void check_key(const std::string& key) const {
    if (key.empty()) raise(ErrorCode::InvalidArgument, "file store {}: empty key", dir_);
  }

  [[noreturn]] void fail(const char* op, const std::string& path, int err) const {
    raise(ErrorCode::Transport, "file store {}: cannot {} {}: {}", dir_, op, path,
          errno_text(err));
  }
  [[noreturn]] void fail_and_unlink(const char* op, const std::string& path, int err) const {
    ::unlink(path.c_str());
    fail(op, path, err);
  }

  std::string dir_;
};

}  // namespace

std::unique_ptr<Store> make_file_store(const std::string& dir) {
  if (dir.empty()) raise(ErrorCode::InvalidArgument, "file store: empty directory name");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    raise(ErrorCode::InvalidArgument, "file store: '{}' is not a usable directory{}{}", dir,
          ec ? ": " : "", ec ? ec.message() : "");
  }
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return std::make_unique<FileStore>(d);
}

}  // namespace gradwire::bootstrap
