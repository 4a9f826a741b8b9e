// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include "gradwire/export.h"

#include <cstddef>
#include <memory>

namespace gradwire {

namespace detail {
struct SharedAllocation;  // src/shm/windows.h
}

// Host memory from Communicator::allocate_shared(): the ranks of one host
// map each other's SharedBuffers, so a collective whose buffers all come
// from allocate_shared runs straight between them (Note [the direct path]
// in src/shm/direct.cpp): the reduction reads every rank's input in
// place and writes each result once into every rank's output, with no
// transport messages and no staging copies. Any other buffer works as
// always, through the transport.
//
// Move-only; the memory is freed when the last SharedBuffer for it goes
// (it may outlive the communicator). Contents start zeroed.
class GRADWIRE_API SharedBuffer {
 public:
  SharedBuffer() = default;
  explicit SharedBuffer(std::shared_ptr<detail::SharedAllocation> allocation);
  ~SharedBuffer();
  SharedBuffer(SharedBuffer&&) noexcept = default;
  SharedBuffer& operator=(SharedBuffer&&) noexcept = default;
  SharedBuffer(const SharedBuffer&) = delete;
  SharedBuffer& operator=(const SharedBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }
  // True when the peers on this host map this memory (every rank of the
  // communicator shares one host and /dev/shm); false for a private
  // fallback allocation, which collectives treat like any other buffer.
  bool direct() const;

 private:
  std::shared_ptr<detail::SharedAllocation> allocation_;
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace gradwire
