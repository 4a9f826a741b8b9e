// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// What the watchdog relies on (Note [watchdog]): the engine reports an
// operation stuck past its deadline plus slack, and can fail the Works
// queued behind it so that nobody waits forever.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/engine.h"
#include "base/work_state.h"
#include "gradwire/error.h"
#include "gradwire/work.h"

namespace gradwire {
namespace {

using namespace std::chrono_literals;

TEST(WatchdogEngine, StuckOperationIsReportedAndQueuedWorkFails) {
  Engine engine("test");
  std::atomic<bool> release{false};
  auto stuck = std::make_shared<detail::WorkState>("rank 0: allreduce #7 (4 x float32 sum)", 100ms);
  engine.submit(stuck, [&](detail::WorkState&) {
    while (!release) std::this_thread::sleep_for(1ms);  // a hung provider call
  });
  auto queued = std::make_shared<detail::WorkState>("rank 0: barrier #8", 100ms);
  engine.submit(queued, [](detail::WorkState&) { FAIL() << "must not run"; });

  EXPECT_EQ(engine.overdue(), "");  // within deadline + slack
  const auto t0 = std::chrono::steady_clock::now();
  std::string what;
  while (what.empty() && std::chrono::steady_clock::now() - t0 < 10s) {
    std::this_thread::sleep_for(20ms);
    what = engine.overdue();
  }
  EXPECT_EQ(what, "rank 0: allreduce #7 (4 x float32 sum)");
  // Past 100 ms + engine_slack (5 s), not before.
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 5000ms);

  EXPECT_EQ(engine.fail_queued(std::make_exception_ptr(Error(ErrorCode::Timeout, "stuck"))), 1u);
  try {
    Work(queued).wait(1s);
    ADD_FAILURE() << "the queued Work must fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Timeout);
    EXPECT_STREQ(e.what(), "gradwire Timeout: stuck");
  }
  release = true;
  EXPECT_TRUE(engine.shutdown());
}

// Note [a claim is two stores] in runtime/engine.cpp: a caller's claim of
// an idle engine excludes the engine thread until released, and keeps the
// order of what is submitted meanwhile.
TEST(EngineClaim, ExcludesTheEngineAndKeepsOrder) {
  Engine engine("claim");
  ASSERT_TRUE(engine.claim_inline());
  EXPECT_FALSE(engine.claim_inline());  // one claim at a time
  EXPECT_FALSE(engine.idle_hint());
  std::atomic<int> ran{0};
  auto a = std::make_shared<detail::WorkState>("a", 10s);
  engine.submit(a, [&](detail::WorkState&) { ran = 1; });
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(ran.load(), 0);  // queued behind the claim
  engine.release_inline();
  Work(a).wait(10s);
  EXPECT_EQ(ran.load(), 1);
  // Idle again: claimable (the loop clears its busy bit after the task).
  const auto t0 = std::chrono::steady_clock::now();
  bool claimed = false;
  while (!(claimed = engine.claim_inline()) && std::chrono::steady_clock::now() - t0 < 10s) {
    std::this_thread::yield();
  }
  ASSERT_TRUE(claimed);
  engine.release_inline();
  EXPECT_TRUE(engine.shutdown());
  EXPECT_FALSE(engine.claim_inline());  // after the loop exited
}

// Note [idle before done] in runtime/engine.cpp: a waiter that sees its
// operation done finds the engine idle, so its next collective runs on its
// own thread instead of queueing (which made every later call queue too).
// Spinning on `done` sees it the moment it is set: with the old order
// (done first, idle after) most of these 200 rounds saw a busy engine.
// An operation with callbacks keeps them ahead of the next claim.
TEST(EngineClaim, TheEngineIsIdleWhenAWaiterSeesItsWorkDone) {
  Engine engine("idle");
  for (int i = 0; i < 200; ++i) {
    auto state = std::make_shared<detail::WorkState>("op", 10s);
    engine.submit(state, [](detail::WorkState&) {});
    const auto t0 = std::chrono::steady_clock::now();
    while (!state->done.load(std::memory_order_acquire) &&
           std::chrono::steady_clock::now() - t0 < 10s) {
    }
    ASSERT_TRUE(state->done.load());
    ASSERT_TRUE(engine.claim_inline()) << "round " << i;
    engine.release_inline();
  }
  std::atomic<bool> in_callback{false}, claimed_during_callback{false};
  auto state = std::make_shared<detail::WorkState>("with callback", 10s);
  std::atomic<bool> go{false};
  engine.submit(state, [&](detail::WorkState&) {
    while (!go) std::this_thread::yield();
  });
  Work(state).then([&](std::exception_ptr) {
    in_callback = true;
    std::this_thread::sleep_for(20ms);
    in_callback = false;
  });
  go = true;
  while (!state->done.load()) {
    if (in_callback && engine.claim_inline()) {
      // Still inside the callback once claimed: the claim overlapped it.
      // (The callback may have ended between the first check and the
      // claim; the engine went idle after it, and the claim's acquire
      // load of that makes in_callback's last store visible here.)
      if (in_callback) claimed_during_callback = true;
      engine.release_inline();
    }
  }
  EXPECT_FALSE(claimed_during_callback.load());
  EXPECT_TRUE(engine.shutdown());
}

TEST(EngineClaim, ResumedOperationRunsBeforeWhatQueuedMeanwhile) {
  Engine engine("resume");
  ASSERT_TRUE(engine.claim_inline());
  std::vector<int> order;
  std::mutex mu;
  auto later = std::make_shared<detail::WorkState>("later", 10s);
  engine.submit(later, [&](detail::WorkState&) {
    std::lock_guard<std::mutex> lk(mu);
    order.push_back(2);
  });
  auto claimed = std::make_shared<detail::WorkState>("claimed", 10s);
  engine.resume(claimed, [&](detail::WorkState&) {
    std::lock_guard<std::mutex> lk(mu);
    order.push_back(1);
  });
  Work(later).wait(10s);
  Work(claimed).wait(10s);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_TRUE(engine.shutdown());
}

TEST(EngineClaim, ShutdownWaitsForTheRelease) {
  Engine engine("shutdown");
  ASSERT_TRUE(engine.claim_inline());
  std::atomic<bool> released{false};
  std::thread t([&] {
    std::this_thread::sleep_for(100ms);
    released = true;
    engine.release_inline();
  });
  EXPECT_TRUE(engine.shutdown());
  EXPECT_TRUE(released.load());
  t.join();
}

// Claims on one thread race submissions from another: no task may run
// while a claim is held, and every task runs.
TEST(EngineClaim, NoTaskRunsWhileClaimed) {
  Engine engine("race");
  std::atomic<bool> holding{false};
  std::atomic<int> overlaps{0}, ran{0}, claims{0};
  std::atomic<bool> stop{false};
  std::thread claimer([&] {
    while (!stop) {
      if (engine.claim_inline()) {
        holding = true;
        ++claims;
        std::this_thread::yield();  // hold the claim across a scheduling point
        holding = false;
        engine.release_inline();
      }
    }
  });
  constexpr int kTasks = 2000;
  std::vector<std::shared_ptr<detail::WorkState>> states;
  for (int i = 0; i < kTasks; ++i) {
    states.push_back(std::make_shared<detail::WorkState>("t", 30s));
    engine.submit(states.back(), [&](detail::WorkState&) {
      if (holding) ++overlaps;
      ++ran;
    });
    if (i % 16 == 0) Work(states.back()).wait(30s);  // let the engine go idle now and then
  }
  for (auto& s : states) Work(s).wait(30s);
  const auto t0 = std::chrono::steady_clock::now();  // the engine is idle now: claims succeed
  while (claims == 0 && std::chrono::steady_clock::now() - t0 < 10s) std::this_thread::yield();
  stop = true;
  claimer.join();
  EXPECT_EQ(ran.load(), kTasks);
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_GT(claims.load(), 0);
  EXPECT_TRUE(engine.shutdown());
}

}  // namespace
}  // namespace gradwire
