// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Small helpers shared by the single-process tests.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gwtest {

// A loopback port that was free a moment ago: bind port 0 and read it back.
inline uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// Clears the environment variables `names` for its lifetime and puts their
// values back when it ends; set() may only touch variables in `names`.
class ScopedEnv {
 public:
  explicit ScopedEnv(std::vector<std::string> names) : names_(std::move(names)) {
    for (const auto& n : names_) {
      if (const char* v = std::getenv(n.c_str())) saved_[n] = v;
      ::unsetenv(n.c_str());
    }
  }
  ~ScopedEnv() {
    for (const auto& n : names_) {
      auto it = saved_.find(n);
      if (it == saved_.end()) {
        ::unsetenv(n.c_str());
      } else {
        ::setenv(n.c_str(), it->second.c_str(), 1);
      }
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

  void set(const std::map<std::string, std::string>& vars) {
    for (const auto& [k, v] : vars) ::setenv(k.c_str(), v.c_str(), 1);
  }
  void unset(std::initializer_list<const char*> vars) {
    for (const char* v : vars) ::unsetenv(v);
  }
  void clear() {
    for (const auto& n : names_) ::unsetenv(n.c_str());
  }

 private:
  std::vector<std::string> names_;
  std::map<std::string, std::string> saved_;
};

}  // namespace gwtest
