// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "device/staged/staging.h"

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "base/raise.h"

#if GRADWIRE_HAVE_CUDA
#include <cuda_runtime.h>

#include "device/cuda.h"
#endif

namespace gradwire::device::staged {
namespace {

void wait_done(CopyEngine& copies, int slot, Deadline deadline, const std::string& what) {
  while (!copies.done(slot)) {
    if (deadline.expired()) {
      raise(ErrorCode::Timeout, "{}: a copy between device and pinned host memory (slot {}) did "
            "not finish by the deadline; likely cause: the GPU is hung or busy with other work",
            what, slot);
    }
    std::this_thread::yield();
  }
}

}  // namespace

void run_staged(CopyEngine& copies, const void* src, void* dst, size_t bytes,
                size_t element_bytes, const StagedStep& step, Deadline deadline,
                const std::string& what) {
  if (bytes == 0) return;
  const int slots = copies.slots();
  if (slots < 2) raise(ErrorCode::InvalidArgument, "{}: staging needs at least 2 slots", what);
  const size_t es = std::max<size_t>(element_bytes, 1);
  const size_t chunk = copies.slot_bytes() / es * es;
  if (chunk == 0) {
    raise(ErrorCode::InvalidArgument, "{}: staging slots of {} bytes cannot hold a {}-byte element",
          what, copies.slot_bytes(), es);
  }
  const size_t chunks = (bytes - 1) / chunk + 1;
  auto offset = [&](size_t k) { return k * chunk; };
  auto length = [&](size_t k) { return std::min(chunk, bytes - k * chunk); };
  auto src_at = [&](size_t k) { return static_cast<const std::byte*>(src) + offset(k); };
  auto dst_at = [&](size_t k) { return static_cast<std::byte*>(dst) + offset(k); };
  auto slot_of = [&](size_t k) { return int(k % size_t(slots)); };

  // Keep slots-1 chunks ahead on their way in; one slot stays free for the
  // chunk on its way back.
  const size_t ahead = std::min(size_t(slots - 1), chunks);
  for (size_t k = 0; k < ahead; ++k) copies.to_host(slot_of(k), src_at(k), length(k));
  for (size_t k = 0; k < chunks; ++k) {
    wait_done(copies, slot_of(k), deadline, what);
    step(copies.slot(slot_of(k)), offset(k), length(k));
    if (dst != nullptr) copies.to_device(dst_at(k), slot_of(k), length(k));
    const size_t next = k + ahead;
    if (next < chunks) {
      // Its slot last held chunk next - slots, whose copy back must be done.
      wait_done(copies, slot_of(next), deadline, what);
      copies.to_host(slot_of(next), src_at(next), length(next));
    }
  }
  for (int s = 0; s < slots; ++s) wait_done(copies, s, deadline, what);
}

#if GRADWIRE_HAVE_CUDA
namespace {

class CudaCopyEngine final : public CopyEngine {
 public:
  CudaCopyEngine(int device, int slots, size_t slot_bytes) : device_(device), bytes_(slot_bytes) {
    DeviceGuard guard(device);
    for (StreamPtr* p : {&to_host_, &to_device_}) {
      cudaStream_t s = nullptr;
      check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
      p->reset(s);
    }
    for (int i = 0; i < slots; ++i) {
      void* p = nullptr;
      check(cudaHostAlloc(&p, slot_bytes, cudaHostAllocPortable), "cudaHostAlloc");
      host_.emplace_back(p);
      cudaEvent_t e = nullptr;
      check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
      events_.emplace_back(e);
    }
  }

  int slots() const override { return int(host_.size()); }
  size_t slot_bytes() const override { return bytes_; }
  void* slot(int i) override { return host_[size_t(i)].get(); }

  // One stream per direction, so the copy engines run both at once (PCIe
  // is full duplex: one stream made the staged path's copies take the sum
  // of both directions' times). A slot's event is recorded after its latest
  // copy, and run_staged starts no copy on a slot before done(slot), so a
  // slot is never in both streams at once.
  void to_host(int i, const void* device_src, size_t bytes) override {
    copy(host_[size_t(i)].get(), device_src, bytes, cudaMemcpyDeviceToHost, i, to_host_.get());
  }
  void to_device(void* device_dst, int i, size_t bytes) override {
    copy(device_dst, host_[size_t(i)].get(), bytes, cudaMemcpyHostToDevice, i, to_device_.get());
  }
  bool done(int i) override {
    cudaError_t err = cudaEventQuery(events_[size_t(i)].get());
    if (err == cudaErrorNotReady) return false;
    check(err, "a staging copy");
    return true;
  }

 private:
  void copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, int i,
            cudaStream_t stream) {
    DeviceGuard guard(device_);
    check(cudaMemcpyAsync(dst, src, bytes, kind, stream), "cudaMemcpyAsync");
    check(cudaEventRecord(events_[size_t(i)].get(), stream), "cudaEventRecord");
  }
  void check(cudaError_t err, const char* call) const {
    if (err == cudaSuccess) return;
    cudaGetLastError();
    raise(ErrorCode::Transport, "{} for staging on device {} failed: {}", call, device_,
          cudaGetErrorString(err));
  }

  const int device_;
  const size_t bytes_;
  StreamPtr to_host_, to_device_;
  std::vector<PinnedMemoryPtr> host_;
  std::vector<EventPtr> events_;
};

}  // namespace

std::unique_ptr<CopyEngine> make_cuda_copy_engine(int device, int slots, size_t slot_bytes) {
  return std::make_unique<CudaCopyEngine>(device, slots, slot_bytes);
}
#else
std::unique_ptr<CopyEngine> make_cuda_copy_engine(int device, int, size_t) {
  raise(ErrorCode::InvalidArgument, "staging device {} buffers needs a gradwire built with CUDA",
        device);
}
#endif

}  // namespace gradwire::device::staged
