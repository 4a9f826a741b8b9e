// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The blockwise int8 kernels (kernels/cpu/quantize.h) against a plain
// reference written here from Note [blockwise int8] (double arithmetic,
// std::lrint), at every dtype the quantizer takes, several block sizes,
// odd counts and count 0; the error bound; NaN, inf and zero blocks; error
// feedback over many steps on a fixed input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/quantize.h"
#include "kernels/quantize_math.h"
#include "kernels/reduce_math.h"

namespace k = gradwire::kernels;
using k::QuantType;

namespace {

const QuantType kTypes[] = {QuantType::Float32, QuantType::Float16, QuantType::BFloat16};
const size_t kBlocks[] = {1, 3, 32, 256, 1000, k::kMaxQuantBlock};
const size_t kCounts[] = {0, 1, 7, 255, 256, 257, 1001, 4099};

size_t width(QuantType t) { return t == QuantType::Float32 ? 4 : 2; }

// n elements of type t (normal, with a few blocks of larger magnitude), as
// bytes, and the same values as float32.
std::vector<std::byte> make(QuantType t, size_t n, uint32_t seed, std::vector<float>& as_float) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<std::byte> out(n * width(t));
  as_float.resize(n);
  for (size_t i = 0; i < n; ++i) {
    float v = d(rng) * ((i / 100) % 3 == 1 ? 1000.0f : 1.0f);
    k::quant_store(out.data(), t, i, v);
    as_float[i] = k::quant_load(out.data(), t, i);  // rounded to t
  }
  return out;
}

// v rounded to type t (as quant_store would store it).
float rounded_to(QuantType t, float v) {
  std::byte one[4];
  k::quant_store(one, t, 0, v);
  return k::quant_load(one, t, 0);
}

// The reference, written from the note, not from the kernels' helpers.
void reference(const std::vector<float>& x, size_t block, std::vector<float>& scales,
               std::vector<int8_t>& q) {
  const size_t n = x.size();
  scales.assign((n + block - 1) / block, 0.0f);
  q.assign(n, 0);
  for (size_t b = 0; b * block < n; ++b) {
    const size_t last = std::min(n, (b + 1) * block);
    float amax = 0;
    for (size_t i = b * block; i < last; ++i) {
      if (!std::isnan(x[i])) amax = std::max(amax, std::fabs(x[i]));
    }
    const float scale = amax / 127.0f;
    scales[b] = scale;
    for (size_t i = b * block; i < last; ++i) {
      if (scale == 0.0f || std::isnan(x[i] / scale)) continue;
      const long r = std::lrint(x[i] / scale);
      q[i] = int8_t(std::clamp(r, -127L, 127L));
    }
  }
}

TEST(QuantizeKernel, MatchesReferenceAtEveryDtypeBlockAndCount) {
  for (QuantType t : kTypes) {
    for (size_t block : kBlocks) {
      for (size_t n : kCounts) {
        SCOPED_TRACE(testing::Message() << "type " << int(t) << " block " << block << " n " << n);
        std::vector<float> x;
        const auto src = make(t, n, uint32_t(n * 31 + block), x);
        std::vector<float> ref_scales;
        std::vector<int8_t> ref_q;
        reference(x, block, ref_scales, ref_q);
        std::vector<float> scales(k::quant_blocks(n, block), -1.0f);
        std::vector<int8_t> q(n, 99);
        k::quantize_int8_blocks(src.data(), t, n, block, nullptr, scales.data(), q.data());
        ASSERT_EQ(scales, ref_scales);
        ASSERT_EQ(q, ref_q);
        // Dequantized: q * scale, rounded to t; within half a step of x.
        std::vector<std::byte> out(n * width(t));
        k::dequantize_int8_blocks(q.data(), scales.data(), n, block, t, out.data());
        for (size_t i = 0; i < n; ++i) {
          const float want = rounded_to(t, float(q[i]) * scales[i / block]);
          ASSERT_EQ(k::quant_load(out.data(), t, i), want) << i;
          // Half a quantization step, plus the rounding of q * scale to t.
          const double step = scales[i / block];
          const double slack = t == QuantType::Float32 ? 1e-6 : (t == QuantType::Float16 ? 1e-3 : 8e-3);
          ASSERT_LE(std::fabs(double(want) - double(x[i])),
                    step / 2 * (1 + 1e-6) + slack * std::fabs(double(x[i])))
              << i;
        }
        // Accumulate: acc += q * scale in float32.
        std::vector<float> acc(n, 1.0f);
        k::accumulate_int8_blocks(q.data(), scales.data(), n, block, acc.data());
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(acc[i], 1.0f + float(q[i]) * scales[i / block]) << i;
        }
      }
    }
  }
}

TEST(QuantizeKernel, ZeroNanAndInfinity) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  // Block 0: zeros; block 1: a NaN among finite values; block 2: an inf.
  std::vector<float> x = {0, 0, 0, 0, 1.5f, nan, -127, 0.5f, 3, inf, -1, 2};
  std::vector<float> scales(3);
  std::vector<int8_t> q(x.size(), 99);
  k::quantize_int8_blocks(x.data(), QuantType::Float32, x.size(), 4, nullptr, scales.data(),
                          q.data());
  EXPECT_EQ(scales[0], 0.0f);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(q[i], 0);
  EXPECT_EQ(scales[1], 1.0f);  // the NaN is skipped by amax
  EXPECT_EQ(q[4], 2);          // 1.5 and 0.5: ties to even
  EXPECT_EQ(q[5], 0);
  EXPECT_EQ(q[6], -127);
  EXPECT_EQ(q[7], 0);
  EXPECT_EQ(scales[2], inf);
  for (size_t i = 8; i < 12; ++i) EXPECT_EQ(q[i], 0);
}

// Note [quantization error feedback]: on a fixed input, the sum of what was
// sent over T steps is T * x minus the final error, and the error stays
// within half a step.
TEST(QuantizeKernel, ErrorFeedbackIsBoundedOverManySteps) {
  for (QuantType t : kTypes) {
    const size_t n = 1001, block = 64, steps = 500;
    std::vector<float> x;
    const auto src = make(t, n, 7, x);
    std::vector<float> error(n, 0.0f), scales(k::quant_blocks(n, block));
    std::vector<int8_t> q(n);
    std::vector<double> sent(n, 0.0);
    double max_scale = 0;
    for (size_t s = 0; s < steps; ++s) {
      k::quantize_int8_blocks(src.data(), t, n, block, error.data(), scales.data(), q.data());
      for (size_t i = 0; i < n; ++i) {
        sent[i] += double(k::dequantize_int8(q[i], scales[i / block]));
        max_scale = std::max(max_scale, double(scales[i / block]));
      }
    }
    for (size_t i = 0; i < n; ++i) {
      const double truth = double(steps) * double(x[i]);
      // One quantization step (the error's bound is half of one), plus the
      // float32 rounding of c = x + e and e = c - q*scale over the steps.
      const double tol = double(scales[i / block]) + 1e-5 * std::fabs(truth);
      ASSERT_LE(std::fabs(sent[i] - truth), tol) << "type " << int(t) << " element " << i;
      ASSERT_LE(std::fabs(double(error[i])), double(scales[i / block]) * 0.5 * (1 + 1e-5) + 1e-6)
          << i;
    }
    // Without error feedback the same input drifts: T times the same error.
    std::vector<int8_t> q0(n);
    k::quantize_int8_blocks(src.data(), t, n, block, nullptr, scales.data(), q0.data());
    double worst = 0;
    for (size_t i = 0; i < n; ++i) {
      const double once = double(k::dequantize_int8(q0[i], scales[i / block])) - double(x[i]);
      worst = std::max(worst, std::fabs(double(steps) * once));
    }
    EXPECT_GT(worst, 10 * max_scale) << "the check above could not fail";
  }
}

TEST(QuantizeKernel, StoreScaled) {
  const std::vector<float> acc = {1.0f, -3.0f, 1e-3f, 65504.0f};
  for (QuantType t : kTypes) {
    std::vector<std::byte> out(acc.size() * width(t));
    k::store_scaled(acc.data(), 0.5f, acc.size(), t, out.data());
    for (size_t i = 0; i < acc.size(); ++i) {
      EXPECT_EQ(k::quant_load(out.data(), t, i), rounded_to(t, acc[i] * 0.5f));
    }
  }
}

}  // namespace
