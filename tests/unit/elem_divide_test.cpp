// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The __host__ __device__ element function the device-bucket kernel
// (kernels/cuda/scale.cu) runs, Elem<dt>::divide, against the CPU
// copy_divided (src/reducer/scale.cpp) that the host Buckets use: both must
// give the same bits for every input (Note [shared element math]), so a
// device Bucket holds what a host Bucket would.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/elem.h"
#include "reducer/scale.h"

namespace gradwire::kernels {
namespace {

template <DataType dt>
void expect_twins(const std::vector<typename Elem<dt>::S>& in, int divisor) {
  using S = typename Elem<dt>::S;
  std::vector<S> cpu(in.size());
  reducer::copy_divided(cpu.data(), in.data(), in.size(), dt, divisor);
  for (size_t i = 0; i < in.size(); ++i) {
    const S elem = Elem<dt>::divide(in[i], divisor);
    // NaNs: any NaN matches any NaN (payloads are not part of the contract).
    if constexpr (std::is_floating_point_v<S>) {
      if (std::isnan(elem) && std::isnan(cpu[i])) continue;
    } else {
      const uint16_t inf = dt == DataType::Float16 ? 0x7c00u : 0x7f80u;
      if ((elem & 0x7fffu) > inf && (cpu[i] & 0x7fffu) > inf) continue;
    }
    ASSERT_EQ(0, std::memcmp(&elem, &cpu[i], sizeof(S)))
        << to_string(dt) << " element " << i << " / " << divisor;
  }
}

std::vector<uint16_t> all_16_bit_patterns() {
  std::vector<uint16_t> v(65536);
  for (size_t i = 0; i < v.size(); ++i) v[i] = uint16_t(i);
  return v;
}

TEST(ElemDivideTest, HalfAndBf16MatchCopyDividedForEveryInput) {
  const auto all = all_16_bit_patterns();
  for (int divisor : {1, 2, 3, 5, 7, 8, 1000}) {
    expect_twins<DataType::Float16>(all, divisor);
    expect_twins<DataType::BFloat16>(all, divisor);
  }
}

TEST(ElemDivideTest, Float32AndFloat64MatchCopyDivided) {
  std::mt19937_64 rng(7);
  std::vector<float> f(100003);
  std::vector<double> d(f.size());
  for (size_t i = 0; i < f.size(); ++i) {
    uint32_t u = uint32_t(rng());  // every bit pattern: subnormals, inf, NaN
    std::memcpy(&f[i], &u, 4);
    uint64_t w = rng();
    std::memcpy(&d[i], &w, 8);
  }
  for (int divisor : {1, 2, 3, 7, 64, 1 << 20}) {
    expect_twins<DataType::Float32>(f, divisor);
    expect_twins<DataType::Float64>(d, divisor);
  }
}

TEST(ElemDivideTest, KnownValues) {
  EXPECT_EQ(Elem<DataType::Float32>::divide(3.0f, 2), 1.5f);
  EXPECT_EQ(Elem<DataType::Float64>::divide(-1.0, 4), -0.25);
  EXPECT_EQ(Elem<DataType::Float16>::divide(float_to_half(6.0f), 4), float_to_half(1.5f));
  EXPECT_EQ(Elem<DataType::BFloat16>::divide(float_to_bf16(-6.0f), 3), float_to_bf16(-2.0f));
  // The smallest half subnormal halves to zero (round to nearest even).
  EXPECT_EQ(Elem<DataType::Float16>::divide(uint16_t{1}, 2), uint16_t{0});
  EXPECT_EQ(Elem<DataType::Float16>::divide(uint16_t{0x7c00}, 3), uint16_t{0x7c00});  // inf
}

}  // namespace
}  // namespace gradwire::kernels
