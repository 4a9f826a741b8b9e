// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [spins that adapt] (src/collectives/context.cpp): auto's spin of a
// caller's thread is long only while the job's ranks fit the host's cores
// and the process is not being preempted.
#include <gtest/gtest.h>

#include <chrono>

#include "collectives/context.h"

namespace gradwire::collectives {
namespace {

using std::chrono::milliseconds;

TEST(SpinsThatAdapt, TheRule) {
  EXPECT_FALSE(core_contended(0, milliseconds(100)));
  EXPECT_FALSE(core_contended(4, milliseconds(100)));  // 40/s: an idle host's own wake-ups
  EXPECT_TRUE(core_contended(5, milliseconds(100)));   // 50/s
  EXPECT_TRUE(core_contended(30, milliseconds(100)));  // a busy loop on our core
  EXPECT_FALSE(core_contended(49, milliseconds(1000)));
  EXPECT_TRUE(core_contended(50, milliseconds(1000)));
  EXPECT_FALSE(core_contended(10, milliseconds(0)));  // no window, no judgement
}

// kFlagSpinAlone and kFlagSpinShared (context.cpp): 20000 and 200 polls.
TEST(SpinsThatAdapt, PreemptionsShortenTheSpinUntilAQuietWindow) {
  set_host_ranks(1);  // one rank: fits any host
  const auto t = std::chrono::steady_clock::now();
  note_preemptions(1000, t);  // the first sample only starts a window
  EXPECT_EQ(flag_spin(), 20000u);
  note_preemptions(1002, t + milliseconds(100));  // 20/s
  EXPECT_EQ(flag_spin(), 20000u);
  note_preemptions(1032, t + milliseconds(200));  // 300/s
  EXPECT_EQ(flag_spin(), 200u);
  note_preemptions(1032, t + milliseconds(250));  // a window too short: no change
  EXPECT_EQ(flag_spin(), 200u);
  note_preemptions(1033, t + milliseconds(400));  // 5/s over 200 ms
  EXPECT_EQ(flag_spin(), 20000u);
  set_host_ranks(1 << 20);  // more ranks than cores: short whatever the rate
  EXPECT_EQ(flag_spin(), 200u);
  note_preemptions(1033, t + milliseconds(600));
  EXPECT_EQ(flag_spin(), 200u);
  set_host_ranks(1);
  EXPECT_EQ(flag_spin(), 20000u);
}

}  // namespace
}  // namespace gradwire::collectives
