// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Comm hooks (how one Bucket is reduced) and the step statistics.
#include <algorithm>
#include <cstdint>
#include <utility>

#include "base/raise.h"
#include "gradwire/reducer.h"
#include "kernels/cpu/reduce.h"
#include "reducer/device.h"

namespace gradwire {

namespace {
// The references a BucketContext holds may not be null.
const BucketContext::Args& checked(const BucketContext::Args& a) {
  if (a.comm == nullptr || a.gradients == nullptr || a.tensors == nullptr ||
      a.scratch == nullptr) {
    raise(ErrorCode::InvalidArgument, "BucketContext: comm, gradients, tensors and scratch are "
          "required (bucket {})", a.index);
  }
  return a;
}
}  // namespace

BucketContext::BucketContext(const Args& args)
    : comm(*checked(args).comm), step(args.step), index(args.index), dtype(args.dtype),
      count(args.count), buffer(args.buffer),
      result(static_cast<std::byte*>(args.buffer) + args.result_offset * element_size(args.dtype)),
      result_offset(args.result_offset), result_count(args.result_count), sharded(args.sharded),
      gradients(*args.gradients), tensors(*args.tensors), device(args.device),
      stream(args.stream), scratch_(args.scratch), device_scratch_(args.device_scratch) {}

void* BucketContext::device_scratch(size_t bytes) {
  if (!device_scratch_) {
    raise(ErrorCode::InvalidArgument, "rank {}: bucket {} is in host memory; device_scratch() is "
          "for device Buckets", comm.rank(), index);
  }
  return device_scratch_(bytes);
}

void* BucketContext::scratch(size_t bytes) {
  // Grows only: Buckets keep their sizes across steps (until a rebuild), so
  // this allocates on the first step and never again.
  if (scratch_->size() < bytes) scratch_->resize(bytes);
  return scratch_->data();
}

CommHook allreduce_hook() {
  return [](BucketContext& c) -> Work {
    // In place: the Bucket is both the send buffer and the result.
    if (c.sharded) {
      return c.comm.reduce_scatter(c.buffer, c.result, c.count, c.dtype, ReduceOp::Sum);
    }
    return c.comm.allreduce(c.buffer, c.buffer, c.count, c.dtype, ReduceOp::Sum);
  };
}

namespace {

// Compression: float32 -> 16 bits (into scratch) -> reduce in 16 bits ->
// widen into the result. The values were divided by the world size before
// narrowing (folded into mark_ready's copy), so the sum cannot overflow
// float16 where the average does not (the reason c10d's fp16 hook divides
// first, too).
struct Casts {
  void (*narrow)(uint16_t*, const float*, size_t);
  void (*widen)(float*, const uint16_t*, size_t);
  // The CUDA twins (kernels/cuda/compress.h); a stream is a cudaStream_t.
  void (*device_narrow)(uint16_t*, const float*, size_t, void*);
  void (*device_widen)(float*, const uint16_t*, size_t, void*);
};

CommHook compress_hook(DataType wire, Casts casts) {
  return [=](BucketContext& c) -> Work {
    if (c.dtype != DataType::Float32) return allreduce_hook()(c);
    const bool device = c.device.is_cuda();
    auto* low = static_cast<uint16_t*>(device ? c.device_scratch(c.count * sizeof(uint16_t))
                                              : c.scratch(c.count * sizeof(uint16_t)));
    if (device) {
      // On the Bucket's stream; the collective waits for it (the Reducer
      // runs hooks under DeviceStreamScope(c.stream)).
      reducer::with_device(c.device.index(), [&] {
        casts.device_narrow(low, static_cast<const float*>(c.buffer), c.count, c.stream.native());
      });
    } else {
      casts.narrow(low, static_cast<const float*>(c.buffer), c.count);
    }
    Work w = c.sharded
                 ? c.comm.reduce_scatter(low, low + c.result_offset, c.count, wire, ReduceOp::Sum)
                 : c.comm.allreduce(low, low, c.count, wire, ReduceOp::Sum);
    float* out = static_cast<float*>(c.result);
    const uint16_t* in = low + c.result_offset;
    const size_t n = c.result_count;
    const int dev = c.device.index();
    // Runs before the Work reads as done (engine or NCCL poller thread),
    // when the 16-bit result is complete.
    w.then([=](std::exception_ptr err) {
      if (err) return;
      if (dev >= 0) {
        reducer::run_on_device_and_wait(dev, [&](void* stream) {
          casts.device_widen(out, in, n, stream);
        });
      } else {
        casts.widen(out, in, n);
      }
    });
    return w;
  };
}

}  // namespace

CommHook fp16_compress_hook() {
  return compress_hook(DataType::Float16,
                       {kernels::float_to_half, kernels::half_to_float,
                        reducer::device_kernels().float_to_half,
                        reducer::device_kernels().half_to_float});
}

CommHook bf16_compress_hook() {
  return compress_hook(DataType::BFloat16,
                       {kernels::float_to_bf16, kernels::bf16_to_float,
                        reducer::device_kernels().float_to_bf16,
                        reducer::device_kernels().bf16_to_float});
}

// ---------------------------------------------------------------- StepStats

namespace {

using Interval = std::pair<StepStats::TimePoint, StepStats::TimePoint>;

// The union of the Buckets' [launch, done] intervals, clipped to `until`.
std::chrono::duration<double> covered(const StepStats& s, StepStats::TimePoint until) {
  std::vector<Interval> iv;
  for (size_t b = 0; b < s.bucket_launch.size() && b < s.bucket_done.size(); ++b) {
    const auto lo = s.bucket_launch[b], hi = std::min(s.bucket_done[b], until);
    if (lo < hi) iv.emplace_back(lo, hi);
  }
  std::sort(iv.begin(), iv.end());
  std::chrono::duration<double> total{0};
  StepStats::TimePoint end{};
  for (const auto& [lo, hi] : iv) {
    const auto from = std::max(lo, end);
    if (hi > from) total += hi - from;
    end = std::max(end, hi);
  }
  return total;
}

}  // namespace

std::chrono::duration<double> StepStats::communication_time() const {
  return covered(*this, TimePoint::max());
}

std::chrono::duration<double> StepStats::hidden_time() const {
  return covered(*this, finalize_start);
}

double StepStats::hidden_fraction() const {
  const double total = communication_time().count();
  return total > 0 ? hidden_time().count() / total : 1.0;
}

}  // namespace gradwire
