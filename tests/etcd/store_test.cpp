// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The etcd store (Note [etcd over its JSON gateway], Note [etcd leases] in
// src/bootstrap/etcd_store.cpp) against a real etcd, which store.sh starts
// and stops: GW_ETCD is its client URL. Skipped without it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/etcd_store.h"
#include "gradwire/error.h"

namespace gradwire {
namespace {

using namespace bootstrap;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

std::string etcd_url() {
  const char* v = std::getenv("GW_ETCD");
  return v ? v : "";
}

// A fresh prefix per test: the etcd of store.sh is shared by the tests.
std::string fresh_prefix() {
  static std::atomic<int> n{0};
  return "/gwtest/" + std::to_string(::getpid()) + "-" + std::to_string(n++) + "/";
}

std::unique_ptr<Store> open_store(std::vector<std::string> urls, milliseconds first = milliseconds(10000),
                                  std::chrono::seconds ttl = std::chrono::seconds(5)) {
  EtcdOptions o;
  o.source = "GW_ETCD";
  o.endpoints = parse_etcd_endpoints(urls, o.source);
  o.request_timeout = milliseconds(10000);
  o.first_contact = first;
  o.ttl = ttl;
  return make_etcd_store(o);
}

class EtcdStore : public ::testing::Test {
 protected:
  void SetUp() override {
    if (etcd_url().empty()) GTEST_SKIP() << "GW_ETCD not set (run through tests/etcd/store.sh)";
    store_ = prefix_store(open_store({etcd_url()}), fresh_prefix());
  }
  std::unique_ptr<Store> store_;
};

long long ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
}

TEST_F(EtcdStore, SetGetAndTryGetCarryBinaryValues) {
  const std::string value("a\0b\xff\x01 binary", 12);
  EXPECT_FALSE(store_->try_get("k"));
  store_->set("k", value);
  EXPECT_EQ(store_->try_get("k"), value);
  EXPECT_EQ(store_->get("k", Deadline::after(milliseconds(1000)), "test"), value);
  store_->set("k", "");
  EXPECT_EQ(store_->try_get("k"), std::string());  // empty, not absent
}

TEST_F(EtcdStore, GetWaitsWithAWatchAndTimesOutNamingTheKey) {
  const auto t0 = Clock::now();
  std::atomic<long long> written{0};
  std::thread writer([&] {
    std::this_thread::sleep_for(milliseconds(400));
    store_->set("later", "v");
    written = ms_since(t0);
  });
  EXPECT_EQ(store_->get("later", Deadline::after(milliseconds(5000)), "the writer"), "v");
  const long long got = ms_since(t0);
  writer.join();
  EXPECT_LT(got - written, 150) << "a watch wakes at the write, not at a poll";
  const auto t1 = Clock::now();
  try {
    store_->get("never", Deadline::after(milliseconds(800)), "rank 9");
    ADD_FAILURE() << "no timeout";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Timeout);
    EXPECT_NE(std::string(e.what()).find("rank 9"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("never"), std::string::npos) << e.what();
  }
  EXPECT_LT(ms_since(t1), 2000);
}

TEST_F(EtcdStore, SetIfAbsentHasOneWinnerAcrossClients) {
  const std::string prefix = fresh_prefix();
  constexpr int kClients = 6;
  for (int round = 0; round < 5; ++round) {
    std::atomic<int> winners{0};
    std::vector<std::thread> threads;
    for (int c = 0; c < kClients; ++c) {
      threads.emplace_back([&, c] {
        auto s = prefix_store(open_store({etcd_url()}), prefix);
        if (s->set_if_absent("slot/" + std::to_string(round), "client " + std::to_string(c))) {
          ++winners;
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(winners.load(), 1) << "round " << round;
  }
}

TEST_F(EtcdStore, EphemeralKeysLiveWithTheProcessAndExpireAfterIt) {
  const std::string prefix = fresh_prefix();
  auto owner = prefix_store(open_store({etcd_url()}, milliseconds(10000), std::chrono::seconds(2)),
                            prefix);
  ASSERT_TRUE(owner->set_ephemeral("alive", "yes"));
  // Refreshed: still there well past the TTL.
  std::this_thread::sleep_for(milliseconds(3500));
  auto reader = prefix_store(open_store({etcd_url()}), prefix);
  EXPECT_EQ(reader->try_get("alive"), "yes");
  const auto t0 = Clock::now();
  owner.reset();  // the process ends: its lease is no longer refreshed
  while (reader->try_get("alive") && ms_since(t0) < 10000) std::this_thread::sleep_for(milliseconds(100));
  EXPECT_FALSE(reader->try_get("alive"));
  EXPECT_LT(ms_since(t0), 4500) << "gone within the TTL (2 s) and etcd's expiry check";
}

TEST_F(EtcdStore, WaitChangeWakesOnAWriteUnderThePrefix) {
  uint64_t cursor = 0;
  store_->wait_change("dir/", &cursor, Deadline::after(milliseconds(1000)));
  EXPECT_GT(cursor, 0u);
  const auto t0 = Clock::now();
  std::thread writer([&] {
    std::this_thread::sleep_for(milliseconds(300));
    store_->set("dir/x", "1");
  });
  store_->wait_change("dir/", &cursor, Deadline::after(milliseconds(5000)));
  const long long took = ms_since(t0);
  writer.join();
  EXPECT_GE(took, 250);
  EXPECT_LT(took, 1500);
  // Nothing new: it waits until `until`.
  const auto t1 = Clock::now();
  store_->wait_change("dir/", &cursor, Deadline::after(milliseconds(500)));
  EXPECT_GE(ms_since(t1), 400);
}

TEST_F(EtcdStore, CallsFailOverToALiveMember) {
  // Port 1 on loopback refuses: a member that died.
  for (auto urls : {std::vector<std::string>{"http://127.0.0.1:1", etcd_url()},
                    std::vector<std::string>{etcd_url(), "http://127.0.0.1:1"}}) {
    auto s = prefix_store(open_store(urls), fresh_prefix());
    for (int i = 0; i < 4; ++i) {
      s->set("k" + std::to_string(i), "v");
      EXPECT_EQ(s->try_get("k" + std::to_string(i)), "v");
    }
  }
}

TEST(EtcdStoreBadInput, AnUnreachableClusterFailsAtTheFirstContactNamingEachMember) {
  const auto t0 = Clock::now();
  try {
    // 192.0.2.1 (TEST-NET-1) is never routed: connects time out.
    open_store({"http://127.0.0.1:1", "http://192.0.2.1:2379"}, milliseconds(2000));
    ADD_FAILURE() << "an unreachable cluster was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Transport);
    const std::string w = e.what();
    EXPECT_NE(w.find("http://127.0.0.1:1"), std::string::npos) << w;
    EXPECT_NE(w.find("http://192.0.2.1:2379"), std::string::npos) << w;
    EXPECT_NE(w.find("GW_ETCD"), std::string::npos) << w;
  }
  EXPECT_LT(ms_since(t0), 5000);
}

// A server that answers every connection with `reply` and closes.
class FakeServer {
 public:
  explicit FakeServer(std::string reply) : reply_(std::move(reply)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    ::listen(fd_, 16);
    thread_ = std::thread([this] {
      for (;;) {
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        char buf[4096];
        (void)::recv(c, buf, sizeof buf, 0);
        (void)::send(c, reply_.data(), reply_.size(), MSG_NOSIGNAL);
        ::close(c);
      }
    });
  }
  ~FakeServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  std::string reply_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

TEST(EtcdStoreBadInput, AServerThatIsNotEtcdIsNamed) {
  FakeServer http404("HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found");
  try {
    open_store({http404.url()}, milliseconds(2000));
    ADD_FAILURE() << "accepted an HTTP server that is not etcd";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Protocol);
    EXPECT_NE(std::string(e.what()).find("not an etcd v3 JSON gateway"), std::string::npos)
        << e.what();
  }
  FakeServer ssh("SSH-2.0-OpenSSH_9.2\r\n\r\n");
  const auto t0 = Clock::now();
  try {
    open_store({ssh.url()}, milliseconds(5000));
    ADD_FAILURE() << "accepted a server that is not HTTP";
  } catch (const Error& e) {
    // At the first answer, not after retrying until the deadline.
    EXPECT_EQ(e.code(), ErrorCode::Protocol);
    EXPECT_NE(std::string(e.what()).find("not an HTTP/1.x status line"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(ms_since(t0), 4000);
}

}  // namespace
}  // namespace gradwire
