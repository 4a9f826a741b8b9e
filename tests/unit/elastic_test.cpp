// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Elastic membership (Note [elastic generations] in src/elastic/group.cpp):
// the pure planning functions, the stores' atomic set_if_absent, and
// generations formed and grown by ranks that are threads of this process.
// Recovery from a killed process is tested with processes
// (tests/ranks/elastic_kill.sh): ranks that are threads share the
// process-wide failure state of Note [watchdog].
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/store.h"
#include "elastic/membership.h"
#include "gradwire/elastic.h"
#include "gradwire/error.h"

namespace gradwire {
namespace {

using elastic::Candidate;
using elastic::CloseQuery;
using elastic::decode;
using elastic::encode;
using elastic::may_close;
using elastic::plan_generation;
using std::chrono::milliseconds;

Candidate cand(std::string id, int64_t last, int hint, std::vector<uint64_t> commits = {}) {
  Candidate c;
  c.id = std::move(id);
  c.last_generation = last;
  c.hint = hint;
  c.commits = std::move(commits);
  return c;
}

TEST(ElasticSlot, RoundTripsAndRefusesAnythingElse) {
  for (const auto& c : {cand("h/1/ab", -1, 2), cand("h/2/cd", 7, 0, {40, 35}),
                        cand("x", 0, INT_MAX, {0})}) {
    auto d = decode(encode(c));
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->id, c.id);
    EXPECT_EQ(d->last_generation, c.last_generation);
    EXPECT_EQ(d->hint, c.hint);
    EXPECT_EQ(d->commits, c.commits);
  }
  const std::string good = encode(cand("h/1", 3, 1, {5}));
  for (std::string bad : {std::string(), std::string("gwe1"), good.substr(0, good.size() - 1) + "x",
                          std::string("gwe2") + good.substr(4), good + "\x1f" + "extra"}) {
    EXPECT_FALSE(decode(bad).has_value()) << bad;
  }
  EXPECT_FALSE(decode(encode(cand("h", -2, 0))).has_value());
}

TEST(ElasticPlan, FirstGenerationOrdersByTheLaunchersRank) {
  // Slots in arrival order; nobody has been a member yet.
  auto p = plan_generation({cand("c", -1, 2), cand("a", -1, 0), cand("b", -1, 1)});
  EXPECT_EQ(p.order, (std::vector<int>{1, 2, 0}));
  EXPECT_EQ(p.continuing, 0);
  EXPECT_FALSE(p.restored);
}

TEST(ElasticPlan, SurvivorsKeepTheirOrderAndJoinersComeLast) {
  // Generation 4 had ranks 0, 1, 2; rank 1 was lost; a joiner arrived first.
  auto p = plan_generation({cand("j", -1, 1), cand("r2", 4, 2, {30, 25}),
                            cand("r0", 4, 0, {30, 25})});
  EXPECT_EQ(p.order, (std::vector<int>{2, 1, 0}));
  EXPECT_EQ(p.continuing, 2);
  ASSERT_TRUE(p.restored);
  EXPECT_EQ(p.step, 30u);
  EXPECT_EQ(p.root, 0);
  EXPECT_EQ(p.keeps_local, (std::vector<bool>{true, true, false}));
}

TEST(ElasticPlan, SurvivorsOneCommitApartContinueFromTheOlder) {
  // Rank 0 finished step 30 and committed it; rank 2 failed inside it.
  auto p = plan_generation({cand("r0", 4, 0, {30, 25}), cand("r2", 4, 2, {25, 20})});
  ASSERT_TRUE(p.restored);
  EXPECT_EQ(p.step, 25u);
  EXPECT_EQ(p.root, 0);
  EXPECT_EQ(p.keeps_local, (std::vector<bool>{true, true}));
}

TEST(ElasticPlan, AMemberOfAnOlderGenerationJoinsAsANewcomer) {
  // "late" was left out of generation 5 (it learned of the failure late):
  // its state is from generation 4 and must not be offered.
  auto p = plan_generation({cand("late", 4, 0, {10}), cand("a", 5, 1, {50, 45}),
                            cand("b", 5, 0, {50, 45})});
  EXPECT_EQ(p.order, (std::vector<int>{2, 1, 0}));
  EXPECT_EQ(p.continuing, 2);
  EXPECT_EQ(p.step, 50u);
  EXPECT_EQ(p.keeps_local, (std::vector<bool>{true, true, false}));
}

TEST(ElasticPlan, NoCommitYetMeansAFreshStart) {
  auto p = plan_generation({cand("a", 0, 0, {}), cand("b", 0, 1, {0})});
  EXPECT_EQ(p.continuing, 2);
  EXPECT_FALSE(p.restored);
  EXPECT_EQ(p.root, -1);
}

TEST(ElasticClose, ExpectedCountOrASettledContinuingMember) {
  CloseQuery q;
  q.count = 3;
  q.expect = 3;
  EXPECT_TRUE(may_close(q));
  q.expect = 4;
  EXPECT_FALSE(may_close(q));  // not yet, and not continuing
  q.continuing = true;
  q.peers = 3;
  q.previous_size = 4;
  q.settle = milliseconds(2000);
  q.quiet = milliseconds(1999);
  EXPECT_FALSE(may_close(q));
  q.quiet = milliseconds(2000);
  EXPECT_TRUE(may_close(q));
  q.min_size = 4;
  EXPECT_FALSE(may_close(q));  // too few to continue: keep waiting (join_timeout)
}

TEST(ElasticClose, OnlyAMajorityOfTheLastGenerationClosesWithoutTheOthers) {
  // Rank 2 of 3 hung; the two others formed the next generation. When it
  // comes back it is alone: it must wait to join them, not train apart.
  CloseQuery q;
  q.count = 1;
  q.continuing = true;
  q.peers = 1;
  q.previous_size = 3;
  q.quiet = milliseconds(100000);
  EXPECT_FALSE(may_close(q));
  q.count = q.peers = 2;  // the two survivors: a majority of 3
  EXPECT_TRUE(may_close(q));
  q.previous_size = 4;  // half of 4 is not a majority
  EXPECT_FALSE(may_close(q));
  q.expect = 2;  // ... unless the other two were seen to exit
  EXPECT_TRUE(may_close(q));
  q = CloseQuery{};
  q.count = 2;
  q.quiet = milliseconds(100000);
  EXPECT_FALSE(may_close(q));  // joiners never close on their own
}


TEST(ElasticStore, SetIfAbsentHasExactlyOneWinner) {
  const std::string dir = ::testing::TempDir() + "gw_elastic_store_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::vector<std::shared_ptr<bootstrap::Store>> stores;
  stores.push_back(bootstrap::make_file_store(dir));
  stores.push_back(bootstrap::share_in_process_store(make_in_process_store()));
  for (auto& store : stores) {
    for (int round = 0; round < 20; ++round) {
      const std::string key = "race/" + std::to_string(round);
      std::atomic<int> winners{0};
      std::vector<std::thread> threads;
      for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
          if (store->set_if_absent(key, "thread " + std::to_string(t))) ++winners;
        });
      }
      for (auto& th : threads) th.join();
      EXPECT_EQ(winners.load(), 1) << store->describe();
      auto v = store->try_get(key);
      ASSERT_TRUE(v.has_value());
      EXPECT_EQ(v->rfind("thread ", 0), 0u);
    }
    // Through a prefix view, too.
    auto view = bootstrap::prefix_store(bootstrap::shared_store(store), "p/");
    EXPECT_TRUE(view->set_if_absent("k", "1"));
    EXPECT_FALSE(view->set_if_absent("k", "2"));
    EXPECT_EQ(store->try_get("p/k").value_or(""), "1");
  }
  std::filesystem::remove_all(dir);
}

TEST(ElasticGroup, RefusesAStoreThatDiesWithRankZero) {
  try {
    ElasticGroup::join({}, Rendezvous::tcp("127.0.0.1", 1, 0, 1));
    FAIL() << "a TCP store was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("outlives every member"), std::string::npos) << e.what();
    // ... and names the way across hosts: etcd.
    EXPECT_NE(std::string(e.what()).find("GRADWIRE_ETCD_ENDPOINTS"), std::string::npos) << e.what();
  }
}

// Three members form the first generation; a fourth process (thread) that
// arrives later is let in at the members' next commit and receives the
// committed state; every member leaves with the same bytes.
TEST(ElasticGroup, AJoinerComesInAtTheNextCommit) {
  auto store = make_in_process_store();
  Options o;
  o.timeout = std::chrono::seconds(30);
  ElasticOptions e;
  e.join_timeout = std::chrono::seconds(60);
  std::vector<std::string> shared(4), local(4);
  std::vector<int> sizes(4), ranks(4);
  std::vector<uint64_t> steps(4), generations(4);
  std::atomic<int> formed{0};
  std::vector<std::string> errors(4);
  auto member = [&](int who) {
    try {
      auto g = ElasticGroup::join(o, Rendezvous::in_process(store, who, 3), e);
      EXPECT_EQ(g->generation(), 0u);
      EXPECT_FALSE(g->state().restored);
      EXPECT_EQ(g->rank(), who);  // the launcher's rank is kept in the first generation
      ++formed;
      bool changed = false;
      for (uint64_t step = 1; !changed; ++step) {
        // A collective per step, as training would run.
        int x = 1;
        g->communicator().allreduce(&x, &x, 1, DataType::Int32, ReduceOp::Sum).wait();
        EXPECT_EQ(x, g->size());
        changed = g->commit(step, "model@" + std::to_string(step), "ef" + std::to_string(who));
        ASSERT_LT(step, 100000u) << "the joiner never came in";
      }
      shared[size_t(who)] = g->state().shared;
      local[size_t(who)] = g->state().local;
      steps[size_t(who)] = g->state().step;
      sizes[size_t(who)] = g->size();
      ranks[size_t(who)] = g->rank();
      generations[size_t(who)] = g->generation();
      g->communicator().barrier().wait();
    } catch (const std::exception& ex) {
      errors[size_t(who)] = ex.what();
    }
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) threads.emplace_back(member, r);
  while (formed.load() < 3) std::this_thread::sleep_for(milliseconds(5));
  threads.emplace_back([&] {
    try {
      auto g = ElasticGroup::join(o, Rendezvous::in_process(store, 0, 3), e);
      ASSERT_TRUE(g->state().restored);
      shared[3] = g->state().shared;
      local[3] = g->state().local;
      steps[3] = g->state().step;
      sizes[3] = g->size();
      ranks[3] = g->rank();
      generations[3] = g->generation();
      g->communicator().barrier().wait();
    } catch (const std::exception& ex) {
      errors[3] = ex.what();
    }
  });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(errors[size_t(r)], "") << "member " << r;
    EXPECT_EQ(sizes[size_t(r)], 4);
    EXPECT_EQ(generations[size_t(r)], 1u);
    EXPECT_EQ(shared[size_t(r)], "model@" + std::to_string(steps[0]));
    EXPECT_EQ(steps[size_t(r)], steps[0]);
  }
  EXPECT_EQ(ranks, (std::vector<int>{0, 1, 2, 3}));  // members keep their ranks, the joiner is last
  EXPECT_EQ(local, (std::vector<std::string>{"ef0", "ef1", "ef2", ""}));
}

}  // namespace
}  // namespace gradwire
