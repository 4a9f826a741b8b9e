// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The rendezvous stores: TCP (torchrun convention) and file.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "bootstrap/store.h"
#include "gradwire/error.h"

namespace gradwire::bootstrap {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

using gwtest::free_port;

// Blocking IPv4 connect; returns the fd or -1.
int raw_connect(const char* ip, uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, ip, &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// True if the peer closes `fd` within `wait`.
bool closed_by_peer(int fd, milliseconds wait) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, int(wait.count())) <= 0) return false;
  char c;
  return ::recv(fd, &c, 1, 0) <= 0;
}

std::string where(uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

long long ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0).count();
}

std::unique_ptr<Store> server(uint16_t port, milliseconds linger = 5s) {
  return make_tcp_store("127.0.0.1", port, true, Deadline::after(2s), TcpStoreOptions{linger});
}
std::unique_ptr<Store> client(uint16_t port) {
  return make_tcp_store("127.0.0.1", port, false, Deadline::after(2s));
}

TEST(TcpStore, SetAndGetBetweenThreads) {
  uint16_t port = free_port();
  auto srv = server(port);
  EXPECT_EQ(srv->describe(), "torchrun store " + where(port));
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        auto c = client(port);
        c->set("key/" + std::to_string(t), "value " + std::to_string(t));
        for (int o = 0; o < kThreads; ++o) {
          auto v = c->get("key/" + std::to_string(o), Deadline::after(2s), "thread");
          if (v != "value " + std::to_string(o)) errors[t] += "wrong value " + v + "; ";
        }
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
  EXPECT_EQ(srv->get("key/2", Deadline::after(1s), "x"), "value 2");
}

TEST(TcpStore, GetOfAKeySetLaterArrives) {
  uint16_t port = free_port();
  auto srv = server(port);
  auto c = client(port);
  auto t0 = std::chrono::steady_clock::now();
  std::thread setter([&] {
    std::this_thread::sleep_for(100ms);
    srv->set("late", "here");
  });
  EXPECT_EQ(c->get("late", Deadline::after(2s), "setter"), "here");
  EXPECT_GE(ms_since(t0), 90);
  setter.join();
}

TEST(TcpStore, OneStoreServesAGetAndTheSetItWaitsFor) {
  // Another thread's set on the same Store must not queue behind a get.
  uint16_t port = free_port();
  auto srv = server(port);
  std::string got;
  std::thread waiter([&] { got = srv->get("x", Deadline::after(2s), "main"); });
  std::this_thread::sleep_for(50ms);
  srv->set("x", "1");
  waiter.join();
  EXPECT_EQ(got, "1");
}

TEST(TcpStore, ValuesOfAllSizesRoundTrip) {
  uint16_t port = free_port();
  auto srv = server(port);
  auto c = client(port);
  for (size_t n : {size_t(0), size_t(1), size_t(4096), size_t(3) << 20}) {
    std::string v(n, '\0');
    for (size_t i = 0; i < n; ++i) v[i] = char(i * 131 + n);
    c->set("v" + std::to_string(n), v);
    EXPECT_EQ(srv->get("v" + std::to_string(n), Deadline::after(2s), "c"), v) << n;
  }
  EXPECT_EQ(c->try_get("absent"), std::nullopt);
  EXPECT_EQ(c->try_get("v1").value_or("?").size(), 1u);
}

TEST(TcpStore, OversizedKeysAndValuesAreRejected) {
  uint16_t port = free_port();
  auto srv = server(port);
  try {
    srv->set(std::string(4097, 'k'), "v");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  }
  try {
    srv->set("k", std::string((16u << 20) + 1, 'v'));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  }
  srv->set(std::string(4096, 'k'), "ok");
  EXPECT_EQ(srv->get(std::string(4096, 'k'), Deadline::after(1s), "x"), "ok");
}

TEST(TcpStore, GetTimesOutNamingWhatItWaitedFor) {
  uint16_t port = free_port();
  auto srv = server(port);
  auto c = client(port);
  auto t0 = std::chrono::steady_clock::now();
  try {
    c->get("never", Deadline::after(200ms), "rank 7");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Timeout);
    EXPECT_NE(std::string(e.what()).find("rank 7"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("never"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(where(port)), std::string::npos) << e.what();
  }
  EXPECT_GE(ms_since(t0), 190);
  EXPECT_LT(ms_since(t0), 700);
  // The parked answer to the abandoned get must not be read as the answer
  // to a later request.
  srv->set("never", "late");
  c->set("a", "1");
  EXPECT_EQ(c->get("a", Deadline::after(1s), "x"), "1");
  EXPECT_EQ(c->get("never", Deadline::after(1s), "x"), "late");
}

TEST(TcpStore, ServerBindsOnlyTheGivenAddress) {
  // 127.0.0.2 is another address of this host (all of 127/8 is loopback).
  uint16_t wild_port = free_port();
  auto wildcard = make_tcp_store("0.0.0.0", wild_port, true, Deadline::after(2s));
  int probe = raw_connect("127.0.0.2", wild_port);
  if (probe < 0) GTEST_SKIP() << "127.0.0.2 is not reachable here";
  ::close(probe);  // the control: a wildcard server is reachable there

  uint16_t port = free_port();
  auto srv = server(port);
  int fd = raw_connect("127.0.0.2", port);
  EXPECT_LT(fd, 0) << "server on 127.0.0.1 accepted a connection to 127.0.0.2";
  if (fd >= 0) ::close(fd);
  fd = raw_connect("127.0.0.1", port);
  EXPECT_GE(fd, 0);
  if (fd >= 0) ::close(fd);
}

TEST(TcpStore, IPv6Loopback) {
  uint16_t port = free_port();
  std::unique_ptr<Store> srv;
  try {
    srv = make_tcp_store("::1", port, true, Deadline::after(1s));
  } catch (const Error& e) {
    GTEST_SKIP() << "no IPv6 loopback: " << e.what();
  }
  EXPECT_EQ(srv->describe(), "torchrun store [::1]:" + std::to_string(port));
  auto c = make_tcp_store("::1", port, false, Deadline::after(1s));
  c->set("k", "v6");
  EXPECT_EQ(srv->get("k", Deadline::after(1s), "c"), "v6");
  EXPECT_LT(raw_connect("127.0.0.1", port), 0);
}

TEST(TcpStore, NoServerIsATimeoutNamingHostPort) {
  uint16_t port = free_port();
  auto t0 = std::chrono::steady_clock::now();
  try {
    make_tcp_store("127.0.0.1", port, false, Deadline::after(300ms));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Timeout);
    std::string msg = e.what();
    EXPECT_NE(msg.find(where(port)), std::string::npos) << msg;
    EXPECT_NE(msg.find("MASTER_ADDR/MASTER_PORT"), std::string::npos) << msg;
  }
  EXPECT_GE(ms_since(t0), 290);
  EXPECT_LT(ms_since(t0), 800);
}

TEST(TcpStore, ClientWaitsForALateServer) {
  uint16_t port = free_port();
  std::unique_ptr<Store> srv;
  std::thread late([&] {
    std::this_thread::sleep_for(150ms);
    srv = server(port);
  });
  auto c = client(port);
  late.join();
  c->set("k", "v");
  EXPECT_EQ(srv->get("k", Deadline::after(1s), "c"), "v");
}

// Bytes that are not a store handshake: the server drops the client before
// parsing a single frame (frames after a handshake: store_auth_test.cpp).
TEST(TcpStore, MalformedFramesDropOnlyThatClient) {
  uint16_t port = free_port();
  auto srv = server(port);
  auto good = client(port);
  good->set("before", "1");

  auto send_raw = [&](const std::string& bytes) {
    int fd = raw_connect("127.0.0.1", port);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), ssize_t(bytes.size()));
    bool closed = closed_by_peer(fd, 1s);
    ::close(fd);
    return closed;
  };
  auto header = [](uint8_t cmd, uint32_t klen, uint32_t vlen) {
    std::string h(9, '\0');
    h[0] = char(cmd);
    for (int i = 0; i < 4; ++i) {
      h[1 + i] = char(klen >> (24 - 8 * i));
      h[5 + i] = char(vlen >> (24 - 8 * i));
    }
    return h;
  };
  EXPECT_TRUE(send_raw("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));     // unknown command
  EXPECT_TRUE(send_raw(header(1, 0xFFFFFFFFu, 0)));               // key too long
  EXPECT_TRUE(send_raw(header(1, 3, (16u << 20) + 1) + "abc"));   // value too long
  EXPECT_TRUE(send_raw(header(1, 0, 1) + "v"));                   // empty key
  EXPECT_TRUE(send_raw(header(3, 1, 5) + "k12345"));              // WAIT with a value
  {
    int fd = raw_connect("127.0.0.1", port);  // half a frame, then gone
    ::send(fd, "\x01\x00\x00", 3, MSG_NOSIGNAL);
    ::close(fd);
  }
  good->set("after", "2");
  auto other = client(port);
  EXPECT_EQ(other->get("before", Deadline::after(1s), "x"), "1");
  EXPECT_EQ(other->get("after", Deadline::after(1s), "x"), "2");
}

TEST(TcpStore, BindingAUsedPortIsInvalidArgument) {
  // Another socket holds the port (a second store of this process on the
  // same port shares the first one's server: Note [world generations]).
  uint16_t port = free_port();
  int other = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(other, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(other, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(other, 1), 0);
  try {
    server(port);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find(where(port)), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("in use"), std::string::npos) << e.what();
  }
  ::close(other);
}

// Note [world generations]: a server shares its host:port with later stores
// of the process, even after its own Store is gone.
TEST(TcpStore, ALaterStoreOnThePortSharesTheServer) {
  uint16_t port = free_port();
  auto first = server(port);
  first->set("gen0", "a");
  first.reset();
  auto again = server(port);
  EXPECT_EQ(again->try_get("gen0"), std::optional<std::string>("a"));
  try {
    make_tcp_store("127.0.0.1", port, true, Deadline::after(2s),
                   TcpStoreOptions{5s, std::string(32, 'k'), ""});
    FAIL() << "a store with another secret shared the server";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("another job secret"), std::string::npos) << e.what();
  }
  EXPECT_EQ(next_world_generation("127.0.0.1", port, 0), 0u);
  EXPECT_EQ(next_world_generation("127.0.0.1", port, 0), 1u);
  EXPECT_EQ(next_world_generation("127.0.0.1", port, 1), 0u);  // ranks count their own
  auto view = prefix_store(server(port), "world1/");
  view->set("k", "v");
  EXPECT_EQ(again->try_get("world1/k"), std::optional<std::string>("v"));
  EXPECT_EQ(view->try_get("gen0"), std::nullopt);
}

TEST(TcpStore, ServerGoneIsPeerLost) {
  // Port 0: a server of its own, which goes with its Store.
  auto srv = server(0, /*linger=*/0ms);
  const std::string desc = srv->describe();
  const uint16_t port = uint16_t(std::stoi(desc.substr(desc.rfind(':') + 1)));
  auto c = client(port);
  c->set("k", "v");
  srv.reset();
  for (int attempt = 0; attempt < 2; ++attempt) {  // a dead connection, then a refused one
    try {
      c->get("k", Deadline::after(1s), "rank 0");
      FAIL() << "no error on attempt " << attempt;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::PeerLost) << e.what();
      EXPECT_NE(std::string(e.what()).find(where(port)), std::string::npos) << e.what();
    }
  }
}

TEST(TcpStore, AServerThatNeverAnswersCannotHangTheConnection) {
  // A listener that completes the TCP handshake (kernel backlog) but never
  // reads: the store handshake gives up at the connection's deadline. (A
  // store that stops answering after the handshake: store_auth_test.cpp.)
  int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(lfd, 4), 0);
  socklen_t len = sizeof(a);
  ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
  uint16_t port = ntohs(a.sin_port);
  auto t0 = std::chrono::steady_clock::now();
  try {
    make_tcp_store("127.0.0.1", port, false, Deadline::after(1500ms));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Timeout);
    EXPECT_NE(std::string(e.what()).find("store handshake"), std::string::npos) << e.what();
  }
  EXPECT_GE(ms_since(t0), 1400);
  EXPECT_LT(ms_since(t0), 2200);
  ::close(lfd);
}

TEST(TcpStore, ServerLingersForConnectedClients) {
  uint16_t port = free_port();
  auto srv = server(port, /*linger=*/3s);
  auto c = client(port);
  srv->set("k", "v");
  auto t0 = std::chrono::steady_clock::now();
  std::thread closer([&] { srv.reset(); });  // blocks while c is connected
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(c->get("k", Deadline::after(1s), "rank 0"), "v");
  c.reset();
  closer.join();
  EXPECT_LT(ms_since(t0), 1500);
}

// ---- file store ----

class FileStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gradwire-store-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(FileStoreTest, SetAndGet) {
  auto s = make_file_store(dir_ + "/sub/");  // created on demand
  EXPECT_EQ(s->describe(), "file store " + dir_ + "/sub");
  s->set("ag/0/1", "hello");
  s->set("..", "dots");
  s->set("with space & \xff", std::string("\0bin", 4));
  s->set("empty", "");
  std::string long1(5000, 'a'), long2(5000, 'a');
  long2.back() = 'b';
  s->set(long1, "one");
  s->set(long2, "two");
  auto other = make_file_store(dir_ + "/sub");
  EXPECT_EQ(other->get("ag/0/1", Deadline::after(1s), "x"), "hello");
  EXPECT_EQ(other->get("..", Deadline::after(1s), "x"), "dots");
  EXPECT_EQ(other->get("with space & \xff", Deadline::after(1s), "x"), std::string("\0bin", 4));
  EXPECT_EQ(other->get("empty", Deadline::after(1s), "x"), "");
  EXPECT_EQ(other->get(long1, Deadline::after(1s), "x"), "one");
  EXPECT_EQ(other->get(long2, Deadline::after(1s), "x"), "two");
  s->set("ag/0/1", "overwritten");
  EXPECT_EQ(other->try_get("ag/0/1"), "overwritten");
  EXPECT_EQ(other->try_get("absent"), std::nullopt);
  for (auto& e : std::filesystem::directory_iterator(dir_ + "/sub")) {
    EXPECT_NE(e.path().filename().string().rfind(".tmp.", 0), 0u) << "temp file left behind";
  }
}

TEST_F(FileStoreTest, GetWaitsForALaterSet) {
  auto s = make_file_store(dir_);
  std::thread setter([&] {
    std::this_thread::sleep_for(100ms);
    make_file_store(dir_)->set("late", "here");
  });
  EXPECT_EQ(s->get("late", Deadline::after(2s), "setter"), "here");
  setter.join();
}

TEST_F(FileStoreTest, TimeoutNamesTheKey) {
  auto s = make_file_store(dir_);
  auto t0 = std::chrono::steady_clock::now();
  try {
    s->get("ag/3/2", Deadline::after(200ms), "rank 2");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Timeout);
    std::string msg = e.what();
    EXPECT_NE(msg.find("ag/3/2"), std::string::npos) << msg;
    EXPECT_NE(msg.find("rank 2"), std::string::npos) << msg;
    EXPECT_NE(msg.find(dir_), std::string::npos) << msg;
  }
  EXPECT_GE(ms_since(t0), 190);
  EXPECT_LT(ms_since(t0), 700);
}

TEST_F(FileStoreTest, UnusableDirectoryIsInvalidArgument) {
  std::string file = dir_ + "/plain-file";
  make_file_store(dir_)->set("x", "y");
  FILE* f = std::fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  try {
    make_file_store(file);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gradwire::bootstrap
