// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The pure parts of Note [straggler detection] (diag/straggler.h): waits
// per window, lateness without shared clocks, the verdict over a sliding
// window, and the board and answers other processes write.
#include <gtest/gtest.h>

#include "base/collective_call.h"
#include "diag/straggler.h"

namespace gradwire::straggler {
namespace {

using namespace std::chrono_literals;

TEST(StragglerWaitLog, SumsAWindowAndCountsWhatItSaw) {
  WaitLog log(8);
  EXPECT_EQ(log.last(), -1);
  for (uint32_t s = 0; s < 6; ++s) log.add(s, uint8_t(CollectiveOp::Allreduce), 100 * s);
  log.add(3, 0, 1000000);  // older than the newest: ignored
  EXPECT_EQ(log.last(), 5);
  auto s = log.sum(2, 5);
  EXPECT_EQ(s.wait_us, 200 + 300 + 400);
  EXPECT_EQ(s.seen, 3u);
  EXPECT_EQ(s.ops, 1u << uint8_t(CollectiveOp::Allreduce));
  // A gap (collectives the recorder overwrote before the harvest).
  log.add(9, uint8_t(CollectiveOp::Broadcast), 50);
  s = log.sum(4, 10);
  EXPECT_EQ(s.seen, 3u);  // 4, 5, 9
  EXPECT_EQ(s.wait_us, 400 + 500 + 50);
  // Only the newest 8 sequence numbers are kept.
  for (uint32_t q = 10; q < 20; ++q) log.add(q, 0, 1);
  EXPECT_EQ(log.sum(0, 20).seen, 8u);
  // Negative waits (a clock read out of order) count as none.
  log.add(20, 0, -5);
  EXPECT_EQ(log.sum(20, 21).wait_us, 0);
}

TEST(StragglerLateness, IsTheOthersMedianWaitMinusOwn) {
  // Rank 2 arrives 80 ms late in each of 10 collectives: it waits ~0, the
  // others ~80 ms each.
  std::vector<Answer> a{{1, 800000, 10}, {1, 810000, 10}, {1, 5000, 10}, {1, 790000, 10}};
  auto late = lateness(a, 10);
  ASSERT_TRUE(late);
  EXPECT_NEAR((*late)[2], 0.8 - 0.005, 1e-9);
  EXPECT_NEAR((*late)[0], -0.01, 1e-9);  // median of 0.81, 0.005, 0.79 is 0.79; 0.79 - 0.8
  EXPECT_LT((*late)[1], 0.0);
  // Two ranks: the other's wait minus own.
  late = lateness({{1, 500000, 5}, {1, 0, 5}}, 5);
  ASSERT_TRUE(late);
  EXPECT_NEAR((*late)[1], 0.5, 1e-9);
  EXPECT_NEAR((*late)[0], -0.5, 1e-9);
  // A rank that saw only half of the window is scaled to all of it.
  late = lateness({{1, 250000, 5}, {1, 0, 10}}, 10);
  EXPECT_NEAR((*late)[1], 0.5, 1e-9);
  // A rank that saw nothing: no verdict on this window.
  EXPECT_FALSE(lateness({{1, 0, 0}, {1, 0, 10}}, 10));
}

Window window(uint32_t first, double seconds, std::vector<double> late) {
  Window w;
  w.first = first;
  w.end = first + 10;
  w.seconds = seconds;
  w.ops = 1u << uint8_t(CollectiveOp::Allreduce);
  w.late_s = std::move(late);
  return w;
}

TEST(StragglerJudge, NamesARankLateInEnoughWindows) {
  Judge j(0.25, 10s);
  j.add(window(0, 1.0, {0.0, 0.5, 0.0}));
  j.add(window(10, 1.0, {0.0, 0.5, 0.0}));
  EXPECT_TRUE(j.verdict().empty());  // late in two windows only
  j.add(window(20, 1.0, {0.0, 0.5, 0.0}));
  auto v = j.verdict();
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].rank, 1);
  EXPECT_NEAR(v[0].share, 0.5, 1e-9);
  EXPECT_NEAR(v[0].late_s, 1.5, 1e-9);
  EXPECT_EQ(v[0].collectives, 30u);
  EXPECT_EQ(v[0].first, 0u);
  EXPECT_EQ(v[0].last, 29u);
  EXPECT_EQ(op_names(v[0].ops), "allreduce");
  auto st = j.standings();
  ASSERT_EQ(st.size(), 3u);
  EXPECT_EQ(st[1].late_windows, 3);
}

TEST(StragglerJudge, OneLongWaitIsNotAStraggler) {
  // Rank 0 loads a data set for 30 s while the others wait in the first
  // broadcast: one long window, then balanced ones.
  Judge j(0.25, 10s);
  j.add(window(0, 30.0, {30.0, -15.0, -15.0}));
  EXPECT_TRUE(j.verdict().empty());
  for (uint32_t i = 1; i <= 12; ++i) j.add(window(10 * i, 1.0, {0.01, 0.0, -0.01}));
  EXPECT_TRUE(j.verdict().empty());
  EXPECT_LT(j.standings()[0].share, 0.05);  // the long window left the span
}

TEST(StragglerJudge, ForgetsWhatLeftTheWindow) {
  Judge j(0.25, 5s);
  for (uint32_t i = 0; i < 5; ++i) j.add(window(10 * i, 1.0, {0.0, 0.8}));
  ASSERT_EQ(j.verdict().size(), 1u);
  // It catches up: two balanced windows leave three late ones in the span
  // (2.4 s late of 5 s), a third leaves two: no longer named, though its
  // share (1.6 s of 5 s) is still over the threshold.
  for (uint32_t i = 5; i < 7; ++i) j.add(window(10 * i, 1.0, {0.0, 0.0}));
  EXPECT_EQ(j.verdict().size(), 1u);
  j.add(window(70, 1.0, {0.0, 0.0}));
  EXPECT_TRUE(j.verdict().empty());
  EXPECT_NEAR(j.standings()[1].share, 0.32, 1e-9);
  for (uint32_t i = 8; i < 11; ++i) j.add(window(10 * i, 1.0, {0.0, 0.0}));
  EXPECT_TRUE(j.verdict().empty());
  EXPECT_NEAR(j.standings()[1].window_s, 5.0, 1e-9);
}

TEST(StragglerJudge, BalancedNoiseIsNotNamed) {
  Judge j(0.25, 10s);
  for (uint32_t i = 0; i < 100; ++i) {
    const double x = (i % 7) * 0.01 - 0.03;  // up to 30 ms either way per second
    j.add(window(10 * i, 1.0, {x, -x}));
  }
  EXPECT_TRUE(j.verdict().empty());
}

TEST(StragglerBoard, RoundTrips) {
  Board b;
  b.asks = {{7, 100, 160}, {8, 160, 220}};
  Named n;
  n.rank = 3;
  n.share = 0.4125;
  n.late_s = 4.125;
  n.window_s = 10.0;
  n.collectives = 480;
  n.first = 1200;
  n.last = 1679;
  n.ops = 1u << uint8_t(CollectiveOp::Allreduce) | 1u << uint8_t(CollectiveOp::Broadcast);
  b.named = {n};
  const auto parsed = parse_board(encode(b));
  ASSERT_TRUE(parsed);
  ASSERT_EQ(parsed->asks.size(), 2u);
  EXPECT_EQ(parsed->asks[1].id, 8u);
  EXPECT_EQ(parsed->asks[1].first, 160u);
  EXPECT_EQ(parsed->asks[1].end, 220u);
  ASSERT_EQ(parsed->named.size(), 1u);
  EXPECT_EQ(parsed->named[0].rank, 3);
  EXPECT_NEAR(parsed->named[0].share, 0.4125, 1e-6);
  EXPECT_NEAR(parsed->named[0].late_s, 4.125, 1e-3);
  EXPECT_EQ(parsed->named[0].collectives, 480u);
  EXPECT_EQ(parsed->named[0].last, 1679u);
  EXPECT_EQ(op_names(parsed->named[0].ops), "allreduce, broadcast");
  EXPECT_TRUE(parse_board("gradwire-straggler/1\n"));  // nothing asked yet
}

TEST(StragglerBoard, RefusesMalformedText) {
  for (const char* bad :
       {"", "gradwire-straggler/2\n", "gradwire-straggler/1", "gradwire-straggler/1\nx 1 2 3\n",
        "gradwire-straggler/1\na 1 5 3\n", "gradwire-straggler/1\na 1 2\n",
        "gradwire-straggler/1\na -1 2 3\n", "gradwire-straggler/1\nn -1 0 0 0 0 0 0 0\n",
        "gradwire-straggler/1\na 1 2 3x\n"}) {
    EXPECT_FALSE(parse_board(bad)) << bad;
  }
}

TEST(StragglerAnswers, RoundTripAndRefuseMalformed) {
  const std::vector<Answer> a{{4, 123456, 60}, {5, 0, 61}};
  const auto parsed = parse_answers(encode(a));
  ASSERT_TRUE(parsed);
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[0].wait_us, 123456);
  EXPECT_EQ((*parsed)[1].seen, 61u);
  EXPECT_TRUE(parse_answers(""));
  EXPECT_FALSE(parse_answers("4 -1 60\n"));
  EXPECT_FALSE(parse_answers("4 1\n"));
  EXPECT_FALSE(parse_answers("4 1 2 3\n"));
}

TEST(StragglerReport, SaysWhoHowLateAndOnWhat) {
  Named n;
  n.rank = 1;
  n.share = 0.41;
  n.late_s = 4.1;
  n.window_s = 10.0;
  n.collectives = 480;
  n.first = 1200;
  n.last = 1679;
  n.ops = 1u << uint8_t(CollectiveOp::Allreduce);
  const StragglerReport r = report(n, true, 0.25);
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.late, 4100ms);
  EXPECT_EQ(r.per_collective.count(), 8542);
  EXPECT_EQ(r.window, 10000ms);
  EXPECT_EQ(r.ops, "allreduce");
  EXPECT_NE(r.message.find("rank 1 kept the other ranks waiting 41% of the last 10.0 s (4.10 s "
                           "in all, 8.5 ms a collective, over 480 collectives: allreduce "
                           "#1200-#1679)"),
            std::string::npos)
      << r.message;
  const std::string json = to_json(r);
  EXPECT_NE(json.find("\"rank\": 1, \"named\": true, \"share\": 0.4100, \"late_ms\": 4100"),
            std::string::npos)
      << json;
  const StragglerReport back = report(n, false, 0.25);
  EXPECT_NE(back.message.find("rank 1 is no longer named"), std::string::npos);
}

}  // namespace
}  // namespace gradwire::straggler
