// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Staging device buffers through pinned host memory (the "staged" path of
// Note [GPU memory over libfabric] in transport/ofi/hmem.h).
//
// Note [staging pipeline]: a device buffer is processed in chunks of
// `chunk_bytes`, chunk k in host slot k % slots. While the host step (a
// collective over the fabric) runs on chunk k, the copy engine brings chunk
// k+1 (and up to slots-2 more) to the host and takes chunk k-1 back to the
// device, so with three slots the copies hide behind the transfers. A slot
// is reused only after the copy engine reports its last copy done, and the
// step only sees a slot whose copy to the host is done. The schedule is
// pure logic over a CopyEngine, so it is tested on the CPU with a fake
// engine (tests/unit/staging_test.cpp); CudaCopyEngine is the real one.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "base/deadline.h"

namespace gradwire::device::staged {

// Asynchronous copies between device memory and `slots()` pinned host
// buffers of `slot_bytes()` each, completed in the order they were started.
class CopyEngine {
 public:
  virtual ~CopyEngine() = default;
  virtual int slots() const = 0;
  virtual size_t slot_bytes() const = 0;
  virtual void* slot(int i) = 0;
  virtual void to_host(int slot, const void* device_src, size_t bytes) = 0;  // starts the copy
  virtual void to_device(void* device_dst, int slot, size_t bytes) = 0;      // starts the copy
  // True once every copy started on `slot` has completed. Throws on a
  // failed copy.
  virtual bool done(int slot) = 0;
};

// step(host, offset, bytes): the host-side work on one chunk (bytes at
// `offset` of the buffer, now in `host`); it may change them in place.
using StagedStep = std::function<void(void* host, size_t offset, size_t bytes)>;

// Runs `step` over [0, bytes) of device buffer `src`, writing the chunks
// back to `dst` (== src for in place; nullptr: nothing is written back,
// e.g. for a send), following Note [staging pipeline]. Chunks are
// slot_bytes() long (the last shorter) and aligned to `element_bytes` so a
// step never splits an element. Throws Timeout naming `what` if a copy is
// not done by `deadline`.
void run_staged(CopyEngine& copies, const void* src, void* dst, size_t bytes,
                size_t element_bytes, const StagedStep& step, Deadline deadline,
                const std::string& what);

// The CUDA copy engine: `slots` cudaHostAlloc'd buffers, one non-blocking
// copy stream on `device`, one event per slot. Only with CUDA; elsewhere
// throws InvalidArgument.
std::unique_ptr<CopyEngine> make_cuda_copy_engine(int device, int slots, size_t slot_bytes);

}  // namespace gradwire::device::staged
