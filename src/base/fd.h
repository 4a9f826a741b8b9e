// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// File descriptors: UniqueFd, the RAII owner of every fd (sockets,
// shared-memory segments and their locks, checkpoint files), and the words
// for an errno.
#pragma once

#include <unistd.h>

#include <string>
#include <utility>

namespace gradwire {

// Owns one file descriptor; closes it exactly once.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// strerror_r wrapper that is thread-safe.
std::string errno_text(int err);

}  // namespace gradwire
