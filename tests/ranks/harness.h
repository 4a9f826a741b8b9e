// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Shared pieces of the multi-rank tests: the world communicator (created
// once in main from whatever launched us: mpirun or gwlaunch), reproducible
// per-rank random inputs, and the serial reference every rank computes.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gradwire/gradwire.h"
#include "kernels/reduce_math.h"

namespace gwtest {

// The gtest main of a multi-rank test binary: creates the world from the
// launcher's environment (failing clearly if it cannot), lets only rank 0
// narrate (the others print failures only), runs every test, tears down.
int run_rank_tests(int argc, char** argv);

gradwire::Communicator& world();
void reset_world();

// Bytes of `count` elements of `dtype` that rank `rank` contributes to test
// case `seed`. Every rank can compute every other rank's input.
std::vector<std::byte> make_input(gradwire::DataType dtype, gradwire::ReduceOp op, size_t count,
                                  int rank, uint64_t seed);
// The reduction over ranks 0..world-1 of make_input(...) in double (floats)
// or exact modular arithmetic (integers), converted to dtype's bytes, plus
// the tolerance per element (0 for exact results).
struct Reference {
  std::vector<std::byte> bytes;
  std::vector<double> values;     // as double
  std::vector<double> tolerance;  // absolute, per element
};
Reference reduce_reference(gradwire::DataType dtype, gradwire::ReduceOp op, size_t count,
                           int world, uint64_t seed);
double element_as_double(gradwire::DataType dtype, const std::byte* p, size_t i);

// Compares `got` (count elements) with the reference elements
// [first, first+count): integers exactly, floats within tolerance.
::testing::AssertionResult matches(gradwire::DataType dtype, const std::byte* got,
                                   const Reference& ref, size_t first, size_t count);

// Expects `fn` to throw a gradwire::Error with `code` whose message
// contains `needle`.
template <typename Fn>
void expect_error(Fn&& fn, gradwire::ErrorCode code, const char* needle) {
  try {
    fn();
    ADD_FAILURE() << "expected " << gradwire::to_string(code) << " containing '" << needle << "'";
  } catch (const gradwire::Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// memcmp that allows empty ranges: an empty vector's data() may be null, and
// memcmp(null, ..., 0) is undefined behaviour (UBSan stops the test on it).
inline bool same_bytes(const void* a, const void* b, size_t n) {
  return n == 0 || std::memcmp(a, b, n) == 0;
}

// False for the one combination the library refuses: avg of bool.
inline bool valid_reduction(gradwire::DataType dt, gradwire::ReduceOp op) {
  return !(dt == gradwire::DataType::Bool && op == gradwire::ReduceOp::Avg);
}

// "float32_sum": the name of a (dtype, op) test case.
std::string case_name(const ::testing::TestParamInfo<std::tuple<gradwire::DataType, gradwire::ReduceOp>>& info);
// A reproducible seed per test case (`salt` tells the collectives apart).
uint64_t seed_of(gradwire::DataType dt, gradwire::ReduceOp op, size_t count, int salt);
// What an allgather of `count` elements returns on every rank when rank r
// contributes its shard of make_input(dt, Sum, count, r, seed).
std::vector<std::byte> expected_allgather(gradwire::DataType dt, size_t count, int world,
                                          uint64_t seed);

// True if every rank of `comm` holds the same bytes (checked by allgather).
::testing::AssertionResult identical_on_all_ranks(gradwire::Communicator& comm, const void* data,
                                                  size_t bytes);

}  // namespace gwtest
