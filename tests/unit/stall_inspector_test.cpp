// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The stall inspector's cross-rank verdict (Note [stall inspector]) and its
// environment variables, without ranks.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gradwire/error.h"
#include "reducer/stall.h"

namespace gradwire {
namespace {

bool contains(const std::string& s, const std::string& n) { return s.find(n) != std::string::npos; }

TEST(StallInspector, NamesTheRanksThatHaveNotLaunchedTheBucket) {
  // Rank 0 waits in bucket 2 of step 5. Rank 1 launched 2 buckets (0, 1),
  // rank 2 is a step behind, rank 3 launched everything, rank 4 is silent.
  const std::vector<std::string> st = {"", "5 2 4 fc.weight, fc.bias", "4 4 4 ", "5 4 4 ", ""};
  const std::string m = StallInspector::who_is_missing(0, 5, 2, st);
  EXPECT_TRUE(contains(m, "2 ranks have not launched it: rank 1 (at step 5, 2 of 4 buckets "
                          "launched; it waits for gradients of: fc.weight, fc.bias), rank 2 (at "
                          "step 4, 4 of 4 buckets launched)")) << m;
  EXPECT_TRUE(contains(m, "no stall report from rank(s) 4")) << m;
  EXPECT_FALSE(contains(m, "rank 3")) << m;
}

TEST(StallInspector, NoReportsYet) {
  EXPECT_TRUE(contains(StallInspector::who_is_missing(0, 1, 0, {}), "not in yet"));
  EXPECT_TRUE(contains(StallInspector::who_is_missing(0, 1, 0, {"", "1 3 3 "}),
                       "every other rank reported having launched it"));
}

TEST(StallInspector, EnvironmentOverridesAndValidation) {
  ReducerOptions o;
  setenv("GRADWIRE_STALL_WARN_S", "0.25", 1);
  setenv("GRADWIRE_STALL_SHUTDOWN_S", "0", 1);
  apply_stall_env(o);
  EXPECT_EQ(o.stall_warn, std::chrono::milliseconds(250));
  EXPECT_EQ(o.stall_shutdown, std::chrono::milliseconds(0));
  setenv("GRADWIRE_STALL_WARN_S", "soon", 1);
  try {
    apply_stall_env(o);
    ADD_FAILURE() << "expected InvalidArgument";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_TRUE(contains(e.what(), "GRADWIRE_STALL_WARN_S='soon'")) << e.what();
  }
  unsetenv("GRADWIRE_STALL_WARN_S");
  unsetenv("GRADWIRE_STALL_SHUTDOWN_S");
  ReducerOptions d;
  EXPECT_EQ(d.stall_warn, std::chrono::seconds(60));
  EXPECT_EQ(d.stall_shutdown, std::chrono::minutes(30));
}

}  // namespace
}  // namespace gradwire
