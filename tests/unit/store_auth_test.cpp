// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The TCP store against live peers that should not get in, or that send
// malformed bytes (Note [store handshake]): wrong, missing and replayed
// secrets, other protocol versions, garbage in both directions, and the
// address the store listens on.
#include "bootstrap/store_auth.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/sinks/ostream_sink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "bootstrap/store.h"
#include "bootstrap/store_wire.h"
#include "base/logging.h"
#include "gradwire/error.h"
#include "test_util.h"

namespace gradwire::bootstrap {
namespace {

using namespace std::chrono_literals;
using namespace tcp_store;
using Clock = std::chrono::steady_clock;

const std::string kSecret = "unit-test-secret-0123456789abcdef";

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::unique_ptr<Store> store(uint16_t port, bool server, const std::string& secret,
                             std::chrono::milliseconds deadline = 2s) {
  TcpStoreOptions o;
  o.secret = secret;
  o.linger = 0ms;
  return make_tcp_store("127.0.0.1", port, server, Deadline::after(deadline), o);
}

// A hand-driven TCP peer: connect, send bytes, read handshake messages.
class Raw {
 public:
  explicit Raw(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  }
  ~Raw() { ::close(fd_); }
  void send(const std::string& bytes) { ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL); }
  // One whole handshake message, or nullopt if the peer closed (or reset)
  // the connection or sent nothing within `wait`.
  std::optional<std::string> message(std::chrono::milliseconds wait = 1000ms) {
    std::string buf;
    const auto until = Clock::now() + wait;
    for (;;) {
      auto m = parse_handshake(buf);
      if (m.status == Parse::Ok) return buf.substr(0, m.consumed);
      if (m.status == Parse::Bad) return std::nullopt;
      if (!read_some(buf, until)) return std::nullopt;
    }
  }
  // True if the peer closes the connection within `wait` (bytes before
  // the close are skipped).
  bool closed_within(std::chrono::milliseconds wait) {
    std::string ignored;
    const auto until = Clock::now() + wait;
    for (;;) {
      pollfd p{fd_, POLLIN, 0};
      const int left =
          int(std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count());
      if (left <= 0 || ::poll(&p, 1, left) <= 0) return false;
      char c[256];
      if (::recv(fd_, c, sizeof(c), 0) <= 0) return true;
    }
  }

 private:
  bool read_some(std::string& buf, Clock::time_point until) {
    pollfd p{fd_, POLLIN, 0};
    const int left =
        int(std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count());
    if (left <= 0 || ::poll(&p, 1, left) <= 0) return false;
    char c[1024];
    const ssize_t n = ::recv(fd_, c, sizeof(c), 0);
    if (n <= 0) return false;
    buf.append(c, size_t(n));
    return true;
  }
  int fd_ = -1;
};

ClientHello hello_with(bool has_secret) {
  ClientHello h;
  h.has_secret = has_secret;
  h.version_text = "raw";
  h.nonce = random_nonce();
  return h;
}

ServerHello server_hello(const std::string& msg) {
  auto m = parse_handshake(msg);
  ServerHello sh;
  EXPECT_EQ(m.status, Parse::Ok);
  EXPECT_EQ(parse_server_hello(m.body, &sh), nullptr);
  return sh;
}

uint8_t verdict_of(const std::string& msg) {
  auto m = parse_handshake(msg);
  uint8_t v = 255;
  EXPECT_EQ(parse_verdict(m.body, &v), nullptr);
  return v;
}

// Expects `fn` to raise `code` with each of `needles` in its message,
// within `limit` seconds.
void expect_refused(const std::function<void()>& fn, ErrorCode code,
                    const std::vector<std::string>& needles, double limit = 1.0) {
  const auto t0 = Clock::now();
  try {
    fn();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const auto& n : needles) {
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << n << " in " << e.what();
    }
  }
  EXPECT_LT(seconds_since(t0), limit);
}

class AuthStore : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = gwtest::free_port();
    server_ = store(port_, true, kSecret);
    server_->set("existing", "before");
  }
  // The store's contents, as a client with the right secret sees them.
  void expect_unchanged() {
    auto good = store(port_, false, kSecret);
    EXPECT_EQ(good->try_get("existing"), "before");
    EXPECT_EQ(good->try_get("planted"), std::nullopt);
    EXPECT_EQ(good->try_get("ag/0/1"), std::nullopt);
  }
  uint16_t port_ = 0;
  std::unique_ptr<Store> server_;
};

TEST_F(AuthStore, TheRightSecretWorks) {
  auto c = store(port_, false, kSecret);
  c->set("k", "v");
  EXPECT_EQ(server_->get("k", Deadline::after(1s), "c"), "v");
}

TEST_F(AuthStore, WrongSecretIsRefusedWithinASecond) {
  expect_refused([&] { store(port_, false, "another-secret-0123456789abcdef"); },
                 ErrorCode::Unauthenticated,
                 {"secret mismatch", "GRADWIRE_JOB_SECRET", "127.0.0.1"});
  // A raw peer that pipelines a wrong proof and a SET behind it.
  Raw raw(port_);
  const ClientHello h = hello_with(true);
  raw.send(encode_client_hello(h));
  auto sh = raw.message();
  ASSERT_TRUE(sh.has_value());
  const Proof wrong = store_proof("another-secret-0123456789abcdef", Role::Client, kProtocolVersion,
                                  h.nonce, server_hello(*sh).nonce);
  raw.send(encode_client_proof(wrong) + encode_request(kSet, "planted", "x"));
  EXPECT_TRUE(raw.closed_within(1000ms));
  expect_unchanged();
}

TEST_F(AuthStore, MissingSecretIsRefusedWithinASecond) {
  expect_refused([&] { store(port_, false, ""); }, ErrorCode::Unauthenticated,
                 {"requires the job secret", "has none", "GRADWIRE_JOB_SECRET"});
  Raw raw(port_);
  raw.send(encode_client_hello(hello_with(false)) + encode_request(kSet, "planted", "x"));
  EXPECT_TRUE(raw.closed_within(1000ms));
  // Commands with no handshake at all.
  Raw bare(port_);
  bare.send(encode_request(kSet, "planted", "x") + encode_request(kGet, "existing", ""));
  EXPECT_TRUE(bare.closed_within(1000ms));
  expect_unchanged();
}

TEST_F(AuthStore, ReplayedHandshakeIsRefusedWithinASecond) {
  // Record a genuine handshake (this test knows the secret, like a rank).
  const ClientHello h = hello_with(true);
  std::string recorded;
  {
    Raw genuine(port_);
    genuine.send(encode_client_hello(h));
    auto sh = genuine.message();
    ASSERT_TRUE(sh.has_value());
    const Nonce server_nonce = server_hello(*sh).nonce;
    recorded = encode_client_hello(h) +
               encode_client_proof(
                   store_proof(kSecret, Role::Client, kProtocolVersion, h.nonce, server_nonce));
    genuine.send(recorded.substr(encode_client_hello(h).size()));
    auto v = genuine.message();
    ASSERT_TRUE(v.has_value());
    ASSERT_EQ(verdict_of(*v), kAccepted);  // the control: that transcript did get in
  }
  // An eavesdropper replays it, byte for byte, with a SET behind it.
  const auto t0 = Clock::now();
  Raw replay(port_);
  replay.send(recorded + encode_request(kSet, "planted", "x"));
  auto sh = replay.message();
  if (sh) {
    auto v = replay.message();
    if (v) EXPECT_EQ(verdict_of(*v), kWrongProof);
  }
  EXPECT_TRUE(replay.closed_within(1000ms));
  EXPECT_LT(seconds_since(t0), 1.0);
  expect_unchanged();
}

TEST_F(AuthStore, RefusalsAreLoggedWithThePeerAddress) {
  // Captures the store server's log (its thread logs through log()).
  std::ostringstream captured;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured);
  const auto level = log().level();
  log().set_level(spdlog::level::warn);
  log().sinks().push_back(sink);
  auto count = [&] {
    sink->flush();
    const std::string text = captured.str();
    size_t n = 0;
    for (size_t at = text.find("refused client 127.0.0.1:"); at != std::string::npos;
         at = text.find("refused client 127.0.0.1:", at + 1))
      ++n;
    return n;
  };
  EXPECT_THROW(store(port_, false, "another-secret-0123456789abcdef"), Error);
  EXPECT_THROW(store(port_, false, ""), Error);
  {
    Raw raw(port_);
    raw.send(encode_client_hello(hello_with(true), kProtocolVersion + 1));
    raw.closed_within(1000ms);
  }
  const auto t0 = Clock::now();
  while (count() < 3 && seconds_since(t0) < 1.0) std::this_thread::sleep_for(10ms);
  log().sinks().pop_back();
  log().set_level(level);
  const std::string text = captured.str();
  EXPECT_EQ(count(), 3u) << text;
  EXPECT_NE(text.find("wrong proof of the job secret"), std::string::npos) << text;
  EXPECT_NE(text.find("it has no job secret"), std::string::npos) << text;
  EXPECT_NE(text.find("it speaks store protocol " + std::to_string(kProtocolVersion + 1)),
            std::string::npos) << text;
}

TEST_F(AuthStore, OtherProtocolVersionIsRefusedNamingBoth) {
  Raw raw(port_);
  raw.send(encode_client_hello(hello_with(true), kProtocolVersion + 1));
  auto sh = raw.message();
  ASSERT_TRUE(sh.has_value());
  EXPECT_EQ(parse_handshake(*sh).header.version, kProtocolVersion);
  EXPECT_EQ(server_hello(*sh).verdict, kVersionRefused);
  EXPECT_TRUE(raw.closed_within(1000ms));
  expect_unchanged();
}

TEST_F(AuthStore, MalformedHandshakesFromALivePeerDropOnlyThatPeer) {
  const std::string hello = encode_client_hello(hello_with(true));
  std::vector<std::string> cases = {
      "XXXX" + hello.substr(4),                                   // wrong magic
      hello.substr(0, 7) + std::string("\xFF\xFF", 2),            // bad length (body over the cap)
      std::string("GWHS\0\1\1\0\3", 9) + "abc",                   // truncated ClientHello body
      std::string("GWHS\0\1\3\0\x20", 9) + std::string(32, 'p'),  // a proof before any hello
  };
  for (const auto& bytes : cases) {
    Raw raw(port_);
    raw.send(bytes + encode_request(kSet, "planted", "x"));
    EXPECT_TRUE(raw.closed_within(1000ms)) << bytes.size();
  }
  {
    Raw half(port_);  // truncation: half a hello, then gone
    half.send(hello.substr(0, 10));
  }
  auto alive = store(port_, false, kSecret);
  alive->set("after", "ok");
  EXPECT_EQ(alive->try_get("after"), "ok");
  expect_unchanged();
}

TEST_F(AuthStore, MalformedFramesAfterTheHandshakeDropThatPeer) {
  for (const std::string& bad :
       {std::string(1, '\x01') + std::string("\xFF\xFF\xFF\xFF\0\0\0\0", 8),  // bad key length
        std::string(1, '\x01') + std::string("\0\0\x10\0\xFF\xFF\xF0\0", 8),  // offset overflow
        std::string("\x09\0\0\0\1\0\0\0\0", 9)}) {                            // unknown command
    Raw raw(port_);
    const ClientHello h = hello_with(true);
    raw.send(encode_client_hello(h));
    auto sh = raw.message();
    ASSERT_TRUE(sh.has_value());
    raw.send(encode_client_proof(
        store_proof(kSecret, Role::Client, kProtocolVersion, h.nonce, server_hello(*sh).nonce)));
    auto v = raw.message();
    ASSERT_TRUE(v.has_value());
    ASSERT_EQ(verdict_of(*v), kAccepted);
    raw.send(bad);
    EXPECT_TRUE(raw.closed_within(1000ms));
  }
  expect_unchanged();
}

TEST(StoreAuth, ASecretClientRefusesAnUnauthenticatedStore) {
  const uint16_t port = gwtest::free_port();
  auto open = store(port, true, "");
  expect_refused([&] { store(port, false, kSecret); }, ErrorCode::Unauthenticated,
                 {"does not authenticate", "GRADWIRE_JOB_SECRET"});
  auto c = store(port, false, "");  // backwards compatible without a secret
  c->set("k", "v");
  EXPECT_EQ(open->try_get("k"), "v");
}

// A fake store server on a thread: accepts one connection and runs
// `script` on it.
class FakeServer {
 public:
  explicit FakeServer(std::function<void(int fd)> script) {
    lfd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(lfd_, 4), 0);
    socklen_t len = sizeof(a);
    ::getsockname(lfd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this, script] {
      pollfd p{lfd_, POLLIN, 0};
      if (::poll(&p, 1, 3000) <= 0) return;
      const int fd = ::accept(lfd_, nullptr, nullptr);
      if (fd < 0) return;
      script(fd);
      ::close(fd);
    });
  }
  ~FakeServer() {
    thread_.join();
    ::close(lfd_);
  }
  uint16_t port() const { return port_; }

 private:
  int lfd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

// Reads the client's hello on `fd`, returning it.
ClientHello read_hello(int fd) {
  std::string buf;
  char c[512];
  for (;;) {
    auto m = parse_handshake(buf);
    if (m.status == Parse::Ok) {
      ClientHello h;
      EXPECT_EQ(parse_client_hello(m.body, &h), nullptr);
      return h;
    }
    pollfd p{fd, POLLIN, 0};
    if (m.status == Parse::Bad || ::poll(&p, 1, 2000) <= 0) return {};
    const ssize_t n = ::recv(fd, c, sizeof(c), 0);
    if (n <= 0) return {};
    buf.append(c, size_t(n));
  }
}

void send_bytes(int fd, const std::string& s) { ::send(fd, s.data(), s.size(), MSG_NOSIGNAL); }

// Waits until the client closes `fd` (so the fake server outlives its part).
void until_closed(int fd) {
  pollfd p{fd, POLLIN, 0};
  char c[256];
  while (::poll(&p, 1, 3000) > 0 && ::recv(fd, c, sizeof(c), 0) > 0) {
  }
}

TEST(StoreAuth, AClientRefusesAStoreOfAnotherVersionNamingBoth) {
  FakeServer fake([](int fd) {
    read_hello(fd);
    ServerHello sh;
    sh.verdict = kProceed;
    sh.version_text = "9.0.0";
    send_bytes(fd, encode_server_hello(sh, kProtocolVersion + 1));
    until_closed(fd);
  });
  expect_refused([&] { store(fake.port(), false, ""); }, ErrorCode::Protocol,
                 {"store protocol " + std::to_string(kProtocolVersion + 1) + " (gradwire 9.0.0)",
                  "store protocol " + std::to_string(kProtocolVersion) + " (gradwire 0.1.0)"});
}

TEST(StoreAuth, AClientRefusesAReplayedServerAnswer) {
  // Record what the real store answered to one client nonce...
  const uint16_t port = gwtest::free_port();
  auto real = store(port, true, kSecret);
  std::string recorded;
  {
    Raw raw(port);
    raw.send(encode_client_hello(hello_with(true)));
    recorded = raw.message().value_or("");
  }
  ASSERT_FALSE(recorded.empty());
  // ...and replay it to a client, whose nonce is a fresh one.
  FakeServer fake([&](int fd) {
    read_hello(fd);
    send_bytes(fd, recorded);
    until_closed(fd);
  });
  expect_refused([&] { store(fake.port(), false, kSecret); }, ErrorCode::Unauthenticated,
                 {"secret mismatch"});
}

TEST(StoreAuth, MalformedAnswersAreProtocolErrors) {
  // Not a gradwire store at all.
  {
    FakeServer fake([](int fd) {
      read_hello(fd);
      send_bytes(fd, "HTTP/1.1 400 Bad Request\r\n\r\n");
      until_closed(fd);
    });
    expect_refused([&] { store(fake.port(), false, ""); }, ErrorCode::Protocol,
                   {"did not answer like a gradwire store", "wrong magic"});
  }
  // A truncated ServerHello, then the connection closes.
  {
    FakeServer fake([](int fd) {
      read_hello(fd);
      send_bytes(fd, encode_server_hello(ServerHello{}).substr(0, 20));
    });
    expect_refused([&] { store(fake.port(), false, ""); }, ErrorCode::Protocol,
                   {"closed the connection during the handshake"});
  }
  // A good handshake, then answers with a bad status, a length over the
  // cap, and a value where none belongs.
  for (const std::string& answer :
       {std::string("\x07\0\0\0\0", 5), std::string("\x01\xFF\xFF\xFF\xFF", 5),
        std::string("\x00\0\0\0\x03", 5) + "abc"}) {
    FakeServer fake([&](int fd) {
      read_hello(fd);
      ServerHello sh;
      sh.version_text = "0.1.0";
      send_bytes(fd, encode_server_hello(sh));
      char c[64];
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 2000) > 0 && ::recv(fd, c, sizeof(c), 0) > 0) send_bytes(fd, answer);
      until_closed(fd);
    });
    auto c = store(fake.port(), false, "");
    expect_refused([&] { c->try_get("k"); }, ErrorCode::Protocol, {"malformed answer"});
  }
}

TEST(StoreAuth, AStoreThatStopsAnsweringCannotHangAGet) {
  // The handshake goes through, then the store never answers: the client
  // gives up at its deadline plus the 1 s grace (Note [tcp store protocol]).
  FakeServer fake([](int fd) {
    read_hello(fd);
    ServerHello sh;
    sh.version_text = "0.1.0";
    send_bytes(fd, encode_server_hello(sh));
    until_closed(fd);
  });
  auto c = store(fake.port(), false, "");
  const auto t0 = Clock::now();
  expect_refused([&] { c->get("k", Deadline::after(200ms), "rank 0"); }, ErrorCode::Timeout,
                 {"not responding"}, 1.8);
  EXPECT_GE(seconds_since(t0), 1.15);
}

// ---- the address the store listens on ----

// Local addresses of every listening TCP socket on `port`, from
// /proc/net/tcp and /proc/net/tcp6 (what `ss -ltn` prints), as hex.
std::vector<std::string> listeners_on(uint16_t port) {
  std::vector<std::string> out;
  for (const char* file : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string slot, local, remote, state;
      ls >> slot >> local >> remote >> state;
      const auto colon = local.rfind(':');
      if (state != "0A" || colon == std::string::npos) continue;  // 0A: LISTEN
      if (std::stoul(local.substr(colon + 1), nullptr, 16) != port) continue;
      out.push_back(local.substr(0, colon));
    }
  }
  return out;
}

bool is_wildcard_hex(const std::string& addr) {
  return addr.find_first_not_of('0') == std::string::npos;  // 0.0.0.0 or ::
}

TEST(StoreListener, BindsNoWildcardAddress) {
  const uint16_t port = gwtest::free_port();
  auto s = store(port, true, kSecret);
  auto addrs = listeners_on(port);
  ASSERT_FALSE(addrs.empty()) << "no listener found in /proc/net/tcp*";
  for (const auto& a : addrs) EXPECT_FALSE(is_wildcard_hex(a)) << a;
  EXPECT_EQ(addrs, std::vector<std::string>{"0100007F"});  // 127.0.0.1, little-endian hex

  // The control: a wildcard asked for by name is seen as one.
  const uint16_t wport = gwtest::free_port();
  TcpStoreOptions o;
  o.bind_host = "0.0.0.0";
  o.linger = 0ms;
  auto w = make_tcp_store("127.0.0.1", wport, true, Deadline::after(2s), o);
  auto waddrs = listeners_on(wport);
  ASSERT_EQ(waddrs.size(), 1u);
  EXPECT_TRUE(is_wildcard_hex(waddrs[0]));
}

// ---- from the environment (the torchrun convention) ----

class SecretFromEnvironment : public ::testing::Test {
 protected:
  static constexpr const char* kVars[] = {"RANK",
                                          "WORLD_SIZE",
                                          "LOCAL_RANK",
                                          "MASTER_ADDR",
                                          "MASTER_PORT",
                                          "GRADWIRE_STORE_DIR",
                                          "OMPI_COMM_WORLD_SIZE",
                                          "GRADWIRE_STORE_PORT",
                                          "TORCHELASTIC_RUN_ID",
                                          "GRADWIRE_JOB_SECRET",
                                          "GRADWIRE_REQUIRE_SECRET",
                                          "GRADWIRE_STORE_BIND"};
  void SetUp() override {
    for (const char* v : kVars) {
      if (const char* old = std::getenv(v)) saved_[v] = old;
      ::unsetenv(v);
    }
    port_ = gwtest::free_port();
    ::setenv("RANK", "0", 1);
    ::setenv("WORLD_SIZE", "1", 1);
    ::setenv("MASTER_ADDR", "127.0.0.1", 1);
    ::setenv("MASTER_PORT", std::to_string(port_).c_str(), 1);
    options_.timeout = 2s;
  }
  void TearDown() override {
    for (const char* v : kVars) {
      auto it = saved_.find(v);
      if (it == saved_.end())
        ::unsetenv(v);
      else
        ::setenv(v, it->second.c_str(), 1);
    }
  }
  void expect_invalid(const std::vector<std::string>& needles, const std::string& absent = "") {
    try {
      from_environment(options_);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
      for (const auto& n : needles)
        EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
      if (!absent.empty())
        EXPECT_EQ(std::string(e.what()).find(absent), std::string::npos) << e.what();
    }
  }
  uint16_t port_ = 0;
  Options options_;
  std::map<std::string, std::string> saved_;
};

TEST_F(SecretFromEnvironment, TheSecretProtectsTheBootstrapStore) {
  ::setenv("GRADWIRE_JOB_SECRET", kSecret.c_str(), 1);
  auto boot = from_environment(options_);
  ASSERT_NE(boot->store(), nullptr);
  boot->store()->set("k", "v");
  expect_refused([&] { store(port_, false, ""); }, ErrorCode::Unauthenticated, {"has none"});
  expect_refused([&] { store(port_, false, "not-the-secret-0123456789"); },
                 ErrorCode::Unauthenticated, {"secret mismatch"});
  EXPECT_EQ(store(port_, false, kSecret)->try_get("k"), "v");
  for (const auto& a : listeners_on(port_)) EXPECT_FALSE(is_wildcard_hex(a)) << a;
}

TEST_F(SecretFromEnvironment, PolicyErrors) {
  ::setenv("GRADWIRE_REQUIRE_SECRET", "1", 1);
  expect_invalid({"GRADWIRE_REQUIRE_SECRET=1", "GRADWIRE_JOB_SECRET is not set"});
  ::setenv("GRADWIRE_REQUIRE_SECRET", "yes", 1);
  expect_invalid({"GRADWIRE_REQUIRE_SECRET='yes'"});
  ::unsetenv("GRADWIRE_REQUIRE_SECRET");
  ::setenv("GRADWIRE_JOB_SECRET", "tooshort", 1);
  expect_invalid({"GRADWIRE_JOB_SECRET is 8 bytes", "16..1024"}, "tooshort");
  ::unsetenv("GRADWIRE_JOB_SECRET");
  ::setenv("MASTER_ADDR", "0.0.0.0", 1);
  expect_invalid({"MASTER_ADDR='0.0.0.0' is a wildcard", "GRADWIRE_STORE_BIND"});
  // Asked for by name, the wildcard is allowed (a world of one connects
  // to its own store through 127.0.0.1 here).
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("GRADWIRE_STORE_BIND", "0.0.0.0", 1);
  auto boot = from_environment(options_);
  auto addrs = listeners_on(port_);
  ASSERT_EQ(addrs.size(), 1u);
  EXPECT_TRUE(is_wildcard_hex(addrs[0]));
}

}  // namespace
}  // namespace gradwire::bootstrap
