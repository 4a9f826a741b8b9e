// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The direct path between buffers from Communicator::allocate_shared()
// (Note [the direct path] in src/shm/direct.cpp): every dtype and
// op, sizes 0 to past the ring threshold (not divisible by the world size),
// in place and out of place, against the serial reference, bitwise
// identical on every rank; buffers that do not qualify on every rank fall
// back to the transport with the same results; ranks that disagree get a
// Mismatch, not a hang. Launched by ctest through gwlaunch or mpirun.
#include "harness.h"

namespace gwtest {
namespace {

using gradwire::DataType;
using gradwire::ReduceOp;
using gradwire::SharedBuffer;

const size_t kCounts[] = {0, 1, 3, 7, 1000, 4099, 70001};

// allocate_shared is collective: every rank allocates the same sequence.
SharedBuffer shared_copy(const std::vector<std::byte>& bytes, size_t min_bytes = 0) {
  SharedBuffer b = world().allocate_shared(std::max(bytes.size(), min_bytes));
  if (!bytes.empty()) std::memcpy(b.data(), bytes.data(), bytes.size());
  return b;
}

TEST(Direct, AllocationIsDirectExactlyWhenThereArePeers) {
  auto& w = world();
  SharedBuffer b = w.allocate_shared(4096);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(b.size(), 4096u);
  // Every rank of these tests runs on this host with /dev/shm.
  EXPECT_EQ(b.direct(), w.size() > 1);
  for (size_t i = 0; i < 4096; ++i) ASSERT_EQ(b.as<unsigned char>()[i], 0) << "not zeroed at " << i;
  SharedBuffer empty = w.allocate_shared(0);
  EXPECT_NE(empty.data(), nullptr);
  EXPECT_EQ(empty.size(), 0u);
}

class DirectReduction : public ::testing::TestWithParam<std::tuple<DataType, ReduceOp>> {};

TEST_P(DirectReduction, Allreduce) {
  auto [dt, op] = GetParam();
  if (!valid_reduction(dt, op)) GTEST_SKIP() << "avg of bool is refused (types.h)";
  auto& w = world();
  const size_t es = gradwire::element_size(dt);
  for (size_t count : kCounts) {
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "count " << count << (in_place ? " in place" : ""));
      const uint64_t seed = seed_of(dt, op, count, 11);
      const auto input = make_input(dt, op, count, w.rank(), seed);
      const auto ref = reduce_reference(dt, op, count, w.size(), seed);
      SharedBuffer send = shared_copy(input);
      SharedBuffer recv = in_place ? SharedBuffer() : w.allocate_shared(count * es);
      std::byte* out = in_place ? send.as<std::byte>() : recv.as<std::byte>();
      w.allreduce(send.data(), out, count, dt, op).wait();
      if (!in_place && count > 0) {
        EXPECT_EQ(0, std::memcmp(send.data(), input.data(), input.size()))
            << "out-of-place allreduce modified its send buffer";
      }
      EXPECT_TRUE(matches(dt, out, ref, 0, count));
      EXPECT_TRUE(identical_on_all_ranks(w, out, count * es));
    }
  }
}

TEST_P(DirectReduction, ReduceScatter) {
  auto [dt, op] = GetParam();
  if (!valid_reduction(dt, op)) GTEST_SKIP() << "avg of bool is refused (types.h)";
  auto& w = world();
  const size_t es = gradwire::element_size(dt);
  for (size_t count : kCounts) {
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "count " << count << (in_place ? " in place" : ""));
      const uint64_t seed = seed_of(dt, op, count, 12);
      const auto input = make_input(dt, op, count, w.rank(), seed);
      const auto ref = reduce_reference(dt, op, count, w.size(), seed);
      const size_t off = gradwire::shard_offset(count, w.size(), w.rank());
      const size_t n = gradwire::shard_count(count, w.size(), w.rank());
      SharedBuffer send = shared_copy(input);
      // The receive buffer of reduce_scatter need not be shared: private here.
      std::vector<std::byte> out(n * es, std::byte{0x5a});
      std::byte* dst = in_place ? send.as<std::byte>() + off * es : out.data();
      w.reduce_scatter(send.data(), dst, count, dt, op).wait();
      EXPECT_TRUE(matches(dt, dst, ref, off, n));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, DirectReduction,
                         ::testing::Combine(::testing::ValuesIn(gradwire::kAllDataTypes),
                                            ::testing::ValuesIn(gradwire::kAllReduceOps)),
                         case_name);

class DirectMovement : public ::testing::TestWithParam<DataType> {};

TEST_P(DirectMovement, Allgather) {
  const DataType dt = GetParam();
  auto& w = world();
  const size_t es = gradwire::element_size(dt);
  for (size_t count : kCounts) {
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "count " << count << (in_place ? " in place" : ""));
      const uint64_t seed = seed_of(dt, ReduceOp::Sum, count, 13);
      // Rank r contributes its shard of its own random buffer.
      const std::vector<std::byte> expect = expected_allgather(dt, count, w.size(), seed);
      const size_t off = gradwire::shard_offset(count, w.size(), w.rank()) * es;
      const size_t len = gradwire::shard_count(count, w.size(), w.rank()) * es;
      if (in_place) {
        SharedBuffer all = w.allocate_shared(count * es);
        if (len > 0) std::memcpy(all.as<std::byte>() + off, expect.data() + off, len);
        w.allgather(all.as<std::byte>() + off, all.data(), count, dt).wait();
        EXPECT_EQ(0, count ? std::memcmp(all.data(), expect.data(), count * es) : 0);
      } else {
        SharedBuffer mine = shared_copy({expect.begin() + off, expect.begin() + off + len});
        std::vector<std::byte> out(count * es, std::byte{0x5a});
        w.allgather(mine.data(), out.data(), count, dt).wait();
        EXPECT_TRUE(out == expect) << "allgather result differs from the concatenated shards";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DirectMovement, ::testing::ValuesIn(gradwire::kAllDataTypes),
                         [](const auto& info) { return std::string(gradwire::to_string(info.param)); });

// Buffers that do not qualify on every rank: the ranks agree through the
// handshake and all take the transport, with correct results.
TEST(Direct, RanksWithoutSharedBuffersFallBackTogether) {
  auto& w = world();
  const size_t count = 5003;
  const DataType dt = DataType::Int64;
  const uint64_t seed = 99;
  const auto input = make_input(dt, ReduceOp::Sum, count, w.rank(), seed);
  const auto ref = reduce_reference(dt, ReduceOp::Sum, count, w.size(), seed);
  SharedBuffer shared = shared_copy(input);
  std::vector<std::byte> priv = input;
  // Rank 0 passes private memory, the others shared memory.
  std::byte* mine = w.rank() == 0 ? priv.data() : shared.as<std::byte>();
  w.allreduce(mine, mine, count, dt, ReduceOp::Sum).wait();
  EXPECT_TRUE(matches(dt, mine, ref, 0, count));
  // Shared send, private receive: allreduce needs both shared, so it falls back.
  std::vector<std::byte> out(count * 8);
  SharedBuffer again = shared_copy(input);
  w.allreduce(again.data(), out.data(), count, dt, ReduceOp::Sum).wait();
  EXPECT_TRUE(matches(dt, out.data(), ref, 0, count));
  // Every rank private: still a handshake, then the transport.
  std::vector<std::byte> all_private = input;
  w.allreduce(all_private.data(), all_private.data(), count, dt, ReduceOp::Sum).wait();
  EXPECT_TRUE(matches(dt, all_private.data(), ref, 0, count));
}

// Windows freed on some ranks only: the ranks still using theirs pass
// buffers in different windows and fall back; nothing reads freed memory.
TEST(Direct, DifferentWindowsOnDifferentRanksFallBack) {
  auto& w = world();
  const size_t count = 777;
  const auto input = make_input(DataType::Float32, ReduceOp::Sum, count, w.rank(), 5);
  const auto ref = reduce_reference(DataType::Float32, ReduceOp::Sum, count, w.size(), 5);
  SharedBuffer a = shared_copy(input);
  SharedBuffer b = shared_copy(input);
  SharedBuffer& mine = w.rank() % 2 == 0 ? a : b;
  if (w.rank() % 2 == 0) b = SharedBuffer(); else a = SharedBuffer();
  w.allreduce(mine.data(), mine.data(), count, DataType::Float32, ReduceOp::Sum).wait();
  EXPECT_TRUE(matches(DataType::Float32, mine.as<std::byte>(), ref, 0, count));
}

TEST(Direct, ManyInFlightCompleteInOrder) {
  auto& w = world();
  constexpr int kOps = 64;
  SharedBuffer buf = w.allocate_shared(kOps * 1024 * sizeof(int32_t));
  auto* v = buf.as<int32_t>();
  for (int i = 0; i < kOps * 1024; ++i) v[i] = i + w.rank();
  std::vector<gradwire::Work> works;
  for (int k = 0; k < kOps; ++k) {
    works.push_back(w.allreduce(v + k * 1024, v + k * 1024, 1024, DataType::Int32, ReduceOp::Sum));
  }
  for (auto& x : works) x.wait();
  const int n = w.size();
  for (int i = 0; i < kOps * 1024; ++i) ASSERT_EQ(v[i], n * i + n * (n - 1) / 2) << "at " << i;
}

// Run alone (ctest entry direct.mismatch): the Mismatch aborts the world.
TEST(DirectFaults, DifferentCountsAreAMismatchOnEveryRank) {
  auto& w = world();
  if (w.size() == 1) GTEST_SKIP() << "needs two ranks";
  SharedBuffer buf = w.allocate_shared(4096);
  const size_t count = w.rank() == 1 ? 100 : 64;
  expect_error([&] { w.allreduce(buf.data(), buf.data(), count, DataType::Float32,
                                 ReduceOp::Sum).wait(); },
               gradwire::ErrorCode::Mismatch, "ranks called different collectives");
}

}  // namespace
}  // namespace gwtest

int main(int argc, char** argv) { return gwtest::run_rank_tests(argc, argv); }
