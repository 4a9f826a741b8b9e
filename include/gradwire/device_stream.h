// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Where memory lives (Device) and which CUDA stream work is ordered on
// (Stream), as gradwire's API names them; and which stream a collective on
// device buffers waits for (DeviceStreamScope).
//
// Note [producer stream]: a collective on CUDA buffers (Note [device-buffer
// dispatch] in src/device/backend.h) starts on the GPU only once
// the work enqueued on its producer stream before the call has finished, so
// it never reads a buffer a kernel is still writing. The producer stream is
// the legacy default stream (which also orders every blocking stream before
// it) unless a DeviceStreamScope on the calling thread names another, the
// way ProcessGroupNCCL follows c10's current stream. Non-blocking streams
// (PyTorch's side streams, the Reducer's own) need a scope. No CUDA type
// appears here: a Stream holds the cudaStream_t's value.
#pragma once

#include "gradwire/export.h"

namespace gradwire {

// A CUDA stream as gradwire's API names it: the cudaStream_t's value, so
// that no CUDA type appears in a public header. Stream{} is the legacy
// default stream.
class Stream {
 public:
  constexpr Stream() noexcept = default;
  constexpr explicit Stream(void* native) noexcept : native_(native) {}
  // The cudaStream_t.
  constexpr void* native() const noexcept { return native_; }
  friend constexpr bool operator==(Stream a, Stream b) noexcept { return a.native_ == b.native_; }

 private:
  void* native_ = nullptr;
};

// Where memory lives: host memory, or the CUDA device with an index.
class Device {
 public:
  constexpr Device() noexcept = default;  // host memory
  static constexpr Device host() noexcept { return Device(); }
  static constexpr Device cuda(int index) noexcept {
    Device d;
    d.index_ = index < 0 ? -1 : index;
    return d;
  }
  constexpr bool is_host() const noexcept { return index_ < 0; }
  constexpr bool is_cuda() const noexcept { return index_ >= 0; }
  // The CUDA device's index; -1 for host memory.
  constexpr int index() const noexcept { return index_; }
  friend constexpr bool operator==(Device a, Device b) noexcept { return a.index_ == b.index_; }

 private:
  int index_ = -1;
};

class GRADWIRE_API DeviceStreamScope {
 public:
  // Collectives this thread starts while the scope lives wait for `stream`
  // (Stream{}: the legacy default stream). Scopes nest; the innermost wins.
  explicit DeviceStreamScope(Stream stream) noexcept;
  ~DeviceStreamScope();
  DeviceStreamScope(const DeviceStreamScope&) = delete;
  DeviceStreamScope& operator=(const DeviceStreamScope&) = delete;

  // The calling thread's producer stream (Stream{} outside any scope).
  static Stream current() noexcept;

 private:
  Stream previous_;
};

}  // namespace gradwire
