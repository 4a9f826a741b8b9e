// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "harness.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

namespace gwtest {

using gradwire::DataType;
using gradwire::ReduceOp;
namespace k = gradwire::kernels;

namespace {
std::unique_ptr<gradwire::Communicator> g_world;

double epsilon(DataType dt) {
  switch (dt) {
    case DataType::Float32: return std::ldexp(1.0, -23);
    case DataType::Float64: return std::ldexp(1.0, -52);
    case DataType::Float16: return std::ldexp(1.0, -10);
    case DataType::BFloat16: return std::ldexp(1.0, -7);
    default: return 0;
  }
}

template <typename T>
void put(std::byte* p, size_t i, T v) { std::memcpy(p + i * sizeof(T), &v, sizeof(T)); }
template <typename T>
T get(const std::byte* p, size_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}

// Stores a double as dtype (rounding as the library does).
void store(DataType dt, std::byte* p, size_t i, double v) {
  switch (dt) {
    case DataType::Float32: put<float>(p, i, float(v)); break;
    case DataType::Float64: put<double>(p, i, v); break;
    case DataType::Float16: put<uint16_t>(p, i, k::float_to_half(float(v))); break;
    case DataType::BFloat16: put<uint16_t>(p, i, k::float_to_bf16(float(v))); break;
    case DataType::Int32: put<int32_t>(p, i, int32_t(uint32_t(int64_t(v)))); break;
    case DataType::Int64: put<int64_t>(p, i, int64_t(v)); break;
    case DataType::UInt8: put<uint8_t>(p, i, uint8_t(int64_t(v))); break;
    case DataType::Int8: put<int8_t>(p, i, int8_t(uint8_t(int64_t(v)))); break;
    case DataType::Int16: put<int16_t>(p, i, int16_t(uint16_t(int64_t(v)))); break;
    case DataType::Bool: put<uint8_t>(p, i, uint8_t(v != 0)); break;
  }
}
}  // namespace

gradwire::Communicator& world() {
  if (!g_world) g_world = gradwire::Communicator::create();
  return *g_world;
}
void reset_world() { g_world.reset(); }

int run_rank_tests(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  try {
    rank = world().rank();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cannot create the world communicator: %s\n", e.what());
    return 1;
  }
  if (rank != 0) GTEST_FLAG_SET(brief, true);
  const int rc = RUN_ALL_TESTS();
  reset_world();
  return rc;
}

double element_as_double(DataType dt, const std::byte* p, size_t i) {
  switch (dt) {
    case DataType::Float32: return get<float>(p, i);
    case DataType::Float64: return get<double>(p, i);
    case DataType::Float16: return k::half_to_float(get<uint16_t>(p, i));
    case DataType::BFloat16: return k::bf16_to_float(get<uint16_t>(p, i));
    case DataType::Int32: return get<int32_t>(p, i);
    case DataType::Int64: return double(get<int64_t>(p, i));
    case DataType::UInt8: return get<uint8_t>(p, i);
    case DataType::Int8: return get<int8_t>(p, i);
    case DataType::Int16: return get<int16_t>(p, i);
    case DataType::Bool: return get<uint8_t>(p, i);
  }
  return 0;
}

std::vector<std::byte> make_input(DataType dt, ReduceOp op, size_t count, int rank, uint64_t seed) {
  std::mt19937_64 rng(seed * 1000003u + uint64_t(rank) * 7919u + uint64_t(dt) * 31u);
  std::vector<std::byte> out(count * gradwire::element_size(dt));
  const bool prod = op == ReduceOp::Prod;
  std::uniform_real_distribution<double> uni(prod ? 0.5 : -1.0, prod ? 2.0 : 1.0);
  std::uniform_int_distribution<int64_t> small(prod ? -3 : -1000, prod ? 3 : 1000);
  std::uniform_int_distribution<int64_t> byte(0, 255);
  for (size_t i = 0; i < count; ++i) {
    switch (dt) {
      case DataType::Int32:
      case DataType::Int64:
      case DataType::Int8:
      case DataType::Int16: store(dt, out.data(), i, double(small(rng))); break;
      case DataType::UInt8: store(dt, out.data(), i, double(byte(rng))); break;
      case DataType::Bool: store(dt, out.data(), i, double(byte(rng) & 1)); break;
      default: store(dt, out.data(), i, uni(rng)); break;
    }
  }
  return out;
}

Reference reduce_reference(DataType dt, ReduceOp op, size_t count, int world, uint64_t seed) {
  Reference ref;
  const size_t es = gradwire::element_size(dt);
  ref.bytes.resize(count * es);
  ref.values.assign(count, 0);
  ref.tolerance.assign(count, 0);
  std::vector<std::vector<std::byte>> inputs;
  for (int r = 0; r < world; ++r) inputs.push_back(make_input(dt, op, count, r, seed));
  const bool floating = gradwire::is_floating(dt);
  for (size_t i = 0; i < count; ++i) {
    if (floating) {
      double acc = element_as_double(dt, inputs[0].data(), i), abs_sum = std::fabs(acc);
      for (int r = 1; r < world; ++r) {
        double x = element_as_double(dt, inputs[r].data(), i);
        abs_sum += std::fabs(x);
        switch (op) {
          case ReduceOp::Sum: case ReduceOp::Avg: acc += x; break;
          case ReduceOp::Prod: acc *= x; break;
          case ReduceOp::Min: acc = std::min(acc, x); break;
          case ReduceOp::Max: acc = std::max(acc, x); break;
        }
      }
      if (op == ReduceOp::Avg) acc /= world, abs_sum /= world;
      // Each of the world-1 reduction steps and the final division may
      // round once in dtype (16-bit floats round every step).
      double tol = 0;
      if (op == ReduceOp::Sum || op == ReduceOp::Avg) tol = (world + 1) * epsilon(dt) * abs_sum;
      if (op == ReduceOp::Prod) tol = (world + 1) * epsilon(dt) * std::fabs(acc);
      ref.values[i] = acc;
      ref.tolerance[i] = tol;
      store(dt, ref.bytes.data(), i, acc);
    } else if (dt == DataType::Bool) {
      // Sum and Max are logical or, Prod and Min logical and (types.h).
      const bool any = op == ReduceOp::Sum || op == ReduceOp::Max;
      bool acc = element_as_double(dt, inputs[0].data(), i) != 0;
      for (int r = 1; r < world; ++r) {
        const bool x = element_as_double(dt, inputs[r].data(), i) != 0;
        acc = any ? (acc || x) : (acc && x);
      }
      ref.values[i] = acc;
      store(dt, ref.bytes.data(), i, acc);
    } else {
      // Integers: modular arithmetic, like the library (wraps on overflow).
      const uint64_t mask = dt == DataType::UInt8 || dt == DataType::Int8 ? 0xffu
                            : dt == DataType::Int16                     ? 0xffffu
                            : dt == DataType::Int32                     ? 0xffffffffu
                                                                        : ~0ull;
      auto val = [&](int r) { return int64_t(element_as_double(dt, inputs[r].data(), i)); };
      uint64_t acc = uint64_t(val(0));
      int64_t mn = val(0), mx = val(0);
      for (int r = 1; r < world; ++r) {
        int64_t x = val(r);
        if (op == ReduceOp::Prod) acc = acc * uint64_t(x);
        else acc = acc + uint64_t(x);
        mn = std::min(mn, x);
        mx = std::max(mx, x);
      }
      acc &= mask;
      int64_t v;
      if (op == ReduceOp::Min) v = mn;
      else if (op == ReduceOp::Max) v = mx;
      else {
        // Reinterpret the wrapped value in the dtype, then (Avg) truncate.
        if (dt == DataType::Int32) v = int32_t(uint32_t(acc));
        else if (dt == DataType::Int8) v = int8_t(uint8_t(acc));
        else if (dt == DataType::Int16) v = int16_t(uint16_t(acc));
        else if (dt == DataType::UInt8) v = int64_t(acc);
        else v = int64_t(acc);
        if (op == ReduceOp::Avg) v = v / world;
      }
      ref.values[i] = double(v);
      store(dt, ref.bytes.data(), i, double(v));
    }
  }
  return ref;
}

::testing::AssertionResult matches(DataType dt, const std::byte* got, const Reference& ref,
                                   size_t first, size_t count) {
  const size_t es = gradwire::element_size(dt);
  size_t bad = 0;
  std::string first_bad;
  for (size_t i = 0; i < count; ++i) {
    const size_t j = first + i;
    bool ok;
    if (!gradwire::is_floating(dt)) {
      ok = std::memcmp(got + i * es, ref.bytes.data() + j * es, es) == 0;
    } else {
      double g = element_as_double(dt, got, i);
      // The reference is rounded to dtype too: allow for that rounding.
      double stored = element_as_double(dt, ref.bytes.data(), j);
      double tol = ref.tolerance[j] + std::fabs(stored - ref.values[j]);
      ok = std::fabs(g - ref.values[j]) <= tol || g == stored;
    }
    if (!ok && bad++ == 0) {
      first_bad = fmt::format("element {}: got {} expected {} (tolerance {})", j,
                              element_as_double(dt, got, i), ref.values[j], ref.tolerance[j]);
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << count << " elements wrong; first "
                                       << first_bad;
}

std::string case_name(
    const ::testing::TestParamInfo<std::tuple<gradwire::DataType, gradwire::ReduceOp>>& info) {
  return std::string(gradwire::to_string(std::get<0>(info.param))) + "_" +
         std::string(gradwire::to_string(std::get<1>(info.param)));
}

uint64_t seed_of(gradwire::DataType dt, gradwire::ReduceOp op, size_t count, int salt) {
  return (uint64_t(dt) << 40) ^ (uint64_t(op) << 32) ^ (count * 2654435761u) ^ uint64_t(salt);
}

std::vector<std::byte> expected_allgather(gradwire::DataType dt, size_t count, int world,
                                          uint64_t seed) {
  const size_t es = gradwire::element_size(dt);
  std::vector<std::byte> expect(count * es);
  for (int r = 0; r < world; ++r) {
    auto full = make_input(dt, gradwire::ReduceOp::Sum, count, r, seed);
    const size_t off = gradwire::shard_offset(count, world, r) * es;
    const size_t len = gradwire::shard_count(count, world, r) * es;
    if (len > 0) std::memcpy(expect.data() + off, full.data() + off, len);
  }
  return expect;
}

::testing::AssertionResult identical_on_all_ranks(gradwire::Communicator& comm, const void* data,
                                                  size_t bytes) {
  const int n = comm.size();
  std::vector<std::byte> all(bytes * n);
  comm.allgather(data, all.data(), bytes * n, DataType::UInt8).wait();
  if (bytes == 0) return ::testing::AssertionSuccess();
  for (int r = 0; r < n; ++r) {
    if (std::memcmp(all.data() + r * bytes, data, bytes) != 0) {
      return ::testing::AssertionFailure()
             << "rank " << comm.rank() << " and rank " << r << " hold different bits";
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace gwtest
