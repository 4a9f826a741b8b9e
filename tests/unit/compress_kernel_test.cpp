// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The compression kernels against the element formulas of
// kernels/compress_math.h (which the CUDA kernels share), and the state
// format's refusal of damaged input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/state_io.h"
#include "gradwire/error.h"
#include "kernels/compress_math.h"
#include "kernels/cpu/compress.h"

namespace gw = gradwire;
namespace k = gradwire::kernels;

namespace {

std::vector<float> randoms(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Lengths around every multiple of 8 and of the AVX2 width, plus a large one.
std::vector<size_t> lengths() {
  std::vector<size_t> out;
  for (size_t n = 0; n <= 70; ++n) out.push_back(n);
  for (size_t n : {127, 128, 129, 1000, 4097, 65543}) out.push_back(n);
  return out;
}

// memcmp that is defined for empty ranges (vector::data() may be null then).
int compare(const void* a, const void* b, size_t n) { return n ? std::memcmp(a, b, n) : 0; }

}  // namespace

TEST(CompressMath, SignBitAndErrorElement) {
  EXPECT_EQ(k::sign_bit(1.0f), 1u);
  EXPECT_EQ(k::sign_bit(0.0f), 1u);
  EXPECT_EQ(k::sign_bit(-0.0f), 1u);
  EXPECT_EQ(k::sign_bit(-1e-30f), 0u);
  EXPECT_EQ(k::sign_bit(std::numeric_limits<float>::quiet_NaN()), 1u);
  float err = 0.25f;
  EXPECT_EQ(k::compress_element(-1.0f, err, 0.5f), 0u);  // c = -0.75 -> -0.5, error -0.25
  EXPECT_FLOAT_EQ(err, -0.25f);
  EXPECT_FLOAT_EQ(k::rms_scale(8.0, 2), 2.0f);
  EXPECT_EQ(k::rms_scale(1.0, 0), 0.0f);
  EXPECT_EQ(k::packed_bytes(0), 0u);
  EXPECT_EQ(k::packed_bytes(9), 2u);
}

// Packing matches the element formula at every length (bit layout, the
// zeroed tail of a partial byte, the error update), and unpacking restores
// exactly +-scale.
TEST(CompressKernels, PackUnpackRoundTripEveryLength) {
  for (size_t n : lengths()) {
    const auto x = randoms(n, uint32_t(n) + 1);
    auto err = randoms(n, uint32_t(n) + 1000, 0.1f);
    auto expect_err = err;
    const float scale = 0.75f;
    std::vector<uint8_t> bits(k::packed_bytes(n) + 1, 0xAA), expect_bits(k::packed_bytes(n), 0);
    for (size_t i = 0; i < n; ++i) {
      expect_bits[i / 8] |= uint8_t(k::compress_element(x[i], expect_err[i], scale) << (i % 8));
    }
    k::compress_signs(x.data(), err.data(), scale, bits.data(), n);
    ASSERT_EQ(0, compare(bits.data(), expect_bits.data(), expect_bits.size())) << "n=" << n;
    EXPECT_EQ(bits.back(), 0xAA) << "wrote past packed_bytes(n), n=" << n;
    ASSERT_EQ(0, compare(err.data(), expect_err.data(), n * sizeof(float))) << "n=" << n;

    std::vector<float> out(n + 1, 42.0f);
    k::decompress_signs(bits.data(), scale, out.data(), n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(out[i], k::sign_value(k::packed_bit(bits.data(), i), scale)) << i;
    }
    EXPECT_EQ(out[n], 42.0f);

    auto acc = randoms(n, 7);
    auto expect_acc = acc;
    for (size_t i = 0; i < n; ++i) expect_acc[i] += k::sign_value(k::packed_bit(bits.data(), i), scale);
    k::accumulate_signs(bits.data(), scale, acc.data(), n);
    ASSERT_EQ(0, compare(acc.data(), expect_acc.data(), n * sizeof(float))) << "n=" << n;
  }
}

TEST(CompressKernels, ErrorFeedbackKeepsTheSum) {
  // c = x + e_old = q + e_new exactly up to one rounding per element.
  const size_t n = 1001;
  const auto x = randoms(n, 3);
  auto err = randoms(n, 4, 0.3f);
  const auto old = err;
  std::vector<uint8_t> bits(k::packed_bytes(n));
  const float scale = k::rms_scale(k::sum_squares(x.data(), err.data(), n), n);
  k::compress_signs(x.data(), err.data(), scale, bits.data(), n);
  for (size_t i = 0; i < n; ++i) {
    const float q = k::sign_value(k::packed_bit(bits.data(), i), scale);
    EXPECT_NEAR(double(q) + err[i], double(x[i]) + old[i], 1e-6 * (1 + std::fabs(x[i] + old[i])));
  }
}

TEST(CompressKernels, SumSquaresMatchesDouble) {
  for (size_t n : lengths()) {
    const auto x = randoms(n, uint32_t(n) + 9);
    const auto e = randoms(n, uint32_t(n) + 99);
    double ref = 0, ref_x = 0;
    for (size_t i = 0; i < n; ++i) {
      const double c = double(x[i] + e[i]);
      ref += c * c;
      ref_x += double(x[i]) * x[i];
    }
    EXPECT_NEAR(k::sum_squares(x.data(), e.data(), n), ref, 1e-12 * (1 + ref)) << n;
    EXPECT_NEAR(k::sum_squares(x.data(), nullptr, n), ref_x, 1e-12 * (1 + ref_x)) << n;
  }
}

TEST(CompressKernels, LowRankProductsMatchNaiveDouble) {
  for (auto [n, m, r] : std::vector<std::tuple<size_t, size_t, size_t>>{
           {1, 1, 1}, {7, 5, 2}, {33, 17, 4}, {64, 129, 3}, {5, 300, 1}}) {
    const auto M = randoms(n * m, uint32_t(n * m));
    const auto Qt = randoms(r * m, 11);
    std::vector<float> Pt(r * n), Qt2(r * m), Mh(n * m);
    k::lowrank_project(M.data(), n, m, Qt.data(), r, Pt.data());
    for (size_t kk = 0; kk < r; ++kk) {
      for (size_t i = 0; i < n; ++i) {
        double s = 0;
        for (size_t j = 0; j < m; ++j) s += double(M[i * m + j]) * Qt[kk * m + j];
        ASSERT_NEAR(Pt[kk * n + i], s, 1e-4 * (1 + std::fabs(s)));
      }
    }
    k::lowrank_project_transposed(M.data(), n, m, Pt.data(), r, Qt2.data());
    for (size_t kk = 0; kk < r; ++kk) {
      for (size_t j = 0; j < m; ++j) {
        double s = 0;
        for (size_t i = 0; i < n; ++i) s += double(Pt[kk * n + i]) * M[i * m + j];
        ASSERT_NEAR(Qt2[kk * m + j], s, 1e-3 * (1 + std::fabs(s)));
      }
    }
    k::lowrank_expand(Pt.data(), Qt2.data(), n, m, r, Mh.data());
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < m; ++j) {
        double s = 0;
        for (size_t kk = 0; kk < r; ++kk) s += double(Pt[kk * n + i]) * Qt2[kk * m + j];
        ASSERT_NEAR(Mh[i * m + j], s, 1e-3 * (1 + std::fabs(s)));
      }
    }
  }
}

TEST(CompressKernels, OrthonormalizeRows) {
  const size_t r = 4, len = 50;
  auto A = randoms(r * len, 5);
  k::orthonormalize_rows(A.data(), r, len, 0.0f);
  for (size_t a = 0; a < r; ++a) {
    for (size_t b = 0; b < r; ++b) {
      double dot = 0;
      for (size_t j = 0; j < len; ++j) dot += double(A[a * len + j]) * A[b * len + j];
      EXPECT_NEAR(dot, a == b ? 1.0 : 0.0, 1e-5) << a << "," << b;
    }
  }
  // A zero row stays zero (no NaN) with epsilon 0; epsilon > 0 divides by norm + eps.
  std::vector<float> Z(2 * 3, 0.0f);
  Z[3] = 2.0f;
  k::orthonormalize_rows(Z.data(), 2, 3, 0.0f);
  for (float v : Z) EXPECT_FALSE(std::isnan(v));
  EXPECT_FLOAT_EQ(Z[3], 1.0f);
  std::vector<float> E = {3.0f, 4.0f};
  k::orthonormalize_rows(E.data(), 1, 2, 1.0f);
  EXPECT_FLOAT_EQ(E[0], 0.5f);  // 3 / (5 + 1)
}

TEST(StateFormat, RoundTripAndRefusals) {
  gw::compress::StateWriter w("Thing");
  w.u64("count", 3);
  w.floats("values", {1.0f, 2.0f, 3.0f});
  const std::string s = w.finish();
  {
    gw::compress::StateReader r(s, "Thing", "test");
    EXPECT_EQ(r.u64("count"), 3u);
    EXPECT_EQ(r.floats("values", 3), (std::vector<float>{1, 2, 3}));
    r.done();
  }
  auto refused = [&](const std::string& state, const char* kind, const char* needle,
                     auto&& read) {
    try {
      gw::compress::StateReader r(state, kind, "test");
      read(r);
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const gw::Error& e) {
      EXPECT_EQ(e.code(), gw::ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  auto read_all = [](gw::compress::StateReader& r) {
    r.u64("count");
    r.floats("values", 3);
    r.done();
  };
  refused(s, "Other", "not a Other state", read_all);
  refused(s.substr(0, s.size() - 5), "Thing", "checksum", read_all);
  refused(s.substr(0, 10), "Thing", "truncated", read_all);
  refused("XXXX" + s.substr(4), "Thing", "bad magic", read_all);
  std::string flipped = s;
  flipped[20] ^= 1;
  refused(flipped, "Thing", "checksum", read_all);
  refused(s, "Thing", "holds 3 floats", [](gw::compress::StateReader& r) {
    r.u64("count");
    r.floats("values", 4);
  });
  refused(s, "Thing", "expected field 'step'", [](gw::compress::StateReader& r) { r.u64("step"); });
  refused(s, "Thing", "unexpected bytes", [](gw::compress::StateReader& r) { r.u64("count"); r.done(); });
}
