// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Device Buckets (Note [device Buckets] in src/reducer/device.h): the
// Reducer over CUDA gradients, against the averages computed on the host.
// Gradients are produced on a non-blocking stream behind a long memset, so
// a Reducer that did not follow the gradient's stream would copy stale
// values; results are read on the stream given to finalize(), so a
// write-back that did not follow it would be read half-done. Runs at world
// size 1 and, under gwlaunch with one GPU per rank, at world size 2.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_util.h"
#include "gradwire/compress.h"
#include "gradwire/error.h"
#include "gradwire/reducer.h"
#include "kernels/reduce_math.h"

namespace gradwire {
namespace {

class ReducerGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gwgpu::World& w = gwgpu::world();
    if (!w.skip.empty()) GTEST_SKIP() << w.skip;
    comm_ = w.comm.get();
    device_ = w.device;
    cudaSetDevice(device_);
    ASSERT_EQ(cudaStreamCreateWithFlags(&produce_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&consume_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&delay_, kDelayBytes), cudaSuccess);
  }
  void TearDown() override {
    free_pinned();
    if (delay_) cudaFree(delay_);
    if (produce_) cudaStreamDestroy(produce_);
    if (consume_) cudaStreamDestroy(consume_);
  }

  // Keeps `s` busy for a while (hundreds of microseconds) before what follows.
  void delay(cudaStream_t s) {
    for (int k = 0; k < 4; ++k) ASSERT_EQ(cudaMemsetAsync(delay_, k, kDelayBytes, s), cudaSuccess);
  }

  // Uploads this rank's step-`step` gradients on produce_, after a delay.
  // Pinned, so the upload really is asynchronous (a pageable source would
  // make cudaMemcpyAsync wait for the delay first); freed by TearDown or the
  // next produce(), once produce_ drained.
  void produce(const std::vector<void*>& ptr, const std::vector<GradientInfo>& gs, int step);
  void free_pinned() {
    cudaStreamSynchronize(produce_);
    for (void* p : pinned_) cudaFreeHost(p);
    pinned_.clear();
  }
  std::vector<void*> pinned_;

  static constexpr size_t kDelayBytes = size_t(256) << 20;
  Communicator* comm_ = nullptr;
  int device_ = 0;
  cudaStream_t produce_ = nullptr, consume_ = nullptr;
  void* delay_ = nullptr;
};

// A gradient value every dtype holds exactly, different per rank, step, element.
double grad_value(int rank, int step, size_t g, size_t i) {
  return double(int((i * 7 + g * 5 + size_t(rank) * 3 + size_t(step) * 11) % 9) - 4);
}

using gwgpu::decode_one;
using gwgpu::encode;

// The average over ranks of gradient g's elements [first, first + got's
// length), with the tolerance of dividing before summing in the dtype
// (exact for a world of one or two).
void expect_average(DataType dt, const std::vector<uint8_t>& got, int world, int step,
                    size_t g, bool used_on_rank0_only, const char* what,
                    bool wire16 = false, size_t first = 0) {
  const size_t es = element_size(dt), n = got.size() / es;
  const double tol = world <= 2 ? 0 : (es == 2 || wire16 ? 2e-2 : 1e-6);
  size_t bad = 0;
  for (size_t k = 0; k < n && bad < 5; ++k) {
    const size_t i = first + k;
    double want = 0;
    for (int r = 0; r < world; ++r) {
      if (used_on_rank0_only && r != 0) continue;
      want += grad_value(r, step, g, i);
    }
    want /= world;
    const double have = decode_one(dt, &got[k * es]);
    if (std::fabs(have - want) > tol * std::max(1.0, std::fabs(want))) {
      ADD_FAILURE() << what << ": gradient " << g << " (" << to_string(dt) << ") element " << i
                    << " step " << step << ": " << have << " != " << want;
      ++bad;
    }
  }
}

// Device memory for the device gradients of `gs` (nullptr for host ones).
struct DeviceGrads {
  DeviceGrads() = default;
  explicit DeviceGrads(const std::vector<GradientInfo>& gs) {
    for (const auto& g : gs) {
      ptr.push_back(nullptr);
      if (g.device.is_cuda()) {
        EXPECT_EQ(cudaMalloc(&ptr.back(), g.elements * element_size(g.dtype) + 1), cudaSuccess);
      }
    }
  }
  ~DeviceGrads() {
    for (void* p : ptr) cudaFree(p);
  }
  std::vector<void*> ptr;
};

const std::vector<GradientInfo> kGradients = {
    {1000, DataType::Float32, Device::cuda(0), "fc.weight"}, {33, DataType::Float64, Device::cuda(0), "fc.bias"},
    {65537, DataType::Float16, Device::cuda(0), "embed.weight"}, {1, DataType::BFloat16, Device::cuda(0), "scale"},
    {0, DataType::Float32, Device::cuda(0), "empty"}, {70001, DataType::Float32, Device::cuda(0), "big.weight"},
    {513, DataType::BFloat16, Device::cuda(0), "norm.weight"}};

std::vector<GradientInfo> on_device(int device, std::vector<GradientInfo> gs = kGradients) {
  for (auto& g : gs) g.device = Device::cuda(device);
  return gs;
}

void ReducerGpuTest::produce(const std::vector<void*>& ptr, const std::vector<GradientInfo>& gs,
                             int step) {
  free_pinned();
  delay(produce_);
  for (size_t g = 0; g < gs.size(); ++g) {
    std::vector<double> v(gs[g].elements);
    for (size_t i = 0; i < v.size(); ++i) v[i] = grad_value(comm_->rank(), step, g, i);
    const std::vector<uint8_t> bytes = encode(gs[g].dtype, v);
    if (bytes.empty()) continue;
    void* pinned = nullptr;
    ASSERT_EQ(cudaMallocHost(&pinned, bytes.size()), cudaSuccess);
    pinned_.push_back(pinned);
    std::memcpy(pinned, bytes.data(), bytes.size());
    ASSERT_EQ(cudaMemcpyAsync(ptr[g], pinned, bytes.size(), cudaMemcpyHostToDevice, produce_),
              cudaSuccess);
  }
}

std::vector<uint8_t> download(const void* p, size_t bytes, cudaStream_t s) {
  std::vector<uint8_t> out(bytes);
  if (bytes) EXPECT_EQ(cudaMemcpyAsync(out.data(), p, bytes, cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  return out;
}

TEST_F(ReducerGpuTest, AveragesEveryDtypeOnTheGradientsStreams) {
  const auto gs = on_device(device_);
  ReducerOptions opt;
  opt.caps = BucketCaps{4096, 64 << 10};  // several Buckets, rebuilt after step 0
  Reducer r(*comm_, gs, opt);
  DeviceGrads d(gs);
  const uint64_t gen0 = r.plan_generation();
  for (int step = 0; step < 3; ++step) {
    produce(d.ptr, gs, step);
    // Forward registration order: not the plan's guess, so step 0 rebuilds.
    for (size_t g = 0; g < gs.size(); ++g) r.mark_ready(g, d.ptr[g], Stream(produce_));
    delay(consume_);  // the write-back must wait for this too
    r.finalize(Stream(consume_));
    for (size_t g = 0; g < gs.size(); ++g) {
      const auto got = download(d.ptr[g], gs[g].elements * element_size(gs[g].dtype), consume_);
      expect_average(gs[g].dtype, got, comm_->size(), step, g, false, "mark_ready(i, grad, stream)");
    }
  }
  EXPECT_EQ(r.step(), 3u);
  EXPECT_EQ(r.plan_generation(), gen0 + 1) << "step 0's order differs from the guess: one rebuild";
  EXPECT_GT(r.plan().buckets.size(), 2u);
}

TEST_F(ReducerGpuTest, BucketViewsScaleInPlaceAndSurviveTheRebuild) {
  const auto gs = on_device(device_);
  ReducerOptions opt;
  opt.caps = BucketCaps{4096, 64 << 10};
  opt.gradient_as_bucket_view = true;
  Reducer r(*comm_, gs, opt);
  for (int step = 0; step < 3; ++step) {
    std::vector<void*> views;
    for (size_t g = 0; g < gs.size(); ++g) views.push_back(r.bucket_view(g));
    produce(views, gs, step);
    const uint64_t gen = r.plan_generation();
    for (size_t g = 0; g < gs.size(); ++g) r.mark_ready(g, nullptr, Stream(produce_));
    r.finalize(Stream(consume_));
    if (step == 0) EXPECT_EQ(r.plan_generation(), gen + 1);
    // After a rebuild the views moved and carry the step's results.
    for (size_t g = 0; g < gs.size(); ++g) {
      const auto got = download(r.bucket_view(g), gs[g].elements * element_size(gs[g].dtype), consume_);
      expect_average(gs[g].dtype, got, comm_->size(), step, g, false, "bucket view");
    }
  }
}

TEST_F(ReducerGpuTest, UnusedParametersContributeZerosAndShardedModeWritesBack) {
  for (bool sharded : {false, true}) {
    SCOPED_TRACE(sharded ? "sharded" : "allreduce");
    const auto gs = on_device(device_);
    ReducerOptions opt;
    opt.caps = BucketCaps{4096, 64 << 10};
    opt.find_unused_parameters = true;
    opt.sharded = sharded;
    Reducer r(*comm_, gs, opt);
    DeviceGrads d(gs);
    for (size_t g = 0; g < gs.size(); ++g) r.set_gradient_buffer(g, d.ptr[g]);
    for (int step = 0; step < 2; ++step) {
      produce(d.ptr, gs, step);
      // Gradients 1 and 5 are used on rank 0 only: the others contribute zeros.
      for (size_t g = 0; g < gs.size(); ++g) {
        if ((g == 1 || g == 5) && comm_->rank() != 0) continue;
        r.mark_ready(g, nullptr, Stream(produce_));
      }
      r.finalize(Stream(consume_));
      for (size_t g = 0; g < gs.size(); ++g) {
        const size_t es = element_size(gs[g].dtype);
        const auto got = download(d.ptr[g], gs[g].elements * es, consume_);
        const bool rank0_only = g == 1 || g == 5;
        if (!sharded || step == 0) {  // step 0 rebuilds: every rank gets every element
          expect_average(gs[g].dtype, got, comm_->size(), step, g, rank0_only,
                         "unused/sharded");
        }
      }
      if (sharded && step == 1) {
        // Without a rebuild only this rank's shard pieces are averages.
        for (size_t b = 0; b < r.plan().buckets.size(); ++b) {
          const Reducer::Shard sh = r.shard(b);
          for (const auto& p : sh.pieces) {
            const size_t es = element_size(gs[p.gradient].dtype);
            const auto all = download(d.ptr[p.gradient], gs[p.gradient].elements * es, consume_);
            std::vector<uint8_t> piece(all.begin() + p.offset * es,
                                         all.begin() + (p.offset + p.count) * es);
            expect_average(gs[p.gradient].dtype, piece, comm_->size(), step, p.gradient,
                           p.gradient == 1 || p.gradient == 5, "shard piece", false, p.offset);
          }
        }
      }
    }
  }
}

TEST_F(ReducerGpuTest, HostAndDeviceGradientsInOneReducer) {
  std::vector<GradientInfo> gs = on_device(device_);
  gs[1].device = Device::host();  // fc.bias stays in host memory
  gs[3].device = Device::host();
  ReducerOptions opt;
  opt.caps = BucketCaps{4096, 64 << 10};
  opt.shared_buckets = false;
  Reducer r(*comm_, gs, opt);
  DeviceGrads d(gs);
  std::vector<std::vector<uint8_t>> host_grads(gs.size());
  for (int step = 0; step < 2; ++step) {
    std::vector<std::vector<uint8_t>> staged(gs.size());
    for (size_t g = 0; g < gs.size(); ++g) {
      std::vector<double> v(gs[g].elements);
      for (size_t i = 0; i < v.size(); ++i) v[i] = grad_value(comm_->rank(), step, g, i);
      staged[g] = encode(gs[g].dtype, v);
      if (gs[g].device.is_host()) {
        host_grads[g] = staged[g];
      } else if (!staged[g].empty()) {
        ASSERT_EQ(cudaMemcpyAsync(d.ptr[g], staged[g].data(), staged[g].size(), cudaMemcpyHostToDevice, produce_), cudaSuccess);
      }
    }
    for (size_t g = 0; g < gs.size(); ++g) {
      r.mark_ready(g, gs[g].device.is_host() ? static_cast<void*>(host_grads[g].data()) : d.ptr[g], Stream(produce_));
    }
    r.finalize(Stream(consume_));
    ASSERT_EQ(cudaStreamSynchronize(consume_), cudaSuccess);
    for (size_t g = 0; g < gs.size(); ++g) {
      const size_t bytes = gs[g].elements * element_size(gs[g].dtype);
      const auto got = gs[g].device.is_host() ? host_grads[g] : download(d.ptr[g], bytes, consume_);
      expect_average(gs[g].dtype, got, comm_->size(), step, g, false, "host+device");
    }
  }
}

TEST_F(ReducerGpuTest, RefusesWhatItCannotDoOnTheDevice) {
  int count = 0;
  cudaGetDeviceCount(&count);
  try {
    Reducer r(*comm_, {{4, DataType::Float32, Device::cuda(count), "far.w"}});
    ADD_FAILURE() << "a device that does not exist must be refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("far.w"), std::string::npos) << e.what();
  }
}

// fp16 / bf16 wire formats on device Buckets: CUDA casts with the CPU casts'
// bits, the widening after the collective (Note [device Buckets]). The
// gradients are small integers over the world size, exact in 16 bits for
// worlds of one and two; float64 Buckets travel uncompressed.
TEST_F(ReducerGpuTest, SixteenBitHooksOnDeviceBuckets) {
  for (bool bf16 : {false, true}) {
    for (bool sharded : {false, true}) {
      SCOPED_TRACE(std::string(bf16 ? "bf16" : "fp16") + (sharded ? " sharded" : ""));
      std::vector<GradientInfo> gs = {{1000, DataType::Float32, Device::cuda(device_), "a"},
                                      {33, DataType::Float64, Device::cuda(device_), "b"},
                                      {70001, DataType::Float32, Device::cuda(device_), "c"},
                                      {513, DataType::Float32, Device::host(), "host"}};
      ReducerOptions opt;
      opt.caps = BucketCaps{4096, 64 << 10};
      opt.comm_hook = bf16 ? bf16_compress_hook() : fp16_compress_hook();
      opt.sharded = sharded;
      opt.shared_buckets = false;
      Reducer r(*comm_, gs, opt);
      DeviceGrads d(gs);
      std::vector<std::vector<uint8_t>> host_grads(gs.size());
      for (int step = 0; step < 2; ++step) {
        std::vector<void*> targets(gs.size(), nullptr);
        for (size_t g = 0; g < gs.size(); ++g) {
          if (gs[g].device.is_cuda()) {
            targets[g] = d.ptr[g];
          } else {
            std::vector<double> v(gs[g].elements);
            for (size_t i = 0; i < v.size(); ++i) v[i] = grad_value(comm_->rank(), step, g, i);
            host_grads[g] = encode(gs[g].dtype, v);
          }
        }
        std::vector<GradientInfo> on_gpu;
        std::vector<void*> ptrs;
        for (size_t g = 0; g < gs.size(); ++g) {
          GradientInfo info = gs[g];
          if (info.device.is_host()) info.elements = 0;  // produce() uploads device gradients only
          on_gpu.push_back(info);
          ptrs.push_back(targets[g] ? targets[g] : d.ptr[0]);
        }
        produce(ptrs, on_gpu, step);
        for (size_t g = 0; g < gs.size(); ++g) {
          r.mark_ready(g, gs[g].device.is_host() ? static_cast<void*>(host_grads[g].data()) : d.ptr[g],
                       Stream(produce_));
        }
        const uint64_t generation = r.plan_generation();
        r.finalize(Stream(consume_));
        // Sharded: every element is an average only after a rebuild (Note
        // [rebuild once]); otherwise only the shards are (checked elsewhere).
        if (sharded && comm_->size() > 1 && r.plan_generation() == generation) continue;
        for (size_t g = 0; g < gs.size(); ++g) {
          const size_t bytes = gs[g].elements * element_size(gs[g].dtype);
          const auto got = gs[g].device.is_host() ? host_grads[g] : download(d.ptr[g], bytes, consume_);
          expect_average(gs[g].dtype, got, comm_->size(), step, g, false, "16-bit hook", true);
        }
      }
    }
  }
}

}  // namespace
}  // namespace gradwire
