// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Buckets in CUDA device memory (GradientInfo::device >= 0).
//
// Note [device Buckets]: a Reducer whose gradients live on a CUDA device
// keeps their Buckets there, so the gradients never cross PCIe and the
// Buckets go to NCCL (Note [device-buffer dispatch]). The work is ordered
// by streams and events, never by host synchronisation inside the step:
//  * mark_ready(i, grad, stream) enqueues one kernel on the gradient's own
//    stream (the one autograd produced it on): the copy into the Bucket
//    with the averaging folded in (kernels/cuda/scale.h, the CPU formula),
//    then records gradient i's event there.
//  * When a Bucket is complete, the Reducer's own non-blocking "bucket
//    stream" waits for the events of its gradients and the comm hook runs
//    under DeviceStreamScope(bucket stream) (Note [producer stream]), so
//    the collective starts on the GPU exactly when the last copy is done,
//    while the host has long moved on.
//  * finalize(stream) waits for the Works (an NCCL Work completes when the
//    GPU finished the collective; waiting on the host is what bounds a step
//    by the deadline and turns a dead peer into an error on every rank),
//    then enqueues the write-back copies on the caller's stream and records
//    a "written" event there. The optimizer, on that stream, can therefore
//    never read an unfinished Bucket.
//  * The next step's copies into the Buckets (on any stream) first wait
//    for the "written" event, so they cannot overwrite a Bucket the
//    write-back is still reading.
// One device per Reducer (NCCL runs one device per communicator); host
// gradients may sit beside device ones, in their own Buckets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gradwire/types.h"

namespace gradwire::reducer {

// Device memory freed on destruction (cudaFree); move-only.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(DeviceMemory&& other) noexcept;
  DeviceMemory& operator=(DeviceMemory&& other) noexcept;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory();
  void* get() const { return p_; }

 private:
  friend class DeviceBuckets;
  void* p_ = nullptr;
};

class DeviceBuckets {
 public:
  // The stream and one event per gradient on `device`. Throws
  // InvalidArgument, prefixed with `where` and naming `first` (the first
  // gradient on the device), when this build has no CUDA or the device
  // cannot be used (no GPU, a bad ordinal).
  DeviceBuckets(int device, size_t gradients, std::string where, const std::string& first);
  ~DeviceBuckets();
  DeviceBuckets(const DeviceBuckets&) = delete;
  DeviceBuckets& operator=(const DeviceBuckets&) = delete;

  int device() const { return device_; }

  DeviceMemory allocate(size_t bytes);
  // dst = src / divisor on `stream`, after the last write-back; records
  // gradient i's event. dst == src scales in place.
  void copy_in(size_t i, void* dst, const void* src, size_t count, DataType dtype, int divisor,
               void* stream);
  // Zeros for an unused gradient, on the bucket stream (after the last
  // write-back); records gradient i's event.
  void zero(size_t i, void* dst, size_t bytes);
  // Makes the bucket stream wait for these gradients' events; returns it.
  void* bucket_ready(const std::vector<size_t>& gradients);
  // An asynchronous device-to-device copy on `stream`.
  void copy(void* dst, const void* src, size_t bytes, void* stream);
  // Everything enqueued on `stream` so far is the write-back of a step.
  void written(void* stream);
  // Waits (host) for everything enqueued on the bucket stream and on the
  // write-back stream: for destruction and error paths.
  void synchronize() noexcept;

  struct State;

 private:
  int device_;
  std::string where_;
  std::unique_ptr<State> state_;
};

// For comm hooks on device Buckets (comm_hooks.cpp).
// The 16-bit casts of kernels/cuda/compress.h (cast.cu); null pointers in a
// build without CUDA, where no device Bucket can exist.
struct DeviceKernels {
  void (*float_to_half)(uint16_t*, const float*, size_t, void*) = nullptr;
  void (*half_to_float)(float*, const uint16_t*, size_t, void*) = nullptr;
  void (*float_to_bf16)(uint16_t*, const float*, size_t, void*) = nullptr;
  void (*bf16_to_float)(float*, const uint16_t*, size_t, void*) = nullptr;
};
const DeviceKernels& device_kernels();
// Calls fn() with `device` as the calling thread's current device.
void with_device(int device, const std::function<void()>& fn);
// Calls fn(stream) with a private non-blocking stream of `device` and waits
// (host) until the work it enqueued is done: post-processing in a
// Work::then callback, whose inputs are complete, that must be finished
// before the Work reads as done. Throws Internal on a CUDA error.
void run_on_device_and_wait(int device, const std::function<void(void*)>& fn);

}  // namespace gradwire::reducer
