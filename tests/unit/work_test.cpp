// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Work and the engine thread, without any transport.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "runtime/engine.h"
#include "base/work_state.h"
#include "gradwire/error.h"
#include "gradwire/work.h"

namespace gradwire {
namespace {

using namespace std::chrono_literals;

std::shared_ptr<detail::WorkState> state(std::chrono::milliseconds timeout = 1000ms) {
  return std::make_shared<detail::WorkState>("test op #1", timeout);
}

TEST(Work, EngineRunsInSubmissionOrder) {
  Engine engine("test");
  std::vector<int> order;
  std::vector<Work> works;
  for (int i = 0; i < 100; ++i) {
    auto s = state();
    engine.submit(s, [&order, i](detail::WorkState&) { order.push_back(i); });
    works.emplace_back(s);
  }
  for (auto& w : works) w.wait();
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(Work, ErrorsReachEveryWaiterAndCallback) {
  Engine engine("test");
  auto s = state();
  Work w(s);
  std::atomic<int> called{0};
  w.then([&](std::exception_ptr e) { called += e ? 1 : 100; });
  engine.submit(s, [](detail::WorkState&) { throw Error(ErrorCode::PeerLost, "rank 3 died"); });
  try {
    w.wait();
    FAIL() << "wait() did not rethrow";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::PeerLost);
    EXPECT_NE(std::string(e.what()).find("rank 3 died"), std::string::npos);
  }
  EXPECT_EQ(called.load(), 1);  // ran before wait() returned
  EXPECT_TRUE(w.test());
  EXPECT_NE(w.error(), nullptr);
  // A callback added after completion runs at once.
  w.then([&](std::exception_ptr e) { called += e ? 10 : 0; });
  EXPECT_EQ(called.load(), 11);
}

TEST(Work, WaitWithTimeoutFailsButTheWorkGoesOn) {
  Engine engine("test");
  auto s = state(10s);
  std::atomic<bool> release{false};
  engine.submit(s, [&](detail::WorkState&) {
    while (!release) std::this_thread::sleep_for(1ms);
  });
  Work w(s);
  try {
    w.wait(50ms);
    FAIL() << "wait(50ms) returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Timeout);
    EXPECT_NE(std::string(e.what()).find("test op #1"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(w.test());
  release = true;
  w.wait(5s);
  EXPECT_TRUE(w.test());
}

TEST(Work, AStuckEngineIsReportedNotWaitedForForever) {
  // The operation's own deadline is 100 ms; wait() gives the engine a
  // slack of max(5 s, timeout/10) and then reports it stuck.
  Engine engine("test");
  auto s = state(100ms);
  std::atomic<bool> release{false};
  engine.submit(s, [&](detail::WorkState&) {
    while (!release) std::this_thread::sleep_for(1ms);
  });
  Work w(s);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    w.wait();
    FAIL() << "wait() returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Timeout);
    EXPECT_NE(std::string(e.what()).find("engine thread"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 8s);
  release = true;
}

TEST(Work, EmptyWorkIsAnError) {
  Work w;
  EXPECT_FALSE(w.valid());
  EXPECT_FALSE(w.test());
  EXPECT_THROW(w.wait(), Error);
}

TEST(Error, MessageCarriesTheCode) {
  Error e(ErrorCode::Mismatch, "rank 1: allreduce #4 sizes differ");
  EXPECT_EQ(e.code(), ErrorCode::Mismatch);
  EXPECT_STREQ(e.what(), "gradwire Mismatch: rank 1: allreduce #4 sizes differ");
  EXPECT_EQ(to_string(ErrorCode::Timeout), "Timeout");
}

}  // namespace
}  // namespace gradwire
