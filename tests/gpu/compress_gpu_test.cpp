// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The CUDA compression kernels against their CPU twins (kernels/cpu/
// compress.h, quantize.h): the sign kernels, casts and int8 quantization
// must agree bit for bit (same element math), the products and the
// orthonormalisation within float rounding. Skips, saying why, where no GPU can be used.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/compress_math.h"
#include "kernels/cpu/compress.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cuda/compress.h"
#include "kernels/cuda/quantize.h"

namespace gradwire::kernels {
namespace {

const size_t kLengths[] = {1, 7, 8, 31, 32, 33, 63, 1000, 4099, 65536 + 17};

std::vector<float> randoms(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

class CompressGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) GTEST_SKIP() << "no CUDA device: " << cudaGetErrorString(err);
    if (count == 0) GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount returned 0)";
  }
  void TearDown() override {
    for (void* p : allocations_) cudaFree(p);
  }
  template <typename T>
  T* upload(const std::vector<T>& host) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(T) + 16), cudaSuccess);
    allocations_.push_back(p);
    if (!host.empty()) cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
    return static_cast<T*>(p);
  }
  template <typename T>
  std::vector<T> download(const T* d, size_t n) {
    std::vector<T> out(n);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (n) cudaMemcpy(out.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost);
    return out;
  }
  std::vector<void*> allocations_;
};

TEST_F(CompressGpuTest, SignKernelsMatchTheCpuBitForBit) {
  for (size_t n : kLengths) {
    SCOPED_TRACE(n);
    const auto x = randoms(n, uint32_t(n));
    auto err = randoms(n, uint32_t(n) + 1);
    float* dx = upload(x);
    float* derr = upload(err);
    double* dsum = upload(std::vector<double>(1));
    float* dscale = upload(std::vector<float>(1));
    uint8_t* dbits = upload(std::vector<uint8_t>(packed_bytes(n) + 4, 0xAA));
    cuda::rms_scale(dx, derr, n, dsum, dscale, nullptr);
    const float gpu_scale = download(dscale, 1)[0];
    const float cpu_scale = rms_scale(sum_squares(x.data(), err.data(), n), n);
    EXPECT_NEAR(gpu_scale, cpu_scale, 1e-6 * cpu_scale);
    // Same scale for both sides from here on, so the bits must match exactly.
    cudaMemcpy(dscale, &cpu_scale, sizeof(float), cudaMemcpyHostToDevice);
    cuda::compress_signs(dx, derr, dscale, dbits, n, nullptr);
    std::vector<uint8_t> bits(packed_bytes(n));
    compress_signs(x.data(), err.data(), cpu_scale, bits.data(), n);
    const auto gbits = download(dbits, packed_bytes(n) + 4);
    EXPECT_EQ(0, std::memcmp(gbits.data(), bits.data(), bits.size()));
    EXPECT_EQ(gbits[packed_bytes(n)], 0xAA) << "wrote past packed_bytes(n)";
    EXPECT_EQ(download(derr, n), err);
    std::vector<float> out(n, 1.0f);
    float* dout = upload(out);
    cuda::decompress_signs(dbits, dscale, 0.5f, dout, n, /*accumulate=*/true, nullptr);
    accumulate_signs(bits.data(), cpu_scale * 0.5f, out.data(), n);
    EXPECT_EQ(download(dout, n), out);
  }
}

TEST_F(CompressGpuTest, CastsMatchTheCpu) {
  for (size_t n : kLengths) {
    const auto x = randoms(n, 9);
    std::vector<uint16_t> h(n), b(n);
    float_to_half(h.data(), x.data(), n);
    float_to_bf16(b.data(), x.data(), n);
    float* dx = upload(x);
    uint16_t* dh = upload(std::vector<uint16_t>(n));
    uint16_t* db = upload(std::vector<uint16_t>(n));
    cuda::float_to_half(dh, dx, n, nullptr);
    cuda::float_to_bf16(db, dx, n, nullptr);
    EXPECT_EQ(download(dh, n), h);
    EXPECT_EQ(download(db, n), b);
    std::vector<float> wide(n);
    half_to_float(wide.data(), h.data(), n);
    float* dw = upload(std::vector<float>(n));
    cuda::half_to_float(dw, dh, n, nullptr);
    EXPECT_EQ(download(dw, n), wide);
  }
}

// The products within float rounding of the CPU (their sums run in another
// order), the expansion and the residual bit for bit (Note [rounded as
// written]), on shapes that take every path of lowrank.cu: one slice and
// several, ranks in one pass and in two, rows shorter and longer than a
// shared-memory tile, a matrix of one row and of one column.
TEST_F(CompressGpuTest, PowerSgdProductsAndOrthonormalisation) {
  struct Shape {
    size_t n, m, r;
  };
  // {4099, 128, 4} and {1027, 2052, 8}: the 16-byte expansion with row
  // ranges that do not divide into its rows per iteration.
  const Shape shapes[] = {{65, 33, 4},   {1, 700, 2},    {700, 1, 1},    {3000, 9, 4},
                          {40, 1300, 6}, {257, 515, 3},  {5000, 64, 9},  {4099, 128, 4},
                          {1027, 2052, 8}};
  void* scratch = nullptr;
  ASSERT_EQ(cudaMalloc(&scratch, cuda::lowrank_scratch_bytes()), cudaSuccess);
  allocations_.push_back(scratch);
  uint32_t seed = 1;
  for (const Shape& sh : shapes) {
    SCOPED_TRACE(testing::Message() << sh.n << " x " << sh.m << ", rank " << sh.r);
    const size_t n = sh.n, m = sh.m, r = sh.r;
    const auto M = randoms(n * m, seed++);
    auto Qt = randoms(r * m, seed++);
    orthonormalize_rows(Qt.data(), r, m, 0.0f);
    std::vector<float> Pt(r * n), Q2(r * m), Mh(n * m);
    lowrank_project(M.data(), n, m, Qt.data(), r, Pt.data());
    float* dM = upload(M);
    float* dQ = upload(Qt);
    float* dP = upload(std::vector<float>(r * n));
    cuda::lowrank_project(dM, n, m, dQ, r, dP, nullptr);
    const double tol_p = 1e-5 * std::sqrt(double(m));
    auto gP = download(dP, r * n);
    for (size_t i = 0; i < gP.size(); ++i) ASSERT_NEAR(gP[i], Pt[i], tol_p * (1 + std::fabs(Pt[i])));
    orthonormalize_rows(Pt.data(), r, n, 0.0f);
    cudaMemcpy(dP, Pt.data(), Pt.size() * sizeof(float), cudaMemcpyHostToDevice);
    lowrank_project_transposed(M.data(), n, m, Pt.data(), r, Q2.data());
    cuda::lowrank_project_transposed(dM, n, m, dP, r, dQ, scratch, nullptr);
    const double tol_q = 1e-5 * std::sqrt(double(n));
    auto gQ = download(dQ, r * m);
    for (size_t i = 0; i < gQ.size(); ++i) ASSERT_NEAR(gQ[i], Q2[i], tol_q * (1 + std::fabs(Q2[i])));
    // The same P and Q in: the same bits out.
    cudaMemcpy(dQ, Q2.data(), Q2.size() * sizeof(float), cudaMemcpyHostToDevice);
    lowrank_expand(Pt.data(), Q2.data(), n, m, r, Mh.data());
    float* dMh = upload(std::vector<float>(n * m));
    cuda::lowrank_expand(dP, dQ, n, m, r, dMh, nullptr);
    ASSERT_EQ(download(dMh, n * m), Mh);
    // The one- and eight-row schedules (Note [rows in flight]) give the same bits.
    for (int rows : {1, 8}) {
      cudaMemset(dMh, 0, n * m * sizeof(float));
      cuda::lowrank_expand_rows(dP, dQ, n, m, r, dMh, rows, nullptr);
      ASSERT_EQ(download(dMh, n * m), Mh) << rows << " rows per iteration";
    }
    // error = input - approx * share, bit for bit.
    std::vector<float> err(n * m);
    for (size_t i = 0; i < err.size(); ++i) err[i] = powersgd_residual(M[i], Mh[i], 0.5f);
    float* dE = upload(std::vector<float>(n * m));
    cuda::powersgd_residual(dM, dMh, 0.5f, n * m, dE, nullptr);
    ASSERT_EQ(download(dE, n * m), err);
  }
  // Orthonormalisation on the device, in the CPU's order and precision.
  const size_t r = 4;
  auto A = randoms(r * 1000, 3), B = A;
  float* dA = upload(A);
  cuda::orthonormalize_rows(dA, r, 1000, 1e-8f, nullptr);
  orthonormalize_rows(B.data(), r, 1000, 1e-8f);
  auto gA = download(dA, A.size());
  for (size_t i = 0; i < gA.size(); ++i) ASSERT_NEAR(gA[i], B[i], 1e-5);
}

// The blockwise int8 kernels (kernels/cuda/quantize.h): the same scales,
// bytes, error buffers and outputs as the CPU's, bit for bit (a block's amax
// is exact in any order).
TEST_F(CompressGpuTest, QuantizeSameBytesAsTheCpu) {
  const QuantType types[] = {QuantType::Float32, QuantType::Float16, QuantType::BFloat16};
  for (QuantType t : types) {
    const size_t w = t == QuantType::Float32 ? 4 : 2;
    for (size_t block : {size_t(1), size_t(3), size_t(256), size_t(1000), kMaxQuantBlock}) {
      for (size_t n : {size_t(0), size_t(1), size_t(257), size_t(4099), size_t(200003)}) {
        SCOPED_TRACE(testing::Message() << "type " << int(t) << " block " << block << " n " << n);
        std::mt19937 rng(uint32_t(n + block));
        std::normal_distribution<float> d;
        std::vector<std::byte> src(n * w);
        std::vector<float> error(n);
        for (size_t i = 0; i < n; ++i) {
          quant_store(src.data(), t, i, d(rng) * ((i / 100) % 3 == 1 ? 1000.0f : 1.0f));
          error[i] = d(rng) * 0.01f;
        }
        const size_t nb = quant_blocks(n, block);
        std::vector<float> scales(nb), cpu_error = error;
        std::vector<int8_t> q(n);
        quantize_int8_blocks(src.data(), t, n, block, cpu_error.data(), scales.data(), q.data());
        std::vector<std::byte> out(n * w);
        dequantize_int8_blocks(q.data(), scales.data(), n, block, t, out.data());
        std::vector<float> acc(n, 0.5f);
        accumulate_int8_blocks(q.data(), scales.data(), n, block, acc.data());

        auto* d_src = upload(src);
        auto* d_error = upload(error);
        auto* d_scales = upload(std::vector<float>(nb));
        auto* d_q = upload(std::vector<int8_t>(n));
        auto* d_out = upload(std::vector<std::byte>(n * w));
        auto* d_acc = upload(std::vector<float>(n, 0.5f));
        cuda::quantize_int8_blocks(d_src, t, n, block, d_error, d_scales, d_q, nullptr);
        cuda::dequantize_int8_blocks(d_q, d_scales, n, block, t, d_out, nullptr);
        cuda::accumulate_int8_blocks(d_q, d_scales, n, block, d_acc, nullptr);
        ASSERT_EQ(download(d_scales, nb), scales);
        ASSERT_EQ(download(d_q, n), q);
        ASSERT_EQ(download(d_error, n), cpu_error);
        ASSERT_EQ(download(d_out, n * w), out);
        ASSERT_EQ(download(d_acc, n), acc);
        // Without error feedback, and the final conversion.
        quantize_int8_blocks(src.data(), t, n, block, nullptr, scales.data(), q.data());
        cuda::quantize_int8_blocks(d_src, t, n, block, nullptr, d_scales, d_q, nullptr);
        ASSERT_EQ(download(d_scales, nb), scales);
        ASSERT_EQ(download(d_q, n), q);
        store_scaled(acc.data(), 0.25f, n, t, out.data());
        cuda::store_scaled(d_acc, 0.25f, n, t, d_out, nullptr);
        ASSERT_EQ(download(d_out, n * w), out);
      }
    }
  }
}

}  // namespace
}  // namespace gradwire::kernels
