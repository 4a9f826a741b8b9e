// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [store liveness] (src/bootstrap/socket.h): GRADWIRE_LIVENESS_S sets
// how long a store connection may show no sign of life before its kernel
// reports it dead; the socket options say so, and a bad value is an
// InvalidArgument naming the variable where a store connects. (That a
// silent host is then reported within the timeout is
// faults.network.host_lost.np3, phase 4.)
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "base/raise.h"
#include "bootstrap/socket.h"
#include "bootstrap/store.h"
#include "test_util.h"

namespace gradwire::bootstrap {
namespace {

using namespace std::chrono_literals;

// Sets (or, with nullptr, unsets) the variable for one test.
class LivenessEnv {
 public:
  explicit LivenessEnv(const char* value) {
    if (value) ::setenv("GRADWIRE_LIVENESS_S", value, 1);
    else ::unsetenv("GRADWIRE_LIVENESS_S");
  }
  ~LivenessEnv() { ::unsetenv("GRADWIRE_LIVENESS_S"); }
};

int int_option(int fd, int level, int name) {
  int v = -1;
  socklen_t len = sizeof(v);
  EXPECT_EQ(::getsockopt(fd, level, name, &v, &len), 0);
  return v;
}

struct Watched {
  int user_timeout_ms, keepidle_s, keepintvl_s, keepalive;
};

Watched watched_socket() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  EXPECT_TRUE(bool(fd));
  watch_liveness(fd.get(), liveness_timeout());
  return {int_option(fd.get(), IPPROTO_TCP, TCP_USER_TIMEOUT),
          int_option(fd.get(), IPPROTO_TCP, TCP_KEEPIDLE),
          int_option(fd.get(), IPPROTO_TCP, TCP_KEEPINTVL),
          int_option(fd.get(), SOL_SOCKET, SO_KEEPALIVE)};
}

TEST(StoreLiveness, DefaultsToTenSeconds) {
  LivenessEnv env(nullptr);
  EXPECT_EQ(liveness_timeout(), 10s);
  const Watched w = watched_socket();
  EXPECT_EQ(w.user_timeout_ms, 10000);
  EXPECT_EQ(w.keepidle_s, 2);
  EXPECT_EQ(w.keepintvl_s, 2);
  EXPECT_NE(w.keepalive, 0);
}

TEST(StoreLiveness, TheVariableSetsTheSocketOptions) {
  {
    LivenessEnv env("30");
    const Watched w = watched_socket();
    EXPECT_EQ(w.user_timeout_ms, 30000);
    EXPECT_EQ(w.keepidle_s, 6);
    EXPECT_EQ(w.keepintvl_s, 6);
  }
  {
    LivenessEnv env("2.5");  // probes at most once a second
    const Watched w = watched_socket();
    EXPECT_EQ(w.user_timeout_ms, 2500);
    EXPECT_EQ(w.keepidle_s, 1);
    EXPECT_EQ(w.keepintvl_s, 1);
  }
}

TEST(StoreLiveness, ABadValueIsAnErrorNamingTheVariableWhereAStoreConnects) {
  for (const char* bad : {"0.5", "0", "-3", "ten", "5s"}) {
    LivenessEnv env(bad);
    try {
      make_tcp_store("127.0.0.1", gwtest::free_port(), true, Deadline::after(2s),
                     TcpStoreOptions{});
      ADD_FAILURE() << "GRADWIRE_LIVENESS_S=" << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find("GRADWIRE_LIVENESS_S='" + std::string(bad) + "'"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(StoreLiveness, AStoreWorksWithAShortTimeout) {
  LivenessEnv env("1");
  const uint16_t port = gwtest::free_port();
  auto srv = make_tcp_store("127.0.0.1", port, true, Deadline::after(2s), TcpStoreOptions{});
  auto cli = make_tcp_store("127.0.0.1", port, false, Deadline::after(2s));
  cli->set("k", "v");
  EXPECT_EQ(srv->get("k", Deadline::after(2s), "the key"), "v");
}

}  // namespace
}  // namespace gradwire::bootstrap
