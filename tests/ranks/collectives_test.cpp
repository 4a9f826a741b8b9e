// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Every collective, every dtype and op, sizes from 0 to past the ring
// threshold (and not divisible by the world size), in place and out of
// place, against a serial reference every rank computes; and the results
// must be bitwise identical on every rank. Launched by ctest through
// mpirun -np N or gwlaunch -n N (see tests/ranks/CMakeLists.txt).
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "harness.h"

namespace gwtest {
namespace {

using gradwire::DataType;
using gradwire::ReduceOp;

const size_t kCounts[] = {0, 1, 2, 3, 5, 7, 64, 1000, 4099, 20000, 70001};

class Reduction : public ::testing::TestWithParam<std::tuple<DataType, ReduceOp>> {};

TEST_P(Reduction, Allreduce) {
  auto [dt, op] = GetParam();
  if (!valid_reduction(dt, op)) GTEST_SKIP() << "avg of bool is refused (types.h)";
  auto& w = world();
  const size_t es = gradwire::element_size(dt);
  for (size_t count : kCounts) {
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "count " << count << (in_place ? " in place" : ""));
      const uint64_t seed = seed_of(dt, op, count, 1);
      auto input = make_input(dt, op, count, w.rank(), seed);
      auto ref = reduce_reference(dt, op, count, w.size(), seed);
      std::vector<std::byte> out(count * es, std::byte{0x5a});
      if (in_place) {
        out = input;
        w.allreduce(out.data(), out.data(), count, dt, op).wait();
      } else {
        const auto before = input;
        w.allreduce(input.data(), out.data(), count, dt, op).wait();
        EXPECT_EQ(before, input) << "out-of-place allreduce modified its send buffer";
      }
      EXPECT_TRUE(matches(dt, out.data(), ref, 0, count));
      EXPECT_TRUE(identical_on_all_ranks(w, out.data(), out.size()));
    }
  }
}

TEST_P(Reduction, ReduceScatter) {
  auto [dt, op] = GetParam();
  if (!valid_reduction(dt, op)) GTEST_SKIP() << "avg of bool is refused (types.h)";
  auto& w = world();
  const size_t es = gradwire::element_size(dt);
  for (size_t count : kCounts) {
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "count " << count << (in_place ? " in place" : ""));
      const uint64_t seed = seed_of(dt, op, count, 2);
      auto input = make_input(dt, op, count, w.rank(), seed);
      auto ref = reduce_reference(dt, op, count, w.size(), seed);
      const size_t off = gradwire::shard_offset(count, w.size(), w.rank());
      const size_t n = gradwire::shard_count(count, w.size(), w.rank());
      std::vector<std::byte> out(n * es, std::byte{0x5a});
      if (in_place) {
        w.reduce_scatter(input.data(), input.data() + off * es, count, dt, op).wait();
        EXPECT_TRUE(matches(dt, input.data() + off * es, ref, off, n));
      } else {
        const auto before = input;
        w.reduce_scatter(input.data(), out.data(), count, dt, op).wait();
        EXPECT_EQ(before, input) << "out-of-place reduce_scatter modified its send buffer";
        EXPECT_TRUE(matches(dt, out.data(), ref, off, n));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, Reduction,
                         ::testing::Combine(::testing::ValuesIn(gradwire::kAllDataTypes),
                                            ::testing::ValuesIn(gradwire::kAllReduceOps)),
                         case_name);

class Movement : public ::testing::TestWithParam<DataType> {};

TEST_P(Movement, Allgather) {
  const DataType dt = GetParam();
  auto& w = world();
  const size_t es = gradwire::element_size(dt);
  for (size_t count : kCounts) {
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "count " << count << (in_place ? " in place" : ""));
      const uint64_t seed = seed_of(dt, ReduceOp::Sum, count, 3);
      // Rank r contributes its shard of its own random buffer.
      const std::vector<std::byte> expect = expected_allgather(dt, count, w.size(), seed);
      const size_t off = gradwire::shard_offset(count, w.size(), w.rank()) * es;
      const size_t len = gradwire::shard_count(count, w.size(), w.rank()) * es;
      std::vector<std::byte> out(count * es, std::byte{0x5a});
      if (in_place) {
        if (len > 0) std::memcpy(out.data() + off, expect.data() + off, len);
        w.allgather(out.data() + off, out.data(), count, dt).wait();
      } else {
        std::vector<std::byte> mine(expect.begin() + off, expect.begin() + off + len);
        w.allgather(mine.data(), out.data(), count, dt).wait();
      }
      EXPECT_TRUE(out == expect) << "allgather result differs from the concatenated shards";
    }
  }
}

TEST_P(Movement, Broadcast) {
  const DataType dt = GetParam();
  auto& w = world();
  const size_t es = gradwire::element_size(dt);
  for (size_t count : {size_t(0), size_t(1), size_t(3), size_t(1000), size_t(200003)}) {
    for (int root = 0; root < w.size(); ++root) {
      for (bool in_place : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "count " << count << " root " << root
                                          << (in_place ? " in place" : ""));
        auto data = make_input(dt, ReduceOp::Sum, count, root, seed_of(dt, ReduceOp::Sum, count, 4));
        std::vector<std::byte> out(count * es, std::byte{0x5a});
        if (w.rank() == root && in_place) out = data;
        const void* send = w.rank() == root ? (in_place ? out.data() : data.data()) : nullptr;
        w.broadcast(send, out.data(), count, dt, root).wait();
        EXPECT_TRUE(out == data) << "broadcast result differs from the root's buffer";
      }
    }
  }
}

TEST_P(Movement, Alltoall) {
  const DataType dt = GetParam();
  auto& w = world();
  const int n = w.size();
  const size_t es = gradwire::element_size(dt);
  for (size_t per : {size_t(0), size_t(1), size_t(3), size_t(1000), size_t(40001)}) {
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "per rank " << per << (in_place ? " in place" : ""));
      const uint64_t seed = seed_of(dt, ReduceOp::Sum, per, 5);
      auto send = make_input(dt, ReduceOp::Sum, per * n, w.rank(), seed);
      std::vector<std::byte> expect(per * n * es);
      for (int r = 0; r < n; ++r) {
        auto theirs = make_input(dt, ReduceOp::Sum, per * n, r, seed);
        if (per > 0) std::memcpy(expect.data() + r * per * es, theirs.data() + w.rank() * per * es, per * es);
      }
      std::vector<std::byte> out(per * n * es, std::byte{0x5a});
      if (in_place) {
        out = send;
        w.alltoall(out.data(), out.data(), per, dt).wait();
      } else {
        w.alltoall(send.data(), out.data(), per, dt).wait();
      }
      EXPECT_TRUE(out == expect) << "alltoall result differs";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, Movement, ::testing::ValuesIn(gradwire::kAllDataTypes),
                         [](const auto& info) { return std::string(gradwire::to_string(info.param)); });

// GW_TEST_EXPECT_HOSTS=H (set by the emulated-host tests): the world spans
// H hosts and large allreduces run hierarchically.
TEST(Collectives, HierarchyMatchesTheLaunch) {
  const char* v = std::getenv("GW_TEST_EXPECT_HOSTS");
  if (!v) GTEST_SKIP() << "not an emulated-host launch";
  auto& w = world();
  EXPECT_EQ(w.host_count(), std::atoi(v));
  EXPECT_TRUE(w.hierarchical());
  // GW_TEST_EXPECT_PROVIDER: the world's provider across the hosts
  // (Note [the provider across hosts] in src/runtime/setup.cpp).
  if (const char* p = std::getenv("GW_TEST_EXPECT_PROVIDER")) EXPECT_EQ(w.provider(), p);
}

TEST(Collectives, LargeAllreduceFloat32) {
  auto& w = world();
  const size_t count = (size_t(1) << 22) + 3;  // 16 MiB + 12 B
  const uint64_t seed = 77;
  auto input = make_input(DataType::Float32, ReduceOp::Sum, count, w.rank(), seed);
  auto ref = reduce_reference(DataType::Float32, ReduceOp::Sum, count, w.size(), seed);
  std::vector<std::byte> out(count * 4);
  w.allreduce(input.data(), out.data(), count, DataType::Float32, ReduceOp::Sum).wait();
  EXPECT_TRUE(matches(DataType::Float32, out.data(), ref, 0, count));
  EXPECT_TRUE(identical_on_all_ranks(w, out.data(), out.size()));
}

// Note [the copy path] in src/shm/copy_path.cpp: ordinary buffers
// of a few MiB cross several copy rounds (the staging half is 1 MiB per
// rank), at every dtype, with a count not divisible by the world size, in
// place and out of place. Skipped where shm collectives are off (the tcp
// launches): there these sizes would only repeat, at 30 s a launch, what
// LargeAllreduceFloat32 and the 70001-element cases test of the transport.
class CopyRounds : public ::testing::TestWithParam<DataType> {};

TEST_P(CopyRounds, AllreduceReduceScatterAllgather) {
  const char* shm = std::getenv("GRADWIRE_SHM_COLLECTIVES");
  if (shm && std::string(shm) == "off") GTEST_SKIP() << "GRADWIRE_SHM_COLLECTIVES=off";
  const DataType dt = GetParam();
  auto& w = world();
  const size_t es = gradwire::element_size(dt);
  const size_t count = (size_t(5) << 19) / es + 3;  // 2.5 MiB and a bit
  const size_t off = gradwire::shard_offset(count, w.size(), w.rank());
  const size_t n = gradwire::shard_count(count, w.size(), w.rank());
  // Ops other than sum share the fold (ReduceOp is only the kernel's):
  // the 70001-element cases above take every op through the copy path.
  for (ReduceOp op : {ReduceOp::Sum}) {
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(::testing::Message() << gradwire::to_string(op) << (in_place ? " in place" : ""));
      const uint64_t seed = seed_of(dt, op, count, 11);
      auto input = make_input(dt, op, count, w.rank(), seed);
      const auto ref = reduce_reference(dt, op, count, w.size(), seed);
      std::vector<std::byte> out(count * es, std::byte{0x5a});
      if (in_place) {
        out = input;
        w.allreduce(out.data(), out.data(), count, dt, op).wait();
      } else {
        w.allreduce(input.data(), out.data(), count, dt, op).wait();
      }
      EXPECT_TRUE(matches(dt, out.data(), ref, 0, count)) << "allreduce";
      EXPECT_TRUE(identical_on_all_ranks(w, out.data(), out.size()));
      std::vector<std::byte> shard(n * es, std::byte{0x5a});
      if (in_place) {
        w.reduce_scatter(input.data(), input.data() + off * es, count, dt, op).wait();
        EXPECT_TRUE(matches(dt, input.data() + off * es, ref, off, n)) << "reduce_scatter";
      } else {
        const auto before = input;
        w.reduce_scatter(input.data(), shard.data(), count, dt, op).wait();
        EXPECT_EQ(before, input) << "out-of-place reduce_scatter modified its send buffer";
        EXPECT_TRUE(matches(dt, shard.data(), ref, off, n)) << "reduce_scatter";
      }
    }
  }
  const uint64_t seed = seed_of(dt, ReduceOp::Sum, count, 12);
  const std::vector<std::byte> expect = expected_allgather(dt, count, w.size(), seed);
  for (bool in_place : {false, true}) {
    std::vector<std::byte> out(count * es, std::byte{0x5a});
    if (in_place) {
      std::memcpy(out.data() + off * es, expect.data() + off * es, n * es);
      w.allgather(out.data() + off * es, out.data(), count, dt).wait();
    } else {
      std::vector<std::byte> mine(expect.begin() + off * es, expect.begin() + (off + n) * es);
      w.allgather(mine.data(), out.data(), count, dt).wait();
    }
    EXPECT_TRUE(out == expect) << "allgather" << (in_place ? " in place" : "");
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, CopyRounds, ::testing::ValuesIn(gradwire::kAllDataTypes),
                         [](const auto& info) { return std::string(gradwire::to_string(info.param)); });

// Note [the copy path]: staging halves alternate across collectives, so
// collectives with odd and even round counts, small ones (their own slots)
// and a transport broadcast in between, queued several at a time, with a
// rank that is late at random: every result exact on every iteration.
TEST(Collectives, CopyRoundsAcrossCollectives) {
  auto& w = world();
  const int n = w.size();
  std::mt19937 rng(1234u + unsigned(w.rank()));
  const size_t big = (size_t(3) << 20) / 8 + 5;     // int64: ~3 MiB, several rounds
  const size_t mid = (size_t(300) << 10) / 4 + 1;   // int32: one round
  std::vector<int64_t> a(big), a_out(big);
  std::vector<int32_t> b(mid), rs_out(gradwire::shard_count(mid, n, w.rank()));
  std::vector<int32_t> ag_out(mid);
  std::vector<float> bc(size_t(1) << 17);
  std::vector<int64_t> tiny(3), tiny_out(3);
  const size_t b_off = gradwire::shard_offset(mid, n, w.rank());
  for (int it = 0; it < 30; ++it) {
    for (size_t i = 0; i < big; ++i) a[i] = int64_t(i % 1000) * (w.rank() + 1) + it;
    for (size_t i = 0; i < mid; ++i) b[i] = int32_t(i % 777) + w.rank() * 3 + it;
    std::fill(tiny.begin(), tiny.end(), int64_t(w.rank() + it));
    const int root = it % n;
    if (w.rank() == root) std::fill(bc.begin(), bc.end(), float(it));
    if (rng() % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
    std::vector<gradwire::Work> works;
    works.push_back(w.allreduce(a.data(), a_out.data(), big, DataType::Int64, ReduceOp::Sum));
    works.push_back(w.allreduce(tiny.data(), tiny_out.data(), 3, DataType::Int64, ReduceOp::Sum));
    works.push_back(
        w.reduce_scatter(b.data(), rs_out.data(), mid, DataType::Int32, ReduceOp::Sum));
    works.push_back(w.broadcast(bc.data(), bc.data(), bc.size(), DataType::Float32, root));
    works.push_back(w.allgather(b.data() + b_off, ag_out.data(), mid, DataType::Int32));
    for (auto& x : works) x.wait();
    const int64_t ranks_sum = int64_t(n) * (n + 1) / 2;
    for (size_t i = 0; i < big; ++i) {
      ASSERT_EQ(a_out[i], int64_t(i % 1000) * ranks_sum + int64_t(n) * it) << it << " at " << i;
    }
    ASSERT_EQ(tiny_out[0], int64_t(n) * (n - 1) / 2 + int64_t(n) * it);
    for (size_t i = 0; i < rs_out.size(); ++i) {
      const size_t at = b_off + i;
      ASSERT_EQ(rs_out[i], int32_t(at % 777) * n + 3 * n * (n - 1) / 2 + n * it) << it;
    }
    for (int p = 0; p < n; ++p) {
      const size_t o = gradwire::shard_offset(mid, n, p), c = gradwire::shard_count(mid, n, p);
      for (size_t i = 0; i < c; ++i) {
        ASSERT_EQ(ag_out[o + i], int32_t((o + i) % 777) + p * 3 + it) << it << " from " << p;
      }
    }
    ASSERT_EQ(bc.front(), float(it));
    ASSERT_EQ(bc.back(), float(it));
  }
}

TEST(Collectives, BarrierWaitsForTheSlowestRank) {
  auto& w = world();
  if (w.size() == 1) GTEST_SKIP() << "needs two ranks";
  for (int i = 0; i < 5; ++i) w.barrier().wait();
  const auto start = std::chrono::steady_clock::now();
  if (w.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  w.barrier().wait();
  const auto waited = std::chrono::steady_clock::now() - start;
  // A barrier cannot finish before its last rank arrived.
  EXPECT_GE(waited, std::chrono::milliseconds(250));
}

// Note [slot reuse] in shm/small.cpp: small collectives through the
// shared slots, interleaved with transport collectives that do not need
// every rank to finish (a large broadcast from a rotating root), submitted
// before and after them: every result exact, on every iteration.
TEST(Collectives, SmallCollectivesInterleavedWithTransportBroadcasts) {
  auto& w = world();
  const int n = w.size();
  std::vector<float> big(size_t(1) << 18);  // 1 MiB: through the transport
  for (int it = 0; it < 200; ++it) {
    const int root = it % n;
    if (w.rank() == root) std::fill(big.begin(), big.end(), float(it));
    std::vector<int64_t> mine(17, int64_t(w.rank() + it)), sum(17, -1);
    std::vector<int32_t> shard(5, w.rank() * 1000 + it), all(5 * size_t(n), -1);
    auto bcast = [&] { return w.broadcast(big.data(), big.data(), big.size(), DataType::Float32, root); };
    auto reduce = [&] {
      return w.allreduce(mine.data(), sum.data(), mine.size(), DataType::Int64, ReduceOp::Sum);
    };
    auto gather = [&] { return w.allgather(shard.data(), all.data(), all.size(), DataType::Int32); };
    std::vector<gradwire::Work> works;
    if (it % 2) {
      works = {bcast(), reduce(), gather()};
    } else {
      works = {reduce(), gather(), bcast()};
    }
    for (auto& x : works) x.wait();
    ASSERT_EQ(big.front(), float(it));
    ASSERT_EQ(big.back(), float(it));
    for (int64_t v : sum) ASSERT_EQ(v, int64_t(n) * (n - 1) / 2 + int64_t(n) * it) << it;
    for (int p = 0; p < n; ++p) {
      for (int k = 0; k < 5; ++k) ASSERT_EQ(all[size_t(p) * 5 + size_t(k)], p * 1000 + it) << it;
    }
  }
}

// Note [inline small collectives] in runtime/engine.h: a small collective
// may run on the caller's thread, but a call never waits for a late peer:
// it returns a pending Work within its spin budget (tens of microseconds).
TEST(Collectives, ASmallCollectiveDoesNotBlockItsCallerOnALatePeer) {
  auto& w = world();
  if (w.size() == 1) GTEST_SKIP() << "needs two ranks";
  // Note [the spin budget]: an explicit budget is how long the caller may
  // spin before handing off; past 100 ms this test's bound says nothing.
  if (const auto& budget = w.options().collectives.spin_budget;
      budget && *budget > std::chrono::milliseconds(100)) {
    GTEST_SKIP() << "GRADWIRE_SPIN_US holds the caller up to " << budget->count() << " us";
  }
  w.barrier().wait();
  int64_t x = w.rank(), y = 0;
  if (w.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const auto start = std::chrono::steady_clock::now();
  auto work = w.allreduce(&x, &y, 1, DataType::Int64, ReduceOp::Sum);
  const auto call = std::chrono::steady_clock::now() - start;
  work.wait();
  EXPECT_EQ(y, int64_t(w.size()) * (w.size() - 1) / 2);
  if (w.rank() == 0) {
    EXPECT_LT(call, std::chrono::milliseconds(200)) << "the call waited for the late rank";
  }
}

TEST(Collectives, ManyInFlightCompleteInOrder) {
  auto& w = world();
  constexpr int kOps = 48;
  std::vector<std::vector<int64_t>> bufs(kOps);
  std::vector<gradwire::Work> works;
  std::vector<int> order;
  std::mutex mu;
  for (int i = 0; i < kOps; ++i) {
    bufs[i].assign(size_t(i * 37 + 1), int64_t(w.rank() + i));
    works.push_back(w.allreduce(bufs[i].data(), bufs[i].data(), bufs[i].size(),
                                DataType::Int64, ReduceOp::Sum));
    works.back().then([&, i](std::exception_ptr e) {
      std::lock_guard<std::mutex> lk(mu);
      order.push_back(e ? -1 : i);
    });
  }
  for (int i = kOps - 1; i >= 0; --i) works[i].wait();
  const int64_t n = w.size();
  for (int i = 0; i < kOps; ++i) {
    const int64_t expect = n * (n - 1) / 2 + n * i;
    EXPECT_EQ(bufs[i].front(), expect);
    EXPECT_EQ(bufs[i].back(), expect);
    EXPECT_TRUE(works[i].test());
  }
  std::lock_guard<std::mutex> lk(mu);
  ASSERT_EQ(order.size(), size_t(kOps));
  for (int i = 0; i < kOps; ++i) EXPECT_EQ(order[i], i) << "collectives completed out of order";
}

TEST(Collectives, SplitIntoGroups) {
  auto& w = world();
  const int n = w.size();
  std::vector<int> evens, reversed;
  for (int r = 0; r < n; r += 2) evens.push_back(r);
  for (int r = n - 1; r >= 0; --r) reversed.push_back(r);
  auto g_even = w.split(evens);
  auto g_rev = w.split(reversed);
  EXPECT_EQ(g_even != nullptr, w.rank() % 2 == 0);
  ASSERT_NE(g_rev, nullptr);
  EXPECT_EQ(g_rev->rank(), n - 1 - w.rank());
  EXPECT_EQ(g_rev->size(), n);

  // Interleave collectives on three communicators from two threads: their
  // messages must never mix.
  std::atomic<int> failures{0};
  std::thread t([&] {
    for (int i = 0; i < 20; ++i) {
      int64_t v = g_rev->rank() + 1, out = 0;
      g_rev->allreduce(&v, &out, 1, DataType::Int64, ReduceOp::Max).wait();
      if (out != n) ++failures;
    }
  });
  for (int i = 0; i < 20; ++i) {
    int64_t v = 1, out = 0;
    w.allreduce(&v, &out, 1, DataType::Int64, ReduceOp::Sum).wait();
    if (out != n) ++failures;
    if (g_even) {
      int64_t mine = w.rank(), sum = 0;
      g_even->allreduce(&mine, &sum, 1, DataType::Int64, ReduceOp::Sum).wait();
      int64_t expect = 0;
      for (int r : evens) expect += r;
      if (sum != expect) ++failures;
    }
  }
  t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(Collectives, SplitWithDifferentListsIsAMismatch) {
  auto& w = world();
  if (w.size() == 1) GTEST_SKIP() << "needs two ranks";
  std::vector<int> list = {0, 1};
  if (w.rank() == 1) list = {1, 0};
  try {
    w.split(list);
    ADD_FAILURE() << "split with different lists succeeded";
  } catch (const gradwire::Error& e) {
    EXPECT_EQ(e.code(), gradwire::ErrorCode::Mismatch) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank(s) 1"), std::string::npos) << e.what();
  }
}

TEST(Collectives, BadArgumentsFailAtOnceOnTheCaller) {
  auto& w = world();
  float buf[8] = {};
  auto expect_invalid = [](auto&& fn, const char* needle) {
    expect_error(fn, gradwire::ErrorCode::InvalidArgument, needle);
  };
  expect_invalid([&] { w.allreduce(nullptr, buf, 8, DataType::Float32, ReduceOp::Sum); }, "null send");
  expect_invalid([&] { w.broadcast(buf, buf, 8, DataType::Float32, w.size()); }, "root");
  expect_invalid([&] { w.allreduce(buf, buf + 1, 4, DataType::Float32, ReduceOp::Sum); }, "overlap");
  // count x element size (x ranks, for allgather's output) past 2^64.
  expect_invalid([&] { w.allreduce(buf, buf, SIZE_MAX / 2, DataType::Float32, ReduceOp::Sum); },
                 "overflows the address space");
  if (w.size() > 1) {  // only the product with the world size overflows
    const size_t count = SIZE_MAX / (4 * size_t(w.size())) + 1;
    expect_invalid([&] { w.allreduce(buf, buf, count, DataType::Float32, ReduceOp::Sum); },
                   "overflows the address space");
  }
  // Enum values from casts (issue 17, item 6): refused at the call, naming
  // the rank and the collective, without aborting the communicator.
  const std::string me = "rank " + std::to_string(w.rank()) + ": ";
  expect_invalid([&] { w.allreduce(buf, buf, 8, DataType::Float32, static_cast<ReduceOp>(99)); },
                 (me + "allreduce got ReduceOp(99)").c_str());
  expect_invalid([&] { w.reduce_scatter(buf, buf, 8, DataType::Float32, static_cast<ReduceOp>(5)); },
                 (me + "reduce_scatter got ReduceOp(5)").c_str());
  expect_invalid([&] { w.allgather(buf, buf, 1, static_cast<DataType>(99)); },
                 (me + "allgather got DataType(99)").c_str());
  // The failed submissions consumed no sequence number: this still works.
  int64_t one = 1, total = 0;
  w.allreduce(&one, &total, 1, DataType::Int64, ReduceOp::Sum).wait();
  EXPECT_EQ(total, w.size());
}

}  // namespace
}  // namespace gwtest

int main(int argc, char** argv) { return gwtest::run_rank_tests(argc, argv); }
