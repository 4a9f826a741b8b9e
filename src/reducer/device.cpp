// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [device Buckets] in reducer/device.h. Compiled in every build;
// without CUDA every entry point refuses with InvalidArgument.
#include "reducer/device.h"

#include <mutex>
#include <vector>

#include "base/raise.h"

#if GRADWIRE_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda/compress.h"
#include "kernels/cuda/scale.h"
#include "device/cuda.h"
#endif

namespace gradwire::reducer {

#if GRADWIRE_HAVE_CUDA
using device::DeviceGuard;
using device::EventPtr;
using device::StreamPtr;

struct DeviceBuckets::State {
  StreamPtr stream;            // the bucket stream (non-blocking)
  std::vector<EventPtr> copied;  // per gradient: its copy into the Bucket is done
  EventPtr written;            // the last write-back is done
  void* written_on = nullptr;  // the stream it was recorded on
  bool any_written = false;
};

namespace {

void check(cudaError_t err, const std::string& where, const char* what) {
  if (err == cudaSuccess) return;
  cudaGetLastError();  // clear it, so it does not resurface in an unrelated call
  raise(ErrorCode::Internal, "{}: device Buckets: {} failed: {}", where, what,
        cudaGetErrorString(err));
}

EventPtr make_event(const std::string& where) {
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), where, "cudaEventCreate");
  return EventPtr(e);
}

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace

DeviceMemory::DeviceMemory(DeviceMemory&& other) noexcept : p_(other.p_) { other.p_ = nullptr; }
DeviceMemory& DeviceMemory::operator=(DeviceMemory&& other) noexcept {
  if (this != &other) {
    device::DeviceFreer{}(p_);
    p_ = other.p_;
    other.p_ = nullptr;
  }
  return *this;
}
DeviceMemory::~DeviceMemory() { device::DeviceFreer{}(p_); }

DeviceBuckets::DeviceBuckets(int device, size_t gradients, std::string where,
                             const std::string& first)
    : device_(device), where_(std::move(where)), state_(std::make_unique<State>()) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || device < 0 || device >= count) {
    cudaGetLastError();
    raise(ErrorCode::InvalidArgument, "{}: parameter {} is on CUDA device {}, but {}", where_,
          first, device,
          err != cudaSuccess ? fmt::format("CUDA reports no usable device ({})",
                                           cudaGetErrorString(err))
                             : fmt::format("this process sees {} CUDA device(s)", count));
  }
  DeviceGuard guard(device_);
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), where_, "cudaStreamCreate");
  state_->stream.reset(s);
  state_->copied.reserve(gradients);
  for (size_t i = 0; i < gradients; ++i) state_->copied.push_back(make_event(where_));
  state_->written = make_event(where_);
}

DeviceBuckets::~DeviceBuckets() {
  synchronize();
  DeviceGuard guard(device_);
  state_.reset();
}

DeviceMemory DeviceBuckets::allocate(size_t bytes) {
  DeviceGuard guard(device_);
  DeviceMemory m;
  // cudaMalloc(0) returns nullptr; one byte keeps every Bucket addressable.
  const cudaError_t err = cudaMalloc(&m.p_, bytes ? bytes : 1);
  if (err != cudaSuccess) {
    cudaGetLastError();
    raise(ErrorCode::InvalidArgument, "{}: allocating a {}-byte Bucket on CUDA device {} "
          "failed: {}", where_, bytes, device_, cudaGetErrorString(err));
  }
  return m;
}

void DeviceBuckets::copy_in(size_t i, void* dst, const void* src, size_t count, DataType dtype,
                            int divisor, void* stream) {
  DeviceGuard guard(device_);
  if (state_->any_written && stream != state_->written_on) {
    check(cudaStreamWaitEvent(as_stream(stream), state_->written.get(), 0), where_,
          "cudaStreamWaitEvent (after the last write-back)");
  }
  kernels::cuda::copy_divided(dst, src, count, dtype, divisor, stream);
  check(cudaEventRecord(state_->copied[i].get(), as_stream(stream)), where_, "cudaEventRecord");
}

void DeviceBuckets::zero(size_t i, void* dst, size_t bytes) {
  DeviceGuard guard(device_);
  cudaStream_t s = state_->stream.get();
  if (state_->any_written) {
    check(cudaStreamWaitEvent(s, state_->written.get(), 0), where_, "cudaStreamWaitEvent");
  }
  if (bytes) check(cudaMemsetAsync(dst, 0, bytes, s), where_, "cudaMemsetAsync");
  check(cudaEventRecord(state_->copied[i].get(), s), where_, "cudaEventRecord");
}

void* DeviceBuckets::bucket_ready(const std::vector<size_t>& gradients) {
  DeviceGuard guard(device_);
  cudaStream_t s = state_->stream.get();
  for (size_t i : gradients) {
    check(cudaStreamWaitEvent(s, state_->copied[i].get(), 0), where_, "cudaStreamWaitEvent");
  }
  return s;
}

void DeviceBuckets::copy(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0 || dst == src) return;
  DeviceGuard guard(device_);
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, as_stream(stream)), where_,
        "cudaMemcpyAsync (write-back)");
}

void DeviceBuckets::written(void* stream) {
  DeviceGuard guard(device_);
  check(cudaEventRecord(state_->written.get(), as_stream(stream)), where_, "cudaEventRecord");
  state_->written_on = stream;
  state_->any_written = true;
}

void DeviceBuckets::synchronize() noexcept {
  if (!state_ || !state_->stream) return;
  DeviceGuard guard(device_);
  cudaStreamSynchronize(state_->stream.get());
  if (state_->any_written) cudaEventSynchronize(state_->written.get());
  cudaGetLastError();
}

const DeviceKernels& device_kernels() {
  static const DeviceKernels k{kernels::cuda::float_to_half, kernels::cuda::half_to_float,
                               kernels::cuda::float_to_bf16, kernels::cuda::bf16_to_float};
  return k;
}

void with_device(int device, const std::function<void()>& fn) {
  DeviceGuard guard(device);
  fn();
}

void run_on_device_and_wait(int device, const std::function<void(void*)>& fn) {
  // One stream per device, made on first use and never destroyed: it is
  // used from library threads until exit, when the CUDA runtime may already
  // be torn down.
  static std::mutex mu;
  static std::vector<cudaStream_t> streams;
  cudaStream_t s = nullptr;
  DeviceGuard guard(device);
  {
    std::lock_guard<std::mutex> lk(mu);
    if (streams.size() <= size_t(device)) streams.resize(size_t(device) + 1, nullptr);
    if (!streams[size_t(device)]) {
      check(cudaStreamCreateWithFlags(&streams[size_t(device)], cudaStreamNonBlocking),
            "comm hook", "cudaStreamCreate");
    }
    s = streams[size_t(device)];
  }
  fn(s);
  check(cudaStreamSynchronize(s), "comm hook", "cudaStreamSynchronize");
}

#else  // no CUDA in this build

struct DeviceBuckets::State {};

DeviceMemory::DeviceMemory(DeviceMemory&& other) noexcept : p_(other.p_) { other.p_ = nullptr; }
DeviceMemory& DeviceMemory::operator=(DeviceMemory&& other) noexcept {
  std::swap(p_, other.p_);
  return *this;
}
DeviceMemory::~DeviceMemory() = default;

DeviceBuckets::DeviceBuckets(int device, size_t, std::string where, const std::string& first)
    : device_(device), where_(std::move(where)) {
  raise(ErrorCode::InvalidArgument, "{}: parameter {} is on CUDA device {}, but this gradwire was "
        "built without CUDA (GRADWIRE_WITH_CUDA=OFF or no nvcc); keep it in host memory or "
        "rebuild with CUDA", where_, first, device);
}
DeviceBuckets::~DeviceBuckets() = default;
DeviceMemory DeviceBuckets::allocate(size_t) { return {}; }
void DeviceBuckets::copy_in(size_t, void*, const void*, size_t, DataType, int, void*) {}
void DeviceBuckets::zero(size_t, void*, size_t) {}
void* DeviceBuckets::bucket_ready(const std::vector<size_t>&) { return nullptr; }
void DeviceBuckets::copy(void*, const void*, size_t, void*) {}
void DeviceBuckets::written(void*) {}
void DeviceBuckets::synchronize() noexcept {}

const DeviceKernels& device_kernels() {
  static const DeviceKernels k;
  return k;
}
void with_device(int, const std::function<void()>& fn) { fn(); }
void run_on_device_and_wait(int, const std::function<void(void*)>&) {}

#endif

}  // namespace gradwire::reducer
