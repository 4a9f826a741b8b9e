// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// What the watchdog relies on (Note [watchdog]): the engine reports an
// operation stuck past its deadline plus slack, and can fail the Works
// queued behind it so that nobody waits forever.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

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

}  // namespace
}  // namespace gradwire
