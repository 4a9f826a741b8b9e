// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The TCP store under a connection flood (Note [store connection caps]):
// hundreds of idle connections that never finish the handshake must not
// fill rank 0's descriptor table, keep a rank out, or flood the log, and a
// flood from one address must not evict a handshake from another.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/sinks/ostream_sink.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/logging.h"
#include "bootstrap/store.h"
#include "bootstrap/store_auth.h"
#include "bootstrap/store_wire.h"
#include "gradwire/error.h"
#include "test_util.h"

namespace gradwire::bootstrap {
namespace {

using namespace std::chrono_literals;
using namespace tcp_store;
using Clock = std::chrono::steady_clock;

const std::string kFloodSecret = "flood-test-secret-0123456789abcdef";

std::unique_ptr<Store> store(uint16_t port, bool server, std::chrono::milliseconds deadline) {
  TcpStoreOptions o;
  o.secret = kFloodSecret;
  o.linger = 0ms;
  return make_tcp_store("127.0.0.1", port, server, Deadline::after(deadline), o);
}

// A TCP connection to 127.0.0.1:port from `source` (any 127/8 address is
// loopback on Linux, so one host can play several peers), from local port
// `local_port`. -1 on failure.
//
// Why an explicit local port: an ephemeral one would come from the range
// gwtest::free_port() draws from, and 600 of them held by a flood made a
// concurrent test's listener fail with EADDRINUSE (ctest -j). Ports from
// kFloodPorts lie below that range; SO_REUSEADDR lets a run reuse them
// while the last run's sockets sit in TIME_WAIT.
constexpr uint16_t kFloodPorts = 21000;
int connect_from(const char* source, uint16_t port, uint16_t local_port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in s{};
  s.sin_family = AF_INET;
  s.sin_port = htons(local_port);
  ::inet_pton(AF_INET, source, &s.sin_addr);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&s), sizeof(s)) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

size_t open_fds() {
  size_t n = 0;
  for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// A child process that opens `count` connections from `source` and says
// nothing on any of them: the attacker of issue 17 item 4. It lives in its
// own process so that its descriptors do not count against the server's.
class Flood {
 public:
  Flood(const char* source, uint16_t port, int count) {
    int ready[2];
    EXPECT_EQ(::pipe(ready), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      // Only async-signal-safe calls from here: the parent has threads.
      ::close(ready[0]);
      rlimit unlimited{};
      ::getrlimit(RLIMIT_NOFILE, &unlimited);
      unlimited.rlim_cur = unlimited.rlim_max;
      ::setrlimit(RLIMIT_NOFILE, &unlimited);
      int opened = 0;
      for (int i = 0; i < count; ++i) {
        opened += connect_from(source, port, uint16_t(kFloodPorts + i)) >= 0;
      }
      char c = opened == count ? 1 : 0;
      ssize_t ignored = ::write(ready[1], &c, 1);
      (void)ignored;
      ::pause();
      ::_exit(0);
    }
    ::close(ready[1]);
    char c = 0;
    EXPECT_EQ(::read(ready[0], &c, 1), 1);
    EXPECT_EQ(c, 1) << "the flood could not open all its connections";
    ::close(ready[0]);
  }
  ~Flood() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }

 private:
  pid_t pid_ = -1;
};

// Lowers this process's descriptor limit to what it uses plus `spare`.
class FdLimit {
 public:
  explicit FdLimit(size_t spare) {
    ::getrlimit(RLIMIT_NOFILE, &old_);
    rlimit l = old_;
    l.rlim_cur = open_fds() + spare;
    EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &l), 0);
  }
  ~FdLimit() { ::setrlimit(RLIMIT_NOFILE, &old_); }

 private:
  rlimit old_{};
};

// Captures what the store server's thread logs at warn and above.
class CapturedLog {
 public:
  CapturedLog() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)) {
    level_ = log().level();
    log().set_level(spdlog::level::warn);
    log().sinks().push_back(sink_);
  }
  ~CapturedLog() {
    log().sinks().pop_back();
    log().set_level(level_);
  }
  size_t count(const std::string& needle) {
    sink_->flush();
    const std::string t = text_.str();
    size_t n = 0;
    for (size_t at = t.find(needle); at != std::string::npos; at = t.find(needle, at + 1)) ++n;
    return n;
  }
  std::string text() { return text_.str(); }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
  spdlog::level::level_enum level_;
};

TEST(StoreFlood, IdleConnectionsCannotKeepARankOut) {
  const uint16_t port = gwtest::free_port();
  auto server = store(port, true, 2s);
  server->set("existing", "before");
  CapturedLog captured;
  // 600 idle connections against a server with 200 descriptors to spare:
  // uncapped, it accepts until its table is full and the rank below waits
  // in the listen backlog until the handshake timeout (10 s) frees some.
  FdLimit limit(200);
  Flood flood("127.0.0.2", port, 600);
  const auto t0 = Clock::now();
  auto rank = store(port, false, 5s);
  rank->set("k", "v");
  EXPECT_EQ(rank->try_get("existing"), "before");
  const double joined = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_LT(joined, 4.0) << "a rank took " << joined << " s to join past the flood";
  EXPECT_EQ(server->get("k", Deadline::after(1s), "flood test"), "v");
  // The flood is refused in the log, at a bounded rate.
  EXPECT_LE(captured.count("tcp store"), 12u) << captured.text();
  EXPECT_EQ(captured.count("accept failed"), 0u) << captured.text();
}

TEST(StoreFlood, AFloodFromManyAddressesLeavesDescriptorsForRanks) {
  const uint16_t port = gwtest::free_port();
  auto server = store(port, true, 2s);
  // 8 addresses x 60 idle connections: each under the per-source cap, so
  // only the cap on all handshakes (a quarter of the limit) holds them.
  FdLimit limit(200);
  std::vector<std::unique_ptr<Flood>> floods;
  const std::string sources[] = {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5",
                                 "127.0.0.6", "127.0.0.7", "127.0.0.8", "127.0.0.9"};
  for (const auto& s : sources) floods.push_back(std::make_unique<Flood>(s.c_str(), port, 60));
  const auto t0 = Clock::now();
  auto rank = store(port, false, 5s);
  rank->set("k", "v");
  const double joined = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_LT(joined, 4.0) << "a rank took " << joined << " s to join past the flood";
  EXPECT_EQ(server->get("k", Deadline::after(1s), "flood test"), "v");
}

// The bytes of one handshake message from `fd`, read for up to 2 s; less
// if the peer closes or says nothing.
std::string read_message(int fd) {
  std::string got;
  const auto until = Clock::now() + 2s;
  while (parse_handshake(got).status == Parse::NeedMore && Clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char c[512];
    const ssize_t n = ::recv(fd, c, sizeof(c), 0);
    if (n <= 0) break;
    got.append(c, size_t(n));
  }
  return got;
}

TEST(StoreFlood, AFloodFromOneAddressDoesNotEvictAnother) {
  const uint16_t port = gwtest::free_port();
  auto server = store(port, true, 2s);
  // A rank on another address starts its handshake, then stalls (slow
  // network) while 600 connections from one address arrive.
  const int slow = connect_from("127.0.0.3", port, kFloodPorts - 1);
  ASSERT_GE(slow, 0);
  ClientHello h;
  h.has_secret = true;
  h.version_text = "flood test";
  h.nonce = random_nonce();
  const std::string hello = encode_client_hello(h);
  ASSERT_EQ(::send(slow, hello.data(), hello.size(), MSG_NOSIGNAL), ssize_t(hello.size()));
  const std::string got = read_message(slow);
  const auto m = parse_handshake(got);
  ASSERT_EQ(m.status, Parse::Ok) << "the store closed a handshake in progress";
  ServerHello sh;
  ASSERT_EQ(parse_server_hello(m.body, &sh), nullptr);
  {
    Flood flood("127.0.0.2", port, 600);
    std::this_thread::sleep_for(200ms);  // the server works through the backlog
    // The slow rank now proves the secret: it must still be connected.
    const std::string proof = encode_client_proof(
        store_proof(kFloodSecret, Role::Client, kProtocolVersion, h.nonce, sh.nonce));
    ASSERT_EQ(::send(slow, proof.data(), proof.size(), MSG_NOSIGNAL), ssize_t(proof.size()));
    const std::string verdict = read_message(slow);
    const auto v = parse_handshake(verdict);
    ASSERT_EQ(v.status, Parse::Ok) << "the flood evicted another address's handshake";
    uint8_t code = 255;
    ASSERT_EQ(parse_verdict(v.body, &code), nullptr);
    EXPECT_EQ(code, kAccepted);
  }
  ::close(slow);
}

}  // namespace
}  // namespace gradwire::bootstrap
