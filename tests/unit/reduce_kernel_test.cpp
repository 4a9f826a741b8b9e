// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// kernels/cpu/reduce.h against plain loops over reduce_math.h, and every SIMD
// table (Note [cpu kernel dispatch]) against the scalar one, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gradwire/error.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/reduce.h"
#include "kernels/reduce_math.h"

namespace gradwire::kernels {
namespace {

using cpu::Isa;
using cpu::KernelTable;

const size_t kLengths[] = {0, 1, 7, 31, 32, 33, 63, 64, 65, 255, 256, 257, 1000, 4099};
const ReduceOp kElemOps[] = {ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max, ReduceOp::Prod};

Op elem_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return Op::Sum;
    case ReduceOp::Min:
      return Op::Min;
    case ReduceOp::Max:
      return Op::Max;
    case ReduceOp::Prod:
      return Op::Prod;
  }
  return Op::Sum;
}

// The reference: one reduce_math.h call per element, written out here
// independently of the kernels' own tables.
template <Op op>
void ref_reduce_op(uint8_t* d, const uint8_t* a, const uint8_t* b, size_t i, DataType dt) {
  auto one = [&](auto tag, auto fn) {
    using S = decltype(tag);
    S x, y, r;
    std::memcpy(&x, a + i * sizeof(S), sizeof(S));
    std::memcpy(&y, b + i * sizeof(S), sizeof(S));
    r = fn(x, y);
    std::memcpy(d + i * sizeof(S), &r, sizeof(S));
  };
  switch (dt) {
    case DataType::Float32:
      one(float{}, apply<op, float>);
      break;
    case DataType::Float64:
      one(double{}, apply<op, double>);
      break;
    case DataType::Float16:
      one(uint16_t{}, apply_half<op>);
      break;
    case DataType::BFloat16:
      one(uint16_t{}, apply_bf16<op>);
      break;
    case DataType::Int32:
      one(int32_t{}, apply<op, int32_t>);
      break;
    case DataType::Int64:
      one(int64_t{}, apply<op, int64_t>);
      break;
    case DataType::UInt8:
      one(uint8_t{}, apply_u8<op>);
      break;
    case DataType::Int8:
      one(int8_t{}, apply<op, int8_t>);
      break;
    case DataType::Int16:
      one(int16_t{}, apply<op, int16_t>);
      break;
    case DataType::Bool:  // or / and (types.h), written out here
      one(uint8_t{}, [](uint8_t x, uint8_t y) -> uint8_t {
        return op == Op::Sum || op == Op::Max ? std::max(x, y) : std::min(x, y);
      });
      break;
  }
}

std::vector<uint8_t> ref_reduce(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, size_t n,
                                DataType dt, ReduceOp op) {
  std::vector<uint8_t> d(a.size());
  for (size_t i = 0; i < n; ++i) {
    switch (elem_op(op)) {
      case Op::Sum:
        ref_reduce_op<Op::Sum>(d.data(), a.data(), b.data(), i, dt);
        break;
      case Op::Min:
        ref_reduce_op<Op::Min>(d.data(), a.data(), b.data(), i, dt);
        break;
      case Op::Max:
        ref_reduce_op<Op::Max>(d.data(), a.data(), b.data(), i, dt);
        break;
      case Op::Prod:
        ref_reduce_op<Op::Prod>(d.data(), a.data(), b.data(), i, dt);
        break;
    }
  }
  return d;
}

bool is_nan_at(const uint8_t* p, size_t i, DataType dt) {
  switch (dt) {
    case DataType::Float32: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return std::isnan(f);
    }
    case DataType::Float64: {
      double f;
      std::memcpy(&f, p + 8 * i, 8);
      return std::isnan(f);
    }
    case DataType::Float16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return (h & 0x7fffu) > 0x7c00u;
    }
    case DataType::BFloat16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return (h & 0x7fffu) > 0x7f80u;
    }
    default:
      return false;
  }
}

// Bit equality, except that Sum/Prod of two NaNs may carry either payload
// (Note [cpu kernel dispatch]); then any NaN will do. Pass a and b only for
// Sum/Prod results.
::testing::AssertionResult same_bits(const uint8_t* got, const uint8_t* want, const uint8_t* a,
                                     const uint8_t* b, size_t n, DataType dt) {
  size_t es = element_size(dt);
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(got + i * es, want + i * es, es) == 0) continue;
    if (a && b && is_nan_at(a, i, dt) && is_nan_at(b, i, dt) && is_nan_at(got, i, dt)) continue;
    std::string g, w;
    for (size_t k = 0; k < es; ++k) {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%02x", got[i * es + es - 1 - k]);
      g += buf;
      std::snprintf(buf, sizeof buf, "%02x", want[i * es + es - 1 - k]);
      w += buf;
    }
    return ::testing::AssertionFailure()
           << "element " << i << " of " << n << ": got 0x" << g << ", want 0x" << w;
  }
  return ::testing::AssertionSuccess();
}

// Random inputs; floats get specials (NaN of both kinds, inf, -0,
// subnormals) sprinkled in, 16-bit floats are uniformly random patterns.
std::vector<uint8_t> random_buffer(DataType dt, size_t n, std::mt19937_64& rng) {
  std::vector<uint8_t> buf(n * element_size(dt) + 64);
  std::uniform_real_distribution<double> val(-100.0, 100.0);
  std::uniform_int_distribution<int> pick(0, 39);
  auto put = [&](size_t i, auto v) { std::memcpy(buf.data() + i * sizeof(v), &v, sizeof(v)); };
  for (size_t i = 0; i < n; ++i) {
    int p = pick(rng);
    switch (dt) {
      case DataType::Float32: {
        const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                                  -std::numeric_limits<float>::infinity(),
                                  std::numeric_limits<float>::infinity(),
                                  -0.0f,
                                  0.0f,
                                  1e-40f,
                                  -3e-39f,
                                  std::numeric_limits<float>::signaling_NaN()};
        put(i, p < 8 ? specials[p] : (float)val(rng));
        break;
      }
      case DataType::Float64: {
        const double specials[] = {std::numeric_limits<double>::quiet_NaN(),
                                   -std::numeric_limits<double>::infinity(),
                                   std::numeric_limits<double>::infinity(),
                                   -0.0,
                                   0.0,
                                   1e-310,
                                   -3e-309,
                                   -std::numeric_limits<double>::quiet_NaN()};
        put(i, p < 8 ? specials[p] : val(rng));
        break;
      }
      case DataType::Float16:
      case DataType::BFloat16:
        put(i, (uint16_t)rng());
        break;
      case DataType::Int32:
        put(i, (int32_t)rng());
        break;
      case DataType::Int64:
        put(i, (int64_t)rng());
        break;
      case DataType::UInt8:
        put(i, (uint8_t)rng());
        break;
      case DataType::Int8:
        put(i, (int8_t)rng());
        break;
      case DataType::Int16:
        put(i, (int16_t)rng());
        break;
      case DataType::Bool:
        put(i, (uint8_t)(rng() & 1));
        break;
    }
  }
  return buf;
}

// The inputs to hand same_bits: only Sum/Prod get the two-NaN leniency.
const uint8_t* lenient(ReduceOp op, const uint8_t* p) {
  return op == ReduceOp::Min || op == ReduceOp::Max ? nullptr : p;
}

std::string label(DataType dt, ReduceOp op, size_t n) {
  return std::string(to_string(dt)) + " " + std::string(to_string(op)) + " n=" + std::to_string(n);
}

TEST(ReduceKernelTest, MatchesScalarReferenceForEveryDtypeAndOp) {
  std::mt19937_64 rng(1);
  for (DataType dt : kAllDataTypes) {
    for (ReduceOp op : kAllReduceOps) {
      for (size_t n : kLengths) {
        auto a = random_buffer(dt, n, rng), b = random_buffer(dt, n, rng);
        auto want = ref_reduce(a, b, n, dt, op);
        std::vector<uint8_t> got(a.size(), 0xcd);
        reduce(got.data(), a.data(), b.data(), n, dt, op);
        ASSERT_TRUE(same_bits(got.data(), want.data(), lenient(op, a.data()), lenient(op, b.data()), n, dt))
            << label(dt, op, n);
        // Nothing past the end is written.
        for (size_t k = n * element_size(dt); k < got.size(); ++k)
          ASSERT_EQ(got[k], 0xcd) << label(dt, op, n);
      }
    }
  }
}

TEST(ReduceKernelTest, InPlaceAndMisalignedBuffers) {
  std::mt19937_64 rng(2);
  for (DataType dt : kAllDataTypes) {
    const size_t es = element_size(dt);
    for (ReduceOp op : kElemOps) {
      for (size_t n : {33ul, 1000ul, 4099ul}) {
        auto a = random_buffer(dt, n + 1, rng), b = random_buffer(dt, n + 1, rng);
        // One element in: no buffer is vector-aligned.
        auto want = ref_reduce(std::vector<uint8_t>(a.begin() + es, a.end()),
                               std::vector<uint8_t>(b.begin() + es, b.end()), n, dt, op);
        auto into_a = a, into_b = b;
        reduce(into_a.data() + es, into_a.data() + es, b.data() + es, n, dt, op);
        ASSERT_TRUE(same_bits(into_a.data() + es, want.data(), lenient(op, a.data() + es),
                              lenient(op, b.data() + es), n, dt))
            << "dst == a, " << label(dt, op, n);
        reduce(into_b.data() + es, a.data() + es, into_b.data() + es, n, dt, op);
        ASSERT_TRUE(same_bits(into_b.data() + es, want.data(), lenient(op, a.data() + es),
                              lenient(op, b.data() + es), n, dt))
            << "dst == b, " << label(dt, op, n);
        auto both = a;  // dst == a == b
        reduce(both.data(), both.data(), both.data(), n, dt, op);
        auto want_aa = ref_reduce(a, a, n, dt, op);
        ASSERT_TRUE(
            same_bits(both.data(), want_aa.data(), lenient(op, a.data()), lenient(op, a.data()), n, dt))
            << "dst == a == b, " << label(dt, op, n);
      }
    }
  }
}

TEST(ReduceKernelTest, AvgReducesLikeSum) {
  std::mt19937_64 rng(3);
  for (DataType dt : kAllDataTypes) {
    auto a = random_buffer(dt, 100, rng), b = random_buffer(dt, 100, rng);
    std::vector<uint8_t> s(a.size()), v(a.size());
    reduce(s.data(), a.data(), b.data(), 100, dt, ReduceOp::Sum);
    reduce(v.data(), a.data(), b.data(), 100, dt, ReduceOp::Avg);
    EXPECT_TRUE(same_bits(v.data(), s.data(), a.data(), b.data(), 100, dt)) << to_string(dt);
  }
}

TEST(ReduceKernelTest, PartialOverlapAndBadArgumentsThrow) {
  std::vector<float> buf(64, 1.0f);
  try {
    reduce(buf.data() + 1, buf.data(), buf.data() + 32, 16, DataType::Float32, ReduceOp::Sum);
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  }
  EXPECT_THROW(divide(buf.data(), 4, DataType::Float32, 0), Error);
  EXPECT_THROW(divide(buf.data(), 4, DataType::Int32, -2), Error);
  EXPECT_THROW(reduce(nullptr, buf.data(), buf.data(), 4, DataType::Float32, ReduceOp::Sum), Error);
  reduce(nullptr, nullptr, nullptr, 0, DataType::Float32, ReduceOp::Sum);  // count 0: no-op
}

template <typename T>
std::vector<T> divided(std::vector<T> v, DataType dt, int divisor) {
  divide(v.data(), v.size(), dt, divisor);
  return v;
}

TEST(ReduceKernelTest, DivideTruncatesIntegersTowardZero) {
  EXPECT_EQ(divided<int32_t>({-7, -1, 0, 1, 7, INT32_MIN, INT32_MAX}, DataType::Int32, 2),
            (std::vector<int32_t>{-3, 0, 0, 0, 3, INT32_MIN / 2, INT32_MAX / 2}));
  EXPECT_EQ(divided<int64_t>({-9, -4, 9, INT64_MIN}, DataType::Int64, 4),
            (std::vector<int64_t>{-2, -1, 2, INT64_MIN / 4}));
  EXPECT_EQ(divided<uint8_t>({255, 7, 1}, DataType::UInt8, 2), (std::vector<uint8_t>{127, 3, 0}));
  EXPECT_EQ(divided<uint8_t>({255, 7}, DataType::UInt8, 300), (std::vector<uint8_t>{0, 0}));
  EXPECT_EQ(divided<float>({1.0f, -3.0f}, DataType::Float32, 3), (std::vector<float>{1.0f / 3, -1.0f}));
}

TEST(ReduceKernelTest, DivideMatchesReferenceForEveryDtype) {
  std::mt19937_64 rng(4);
  for (DataType dt : kAllDataTypes) {
    for (int divisor : {1, 2, 3, 8, 1000}) {
      for (size_t n : kLengths) {
        auto v = random_buffer(dt, n, rng);
        auto want = v;
        for (size_t i = 0; i < n; ++i) {
          auto one = [&](auto tag, auto fn) {
            decltype(tag) x;
            std::memcpy(&x, want.data() + i * sizeof(x), sizeof(x));
            x = fn(x, divisor);
            std::memcpy(want.data() + i * sizeof(x), &x, sizeof(x));
          };
          if (divisor == 1) break;  // documented no-op
          switch (dt) {
            case DataType::Float32:
              one(float{}, divide_value<float>);
              break;
            case DataType::Float64:
              one(double{}, divide_value<double>);
              break;
            case DataType::Float16:
              one(uint16_t{}, divide_half);
              break;
            case DataType::BFloat16:
              one(uint16_t{}, divide_bf16);
              break;
            case DataType::Int32:
              one(int32_t{}, divide_value<int32_t>);
              break;
            case DataType::Int64:
              one(int64_t{}, divide_value<int64_t>);
              break;
            case DataType::UInt8:
              one(uint8_t{}, divide_value<uint8_t>);
              break;
            case DataType::Int8:
              one(int8_t{}, divide_value<int8_t>);
              break;
            case DataType::Int16:
              one(int16_t{}, divide_value<int16_t>);
              break;
            case DataType::Bool:  // never divided (Avg is refused): unchanged
              break;
          }
        }
        divide(v.data(), n, dt, divisor);
        ASSERT_TRUE(same_bits(v.data(), want.data(), nullptr, nullptr, n, dt))
            << to_string(dt) << " / " << divisor << " n=" << n;
      }
    }
  }
}

// Float bit patterns for the conversion checks: a sweep over all exponents
// plus the halfway cases and NaNs that differ between careless paths.
std::vector<float> conversion_inputs() {
  std::vector<float> v;
  for (uint64_t u = 0; u < (1ull << 32); u += 1ull << 14) {
    for (uint32_t low : {0u, 0x1000u, 0x1001u, 0x0fffu, 0x3000u, 0x8000u, 0x7fffu}) {
      uint32_t x = (uint32_t)u | low;
      float f;
      std::memcpy(&f, &x, 4);
      v.push_back(f);
    }
  }
  for (uint32_t x : {0x7f800001u, 0xff800001u, 0x7fc00000u, 0x7fffffffu, 0x477ff000u, 0x477fefffu,
                     0x33000000u, 0x33000001u, 0x387fe000u, 0x387ff000u}) {
    float f;
    std::memcpy(&f, &x, 4);
    v.push_back(f);
  }
  return v;
}

TEST(ReduceKernelTest, ConversionsMatchScalarFunctions) {
  std::vector<uint16_t> all(65536 + 13);
  for (size_t i = 0; i < all.size(); ++i) all[i] = (uint16_t)i;
  std::vector<float> wide(all.size());
  half_to_float(wide.data(), all.data(), all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_EQ(float_to_bits(wide[i]), float_to_bits(kernels::half_to_float(all[i]))) << std::hex << all[i];
  }
  bf16_to_float(wide.data(), all.data(), all.size());
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(float_to_bits(wide[i]), (uint32_t)all[i] << 16);

  auto in = conversion_inputs();
  std::vector<uint16_t> narrow(in.size());
  float_to_half(narrow.data(), in.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(narrow[i], kernels::float_to_half(in[i])) << std::hex << float_to_bits(in[i]);
  }
  float_to_bf16(narrow.data(), in.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(narrow[i], kernels::float_to_bf16(in[i])) << std::hex << float_to_bits(in[i]);
  }
}

// ---- every SIMD table against the scalar table ----

std::vector<Isa> simd_isas() {
  std::vector<Isa> out;
  for (Isa isa : cpu::kAllIsas) {
    if (isa != Isa::Scalar && cpu::cpu_supports(isa)) out.push_back(isa);
  }
  return out;
}

TEST(ReduceKernelTest, ReportsDispatch) {
  std::string have;
  for (Isa isa : cpu::kAllIsas)
    have += std::string(cpu::to_string(isa)) + (cpu::cpu_supports(isa) ? "+ " : "- ");
  std::cout << "[ INFO     ] CPU kernels: active " << cpu::to_string(cpu::active_isa()) << "; " << have
            << "\n";
  EXPECT_TRUE(cpu::cpu_supports(Isa::Scalar));
  EXPECT_TRUE(cpu::cpu_supports(cpu::active_isa()));
  if (!std::getenv("GRADWIRE_CPU_KERNELS")) {
    for (Isa isa : simd_isas()) EXPECT_GE((int)cpu::active_isa(), (int)isa) << "the widest variant is chosen";
  }
}

TEST(ReduceKernelTest, SimdTablesBitIdenticalToScalar) {
  const KernelTable& scalar = cpu::kernels_for(Isa::Scalar);
  auto isas = simd_isas();
  if (isas.empty()) GTEST_SKIP() << "this CPU runs no SIMD variant; the scalar table is the only one";
  std::mt19937_64 rng(5);
  for (Isa isa : isas) {
    const KernelTable& simd = cpu::kernels_for(isa);
    for (int dt = 0; dt < cpu::kNumDataTypes; ++dt) {
      for (int op = 0; op < cpu::kNumElemOps; ++op) {
        for (size_t n : kLengths) {
          auto a = random_buffer((DataType)dt, n, rng), b = random_buffer((DataType)dt, n, rng);
          std::vector<uint8_t> want(a.size()), got(a.size());
          scalar.reduce[dt][op](want.data(), a.data(), b.data(), n);
          simd.reduce[dt][op](got.data(), a.data(), b.data(), n);
          const uint8_t* la = lenient(kElemOps[op], a.data());
          const uint8_t* lb = lenient(kElemOps[op], b.data());
          ASSERT_TRUE(same_bits(got.data(), want.data(), la, lb, n, (DataType)dt))
              << cpu::to_string(isa) << " " << label((DataType)dt, kElemOps[op], n);
          auto in_place = a;
          simd.reduce[dt][op](in_place.data(), in_place.data(), b.data(), n);
          ASSERT_TRUE(same_bits(in_place.data(), want.data(), la, lb, n, (DataType)dt))
              << cpu::to_string(isa) << " in place " << label((DataType)dt, kElemOps[op], n);
        }
      }
      for (int divisor : {3, 7}) {
        auto v = random_buffer((DataType)dt, 1000, rng);
        auto w = v;
        scalar.divide[dt](w.data(), 1000, divisor);
        simd.divide[dt](v.data(), 1000, divisor);
        ASSERT_TRUE(same_bits(v.data(), w.data(), nullptr, nullptr, 1000, (DataType)dt))
            << cpu::to_string(isa) << " divide " << to_string((DataType)dt);
      }
    }
    // Conversions, including every half/bf16 pattern (NaN, inf, subnormal).
    std::vector<uint16_t> all(65536 + 5);
    for (size_t i = 0; i < all.size(); ++i) all[i] = (uint16_t)i;
    std::vector<float> w1(all.size()), w2(all.size());
    scalar.half_to_float(w1.data(), all.data(), all.size());
    simd.half_to_float(w2.data(), all.data(), all.size());
    ASSERT_EQ(0, std::memcmp(w1.data(), w2.data(), w1.size() * 4)) << cpu::to_string(isa) << " half_to_float";
    scalar.bf16_to_float(w1.data(), all.data(), all.size());
    simd.bf16_to_float(w2.data(), all.data(), all.size());
    ASSERT_EQ(0, std::memcmp(w1.data(), w2.data(), w1.size() * 4)) << cpu::to_string(isa) << " bf16_to_float";
    auto in = conversion_inputs();
    std::vector<uint16_t> n1(in.size()), n2(in.size());
    scalar.float_to_half(n1.data(), in.data(), in.size());
    simd.float_to_half(n2.data(), in.data(), in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      ASSERT_EQ(n1[i], n2[i]) << cpu::to_string(isa) << " float_to_half 0x" << std::hex
                              << float_to_bits(in[i]);
    }
    scalar.float_to_bf16(n1.data(), in.data(), in.size());
    simd.float_to_bf16(n2.data(), in.data(), in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      ASSERT_EQ(n1[i], n2[i]) << cpu::to_string(isa) << " float_to_bf16 0x" << std::hex
                              << float_to_bits(in[i]);
    }
  }
}

TEST(ReduceKernelTest, UnsupportedIsaIsRefused) {
  for (Isa isa : cpu::kAllIsas) {
    if (cpu::cpu_supports(isa)) continue;
    EXPECT_THROW(cpu::kernels_for(isa), Error) << cpu::to_string(isa);
  }
}

}  // namespace
}  // namespace gradwire::kernels
