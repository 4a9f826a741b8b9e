// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// kernels/reduce_math.h against independent references: GCC's _Float16
// conversions (libgcc soft-fp, IEEE round-to-nearest-even) and bfloat16
// rounding done in double arithmetic.
#include "kernels/reduce_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace gradwire::kernels {
namespace {

uint32_t bits(float f) { return float_to_bits(f); }
float from_bits(uint32_t u) { return bits_to_float(u); }

float ref_half_to_float(uint16_t h) {
  _Float16 x;
  std::memcpy(&x, &h, 2);
  return (float)x;
}
uint16_t ref_float_to_half(float f) {
  _Float16 x = (_Float16)f;
  uint16_t h;
  std::memcpy(&h, &x, 2);
  return h;
}

TEST(ReduceMathTest, HalfToFloatAllInputs) {
  for (uint32_t h = 0; h < 65536; ++h) {
    uint32_t got = bits(half_to_float((uint16_t)h));
    uint32_t want = bits(ref_half_to_float((uint16_t)h));
    ASSERT_EQ(got, want) << "half 0x" << std::hex << h;
  }
}

void expect_float_to_half(uint32_t fbits) {
  float f = from_bits(fbits);
  uint16_t got = float_to_half(f);
  uint16_t want = ref_float_to_half(f);
  ASSERT_EQ(got, want) << "float bits 0x" << std::hex << fbits << " (" << f << ")";
}

TEST(ReduceMathTest, FloatToHalfSweep) {
  // Every 2^12th float bit pattern: 2^20 inputs over all exponents, both signs.
  for (uint64_t u = 0; u < (1ull << 32); u += 1ull << 12) {
    expect_float_to_half((uint32_t)u);
    expect_float_to_half((uint32_t)u + 0x7ffu);  // off-grid low bits too
  }
}

TEST(ReduceMathTest, FloatToHalfTiesAndNeighbours) {
  // The midpoint between every pair of adjacent finite halves (exact in
  // float), and one float ulp either side: exercises ties-to-even in the
  // normal and subnormal ranges and the carry into the exponent.
  for (uint32_t h = 0; h < 0x7c00u; ++h) {
    double lo = ref_half_to_float((uint16_t)h);
    double hi = h + 1 < 0x7c00u ? (double)ref_half_to_float((uint16_t)(h + 1)) : 65536.0;
    float mid = (float)((lo + hi) / 2);
    ASSERT_EQ((double)mid, (lo + hi) / 2);
    for (uint32_t sign : {0u, 0x80000000u}) {
      uint32_t m = bits(mid) | sign;
      expect_float_to_half(m);
      expect_float_to_half(m + 1);
      if ((m & 0x7fffffffu) != 0) expect_float_to_half(m - 1);
    }
  }
}

TEST(ReduceMathTest, FloatToHalfBoundaries) {
  const float inf = std::numeric_limits<float>::infinity();
  const float cases[] = {
      0.0f,
      -0.0f,
      inf,
      -inf,
      65504.0f,
      65519.99f,
      65520.0f,
      65536.0f,
      1e9f,
      3.4e38f,
      std::ldexp(1.0f, -14),  // smallest normal half
      std::nextafter(std::ldexp(1.0f, -14), 0.0f),
      std::ldexp(1.0f, -24),  // smallest subnormal half
      std::ldexp(1.0f, -25),  // tie between 0 and 2^-24: rounds to 0
      std::nextafter(std::ldexp(1.0f, -25), 1.0f),
      std::ldexp(1.5f, -25),
      std::ldexp(1.5f, -24),  // ties around the smallest subnormal
      std::ldexp(1.0f, -26),
      std::ldexp(1.0f, -126),
      std::ldexp(1.0f, -149),            // float subnormals
      1.0f + std::ldexp(1.0f, -11),      // tie, rounds to even (down)
      1.0f + 3 * std::ldexp(1.0f, -11),  // tie, rounds to even (up)
  };
  for (float f : cases) {
    expect_float_to_half(bits(f));
    expect_float_to_half(bits(-f));
  }
  EXPECT_EQ(float_to_half(65504.0f), 0x7bffu);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00u);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000u);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000u);
}

TEST(ReduceMathTest, HalfNaNsComeOutQuietWithPayload) {
  // Every float NaN pattern class: quiet/signalling, payload in the kept
  // and in the dropped bits, both signs.
  for (uint32_t payload : {1u, 0x1fffu, 0x2000u, 0x3fe000u, 0x400000u, 0x7fffffu, 0x155555u}) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      uint32_t nan = sign | 0x7f800000u | payload;
      expect_float_to_half(nan);
      uint16_t h = float_to_half(from_bits(nan));
      EXPECT_EQ(h & 0x7e00u, 0x7e00u) << std::hex << nan;
      EXPECT_EQ((h & 0x8000u) != 0, sign != 0);
    }
  }
  // Signalling half NaN widens to a quiet float NaN with its payload.
  EXPECT_EQ(bits(half_to_float(0x7c01u)), 0x7fc02000u);
  EXPECT_EQ(bits(half_to_float(0xfd55u)), 0xffeaa000u);
}

// bfloat16 reference: the nearer of the two neighbouring bfloat16 values,
// computed in double; ties go to the even mantissa; past the largest finite
// value, rounding goes to infinity as if the exponent went on.
uint16_t ref_float_to_bf16(float f) {
  uint32_t x = bits(f);
  uint32_t sign = x & 0x80000000u;
  uint32_t mag = x & 0x7fffffffu;
  uint32_t lo = mag & 0xffff0000u;
  uint32_t hi = lo + 0x10000u;
  auto value = [](uint32_t m) { return m >= 0x7f800000u ? std::ldexp(1.0, 128) : (double)from_bits(m); };
  double v = value(mag), dlo = v - value(lo), dhi = value(hi) - v;
  uint32_t pick = dlo < dhi ? lo : dhi < dlo ? hi : (((lo >> 16) & 1u) ? hi : lo);
  return (uint16_t)((sign | pick) >> 16);
}

TEST(ReduceMathTest, Bf16RoundTripAllInputs) {
  for (uint32_t b = 0; b < 65536; ++b) {
    float f = bf16_to_float((uint16_t)b);
    ASSERT_EQ(bits(f), b << 16);
    uint16_t back = float_to_bf16(f);
    if ((b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0) {
      ASSERT_EQ(back, b | 0x40u) << "NaN comes back quiet, 0x" << std::hex << b;
    } else {
      ASSERT_EQ(back, b) << std::hex << b;
    }
  }
}

TEST(ReduceMathTest, Bf16RoundingMatchesDoubleReference) {
  std::vector<uint32_t> inputs;
  for (uint64_t u = 0; u < (1ull << 32); u += 1ull << 12) inputs.push_back((uint32_t)u + 0x123u);
  for (uint32_t hi = 0; hi < 0x10000u; hi += 7) {  // ties and their neighbours
    uint32_t tie = (hi << 16) | 0x8000u;
    inputs.insert(inputs.end(), {tie, tie - 1, tie + 1});
  }
  inputs.insert(inputs.end(), {0x7f7f8000u, 0x7f7fffffu, 0x7f7f7fffu, 0xff7f8000u, 0x00008000u, 0x00018000u});
  for (uint32_t x : inputs) {
    if ((x & 0x7fffffffu) > 0x7f800000u) continue;  // NaN: below
    ASSERT_EQ(float_to_bf16(from_bits(x)), ref_float_to_bf16(from_bits(x))) << std::hex << x;
  }
  EXPECT_EQ(float_to_bf16(from_bits(0x7f7f8000u)), 0x7f80u);  // tie past max: inf
  EXPECT_EQ(float_to_bf16(from_bits(0x3f808000u)), 0x3f80u);  // tie to even (down)
  EXPECT_EQ(float_to_bf16(from_bits(0x3f818000u)), 0x3f82u);  // tie to even (up)
  EXPECT_EQ(float_to_bf16(from_bits(0x7f800001u)), 0x7fc0u);  // sNaN with low payload: quiet
  EXPECT_EQ(float_to_bf16(from_bits(0xffffffffu)), 0xffffu);
}

template <typename T>
void expect_nan_symmetric() {
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T inf = std::numeric_limits<T>::infinity();
  for (T x : {T(0), T(-1), T(3.5), inf, -inf}) {
    EXPECT_TRUE(std::isnan(apply<Op::Min>(nan, x))) << x;
    EXPECT_TRUE(std::isnan(apply<Op::Min>(x, nan))) << x;
    EXPECT_TRUE(std::isnan(apply<Op::Max>(nan, x))) << x;
    EXPECT_TRUE(std::isnan(apply<Op::Max>(x, nan))) << x;
    EXPECT_TRUE(std::isnan(apply<Op::Sum>(x, nan))) << x;
    EXPECT_TRUE(std::isnan(apply<Op::Prod>(nan, x))) << x;
  }
  EXPECT_EQ(apply<Op::Min>(T(2), T(-3)), T(-3));
  EXPECT_EQ(apply<Op::Max>(T(2), T(-3)), T(2));
  EXPECT_EQ(apply<Op::Min>(-inf, T(1)), -inf);
  EXPECT_EQ(apply<Op::Max>(T(1), inf), inf);
}

TEST(ReduceMathTest, MinMaxPropagateNaNFromEitherSide) {
  expect_nan_symmetric<float>();
  expect_nan_symmetric<double>();
  const uint16_t hnan = 0x7e00, h1 = 0x3c00, bnan = 0x7fc0, b1 = 0x3f80;
  for (auto f : {apply_half<Op::Min>(hnan, h1), apply_half<Op::Min>(h1, hnan), apply_half<Op::Max>(hnan, h1),
                 apply_half<Op::Max>(h1, hnan)}) {
    EXPECT_TRUE(std::isnan(half_to_float(f)));
  }
  for (auto f : {apply_bf16<Op::Min>(bnan, b1), apply_bf16<Op::Min>(b1, bnan), apply_bf16<Op::Max>(bnan, b1),
                 apply_bf16<Op::Max>(b1, bnan)}) {
    EXPECT_TRUE(std::isnan(bf16_to_float(f)));
  }
}

TEST(ReduceMathTest, HalfOpsRoundOnce) {
  // 2048 + 1 is a tie in binary16 (spacing 2 there): rounds to even, 2048.
  EXPECT_EQ(apply_half<Op::Sum>(float_to_half(2048.0f), float_to_half(1.0f)), float_to_half(2048.0f));
  EXPECT_EQ(apply_half<Op::Sum>(float_to_half(2050.0f), float_to_half(1.0f)), float_to_half(2052.0f));
  EXPECT_EQ(apply_half<Op::Sum>(0x7bffu, 0x7bffu), 0x7c00u);  // overflow to inf
  EXPECT_EQ(apply_half<Op::Prod>(float_to_half(-3.0f), float_to_half(0.5f)), float_to_half(-1.5f));
  EXPECT_EQ(apply_bf16<Op::Sum>(float_to_bf16(256.0f), float_to_bf16(1.0f)), float_to_bf16(256.0f));
}

// apply_half's min and max return an operand's bits instead of narrowing;
// they must equal the round trip (widen, compare, narrow) for every first
// operand against a spread of second ones (zeros of both signs, subnormals,
// infinities, quiet and signalling NaNs, every exponent).
TEST(ReduceMathTest, HalfMinMaxEqualTheRoundTrip) {
  std::vector<uint16_t> others = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0xbc00,
                                  0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfd55};
  for (uint32_t e = 0; e < 0x10000; e += 0x0111) others.push_back(uint16_t(e));
  for (uint32_t x = 0; x < 0x10000; ++x) {
    const uint16_t a = uint16_t(x);
    for (uint16_t b : others) {
      const float fa = half_to_float(a), fb = half_to_float(b);
      ASSERT_EQ(apply_half<Op::Max>(a, b), float_to_half(apply<Op::Max, float>(fa, fb))) << a << " " << b;
      ASSERT_EQ(apply_half<Op::Min>(a, b), float_to_half(apply<Op::Min, float>(fa, fb))) << a << " " << b;
      ASSERT_EQ(apply_half<Op::Max>(b, a), float_to_half(apply<Op::Max, float>(fb, fa))) << a << " " << b;
    }
  }
}

TEST(ReduceMathTest, IntegersWrapAround) {
  EXPECT_EQ(apply_u8<Op::Sum>(200, 100), 44);
  EXPECT_EQ(apply_u8<Op::Prod>(16, 16), 0);
  EXPECT_EQ(apply_u8<Op::Prod>(255, 255), 1);
  EXPECT_EQ(apply_u8<Op::Min>(3, 250), 3);
  EXPECT_EQ(apply_u8<Op::Max>(3, 250), 250);
  EXPECT_EQ((apply<Op::Sum, uint8_t>(255, 1)), 0);
  EXPECT_EQ((apply<Op::Sum, int32_t>(INT32_MAX, 1)), INT32_MIN);
  EXPECT_EQ((apply<Op::Prod, int32_t>(65536, 65536)), 0);
  EXPECT_EQ((apply<Op::Prod, int32_t>(-1, INT32_MIN)), INT32_MIN);
  EXPECT_EQ((apply<Op::Sum, int64_t>(INT64_MAX, 2)), INT64_MIN + 1);
  EXPECT_EQ((apply<Op::Min, int64_t>(-5, 4)), -5);
}

TEST(ReduceMathTest, DivideTruncatesIntegersTowardZero) {
  EXPECT_EQ(divide_value<int32_t>(-7, 2), -3);
  EXPECT_EQ(divide_value<int32_t>(7, 2), 3);
  EXPECT_EQ(divide_value<int64_t>(-9, 4), -2);
  EXPECT_EQ(divide_value<uint8_t>(255, 2), 127);
  EXPECT_EQ(divide_value<uint8_t>(255, 256), 0);  // divisor not truncated to uint8
  EXPECT_EQ(divide_value<int32_t>(INT32_MIN, 1), INT32_MIN);
  EXPECT_EQ(divide_value<float>(1.0f, 3), 1.0f / 3.0f);
  EXPECT_EQ(divide_value<double>(-1.0, 3), -1.0 / 3.0);
  EXPECT_EQ(divide_half(float_to_half(3.0f), 2), float_to_half(1.5f));
  EXPECT_EQ(divide_bf16(float_to_bf16(-3.0f), 4), float_to_bf16(-0.75f));
}

}  // namespace
}  // namespace gradwire::kernels
