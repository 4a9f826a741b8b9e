// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The sentence a failed collective's error ends with (Note [reach report]
// in diag/reach.h), from the ranks' progress as the watchdog read it.
#include <gtest/gtest.h>

#include "diag/reach.h"

namespace gradwire::reach {
namespace {

using Progress = std::vector<std::optional<int64_t>>;

TEST(ReachReport, NamesTheRankThatDidNotReachIt) {
  EXPECT_EQ(sentence("allreduce #28", 28, Progress{28, 27, 28}),
            "allreduce #28: reached by ranks 0, 2; not reached by rank 1 (last seen starting #27)");
}

TEST(ReachReport, LaterCollectivesCountAsReached) {
  // A rank that finished #5 and started #6 (its part of a ring was done).
  EXPECT_EQ(sentence("barrier #5", 5, Progress{5, 6}), "barrier #5: reached by ranks 0, 1");
}

TEST(ReachReport, MissingProgressIsUnknown) {
  EXPECT_EQ(sentence("allreduce #22", 22, Progress{22, std::nullopt, 22}),
            "allreduce #22: reached by ranks 0, 2; progress unknown for rank 1 (no progress "
            "published)");
  EXPECT_EQ(sentence("allreduce #3", 3, Progress{3, std::nullopt, std::nullopt, 1},
                     "not read in time"),
            "allreduce #3: reached by rank 0; not reached by rank 3 (last seen starting #1); "
            "progress unknown for ranks 1, 2 (not read in time)");
}

TEST(ReachReport, GroupsRanksBehindFurthestFirst) {
  EXPECT_EQ(sentence("allgather #10", 10, Progress{10, 9, 7, 9, 10}),
            "allgather #10: reached by ranks 0, 4; not reached by rank 2 (last seen starting #7), "
            "ranks 1, 3 (last seen starting #9)");
}

TEST(ReachReport, StaysShortInLargeWorlds) {
  Progress p(1024, int64_t{50});
  p[7] = 49;
  for (int r = 100; r < 106; ++r) p[size_t(r)] = 40 + r - 100;  // six more groups
  EXPECT_EQ(sentence("allreduce #50", 50, p),
            "allreduce #50: reached by ranks 0-6, 8-99, 106-1023; not reached by rank 100 (last "
            "seen starting #40), rank 101 (last seen starting #41), rank 102 (last seen starting "
            "#42), rank 103 (last seen starting #43) and 3 more ranks seen later");
}

TEST(ReachReport, RankLists) {
  EXPECT_EQ(rank_list({}), "");
  EXPECT_EQ(rank_list({3}), "3");
  EXPECT_EQ(rank_list({0, 1}), "0, 1");
  EXPECT_EQ(rank_list({0, 1, 2, 5, 7, 8}), "0-2, 5, 7, 8");
}

TEST(ReachReport, ProgressKeysAndValues) {
  EXPECT_EQ(progress_key("world", 3), "gradwire/progress/world/3");
  EXPECT_EQ(parse_progress("27"), 27);
  EXPECT_EQ(parse_progress("0"), 0);
  EXPECT_EQ(parse_progress(""), std::nullopt);
  EXPECT_EQ(parse_progress("-1"), std::nullopt);
  EXPECT_EQ(parse_progress("27x"), std::nullopt);
  EXPECT_EQ(parse_progress("99999999999999999999999"), std::nullopt);
}

}  // namespace
}  // namespace gradwire::reach
