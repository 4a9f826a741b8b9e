// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The CUDA reduce/divide (kernels/cuda) against the CPU kernels: both run the
// reduce_math.h formulas, so the results must agree bit for bit (NaN
// payloads of Sum/Prod of two NaNs aside). Skips, saying why, where no GPU
// can be used.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gradwire/types.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cuda/reduce.h"

namespace gradwire::kernels {
namespace {

const size_t kLengths[] = {1, 7, 31, 32, 33, 1000, 4099, 65536 + 17, 1 << 20};

class ReduceGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      GTEST_SKIP() << "no CUDA device: " << cudaGetErrorString(err);
    }
    if (count == 0) GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount returned 0)";
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
  }

  // Device copy of `bytes` (with `offset` bytes of slack in front to make
  // misaligned views), freed with the fixture.
  uint8_t* upload(const std::vector<uint8_t>& host, size_t offset = 0) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, host.size() + offset + 16), cudaSuccess);
    allocations_.emplace_back(p);
    auto* d = static_cast<uint8_t*>(p) + offset;
    EXPECT_EQ(cudaMemcpy(d, host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
    return d;
  }
  std::vector<uint8_t> download(const uint8_t* d, size_t bytes) {
    std::vector<uint8_t> host(bytes);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(host.data(), d, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }
  ~ReduceGpuTest() override {
    for (void* p : allocations_) cudaFree(p);
  }

  cudaStream_t stream_ = nullptr;
  std::vector<void*> allocations_;
};

std::vector<uint8_t> random_bytes(DataType dt, size_t n, std::mt19937_64& rng) {
  std::vector<uint8_t> buf(n * element_size(dt));
  std::uniform_real_distribution<double> val(-100.0, 100.0);
  for (size_t i = 0; i < n; ++i) {
    switch (dt) {
      case DataType::Float32: {
        float f = (float)val(rng);
        if (i % 97 == 5) f = NAN;
        std::memcpy(&buf[4 * i], &f, 4);
        break;
      }
      case DataType::Float64: {
        double f = val(rng);
        if (i % 89 == 3) f = -INFINITY;
        std::memcpy(&buf[8 * i], &f, 8);
        break;
      }
      case DataType::Float16:
      case DataType::BFloat16: {
        uint16_t h = (uint16_t)rng();
        std::memcpy(&buf[2 * i], &h, 2);
        break;
      }
      case DataType::Int32: {
        int32_t v = (int32_t)rng();
        std::memcpy(&buf[4 * i], &v, 4);
        break;
      }
      case DataType::Int64: {
        int64_t v = (int64_t)rng();
        std::memcpy(&buf[8 * i], &v, 8);
        break;
      }
      case DataType::UInt8:
        buf[i] = (uint8_t)rng();
        break;
    }
  }
  return buf;
}

bool is_nan_at(const std::vector<uint8_t>& v, size_t i, DataType dt) {
  uint16_t h;
  switch (dt) {
    case DataType::Float32: {
      float f;
      std::memcpy(&f, &v[4 * i], 4);
      return std::isnan(f);
    }
    case DataType::Float64: {
      double f;
      std::memcpy(&f, &v[8 * i], 8);
      return std::isnan(f);
    }
    case DataType::Float16:
      std::memcpy(&h, &v[2 * i], 2);
      return (h & 0x7fffu) > 0x7c00u;
    case DataType::BFloat16:
      std::memcpy(&h, &v[2 * i], 2);
      return (h & 0x7fffu) > 0x7f80u;
    default:
      return false;
  }
}

// Bit equality; a NaN result matches any NaN (the GPU's canonical NaN
// differs from x86's propagated payloads).
::testing::AssertionResult agree(const std::vector<uint8_t>& gpu, const std::vector<uint8_t>& cpu,
                                 DataType dt) {
  size_t es = element_size(dt), n = cpu.size() / es;
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(&gpu[i * es], &cpu[i * es], es) == 0) continue;
    if (is_nan_at(gpu, i, dt) && is_nan_at(cpu, i, dt)) continue;
    return ::testing::AssertionFailure() << "element " << i << " of " << n << " differs";
  }
  return ::testing::AssertionSuccess();
}

TEST_F(ReduceGpuTest, MatchesCpuForEveryDtypeAndOp) {
  std::mt19937_64 rng(11);
  for (DataType dt : kAllDataTypes) {
    const size_t es = element_size(dt);
    for (ReduceOp op : kAllReduceOps) {
      for (size_t n : kLengths) {
        for (size_t offset : {size_t{0}, es}) {  // 16-byte aligned and not
          auto a = random_bytes(dt, n, rng), b = random_bytes(dt, n, rng);
          std::vector<uint8_t> want(a.size());
          reduce(want.data(), a.data(), b.data(), n, dt, op);
          uint8_t* da = upload(a, offset);
          uint8_t* db = upload(b, offset);
          uint8_t* dd = upload(std::vector<uint8_t>(a.size(), 0), offset);
          cuda::reduce(dd, da, db, n, dt, op, stream_);
          ASSERT_TRUE(agree(download(dd, a.size()), want, dt))
              << to_string(dt) << " " << to_string(op) << " n=" << n << " offset=" << offset;
          cuda::reduce(da, da, db, n, dt, op, stream_);  // in place
          ASSERT_TRUE(agree(download(da, a.size()), want, dt))
              << "in place " << to_string(dt) << " " << to_string(op) << " n=" << n;
        }
      }
    }
  }
}

TEST_F(ReduceGpuTest, DivideMatchesCpu) {
  std::mt19937_64 rng(12);
  for (DataType dt : kAllDataTypes) {
    for (int divisor : {2, 3, 7}) {
      for (size_t n : kLengths) {
        auto v = random_bytes(dt, n, rng);
        auto want = v;
        divide(want.data(), n, dt, divisor);
        uint8_t* dv = upload(v, n % 2 ? element_size(dt) : 0);
        cuda::divide(dv, n, dt, divisor, stream_);
        ASSERT_TRUE(agree(download(dv, v.size()), want, dt))
            << to_string(dt) << " / " << divisor << " n=" << n;
      }
    }
  }
}

}  // namespace
}  // namespace gradwire::kernels
