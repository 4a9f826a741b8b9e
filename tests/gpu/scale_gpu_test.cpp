// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The device-bucket copy kernel (kernels/cuda/scale.cu) against its CPU twin
// reducer::copy_divided: same bits for every floating dtype, divisor, length
// (including lengths not a multiple of 32 and of the 16-byte pack) and
// alignment, in place and not. Skips, saying why, without a CUDA device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gradwire/error.h"
#include "gpu_util.h"
#include "kernels/cuda/scale.h"
#include "kernels/reduce_math.h"
#include "reducer/scale.h"

namespace gradwire {
namespace {

const size_t kLengths[] = {1, 7, 31, 32, 33, 1000, 4099, 65536 + 17, 1 << 20};
const DataType kFloats[] = {DataType::Float32, DataType::Float64, DataType::Float16,
                            DataType::BFloat16};

class ScaleGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = gwgpu::no_device_reason(); !why.empty()) GTEST_SKIP() << why;
  }
};

std::vector<uint8_t> random_floats(DataType dt, size_t n, std::mt19937_64& rng) {
  std::vector<uint8_t> b(n * element_size(dt));
  std::uniform_real_distribution<double> val(-1e4, 1e4);
  for (size_t i = 0; i < n; ++i) {
    const double x = (i % 101 == 3) ? NAN : val(rng);
    switch (dt) {
      case DataType::Float32: { float f = float(x); std::memcpy(&b[4 * i], &f, 4); break; }
      case DataType::Float64: std::memcpy(&b[8 * i], &x, 8); break;
      case DataType::Float16: { uint16_t h = kernels::float_to_half(float(x)); std::memcpy(&b[2 * i], &h, 2); break; }
      case DataType::BFloat16: { uint16_t h = kernels::float_to_bf16(float(x)); std::memcpy(&b[2 * i], &h, 2); break; }
      default: break;
    }
  }
  return b;
}

bool is_nan(const uint8_t* p, DataType dt) {
  uint16_t h;
  switch (dt) {
    case DataType::Float32: { float f; std::memcpy(&f, p, 4); return std::isnan(f); }
    case DataType::Float64: { double f; std::memcpy(&f, p, 8); return std::isnan(f); }
    case DataType::Float16: std::memcpy(&h, p, 2); return (h & 0x7fffu) > 0x7c00u;
    case DataType::BFloat16: std::memcpy(&h, p, 2); return (h & 0x7fffu) > 0x7f80u;
    default: return false;
  }
}

::testing::AssertionResult same_bits(const std::vector<uint8_t>& gpu,
                                     const std::vector<uint8_t>& cpu, DataType dt) {
  const size_t es = element_size(dt);
  for (size_t i = 0; i < cpu.size() / es; ++i) {
    if (std::memcmp(&gpu[i * es], &cpu[i * es], es) == 0) continue;
    if (is_nan(&gpu[i * es], dt) && is_nan(&cpu[i * es], dt)) continue;
    return ::testing::AssertionFailure() << "element " << i << " differs";
  }
  return ::testing::AssertionSuccess();
}

TEST_F(ScaleGpuTest, CopyDividedMatchesCpuTwin) {
  std::mt19937_64 rng(5);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  for (DataType dt : kFloats) {
    const size_t es = element_size(dt);
    for (int divisor : {1, 2, 3, 7}) {
      for (size_t n : kLengths) {
        for (size_t offset : {size_t{0}, es}) {  // 16-byte aligned and not
          auto in = random_floats(dt, n, rng);
          std::vector<uint8_t> want(in.size());
          reducer::copy_divided(want.data(), in.data(), n, dt, divisor);
          gwgpu::DeviceBuffer src(in.size(), offset), dst(in.size());
          src.upload(in);
          kernels::cuda::copy_divided(dst.get(), src.get(), n, dt, divisor, stream);
          ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
          ASSERT_TRUE(same_bits(dst.download<uint8_t>(), want, dt))
              << to_string(dt) << " / " << divisor << " n=" << n << " offset=" << offset;
          kernels::cuda::copy_divided(src.get(), src.get(), n, dt, divisor, stream);  // in place
          ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
          ASSERT_TRUE(same_bits(src.download<uint8_t>(), want, dt))
              << "in place " << to_string(dt) << " / " << divisor << " n=" << n;
        }
      }
    }
  }
  cudaStreamDestroy(stream);
}

TEST_F(ScaleGpuTest, RejectsIntegersAndBadDivisors) {
  gwgpu::DeviceBuffer b(64);
  try {
    kernels::cuda::copy_divided(b.get(), b.get(), 16, DataType::Int32, 2, nullptr);
    FAIL() << "integers accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  }
  EXPECT_THROW(kernels::cuda::copy_divided(b.get(), b.get(), 16, DataType::Float32, 0, nullptr), Error);
}

}  // namespace
}  // namespace gradwire
