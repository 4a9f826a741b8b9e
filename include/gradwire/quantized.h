// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Quantized collectives: reduce-scatter and allgather of float32, float16 or
// bfloat16 data sent as blockwise int8 with one float32 scale per block
// (about a quarter of float32's bytes, half of 16-bit's), for the traffic of
// sharded training: gradients (reduce-scatter, with error feedback) and
// parameters (allgather).
//
// Each object is one call site: it is built once (collectively) for a count
// and a dtype and then run every step. The reduce-scatter's object keeps the
// error-feedback buffer of that call site between steps.
//
// Guarantees (Note [quantized collective layout] in
// src/collectives/quantized_layout.h):
//  - the result of every element is computed from the same wire bytes by
//    the same formula wherever it is computed, so the allgather leaves the
//    same bytes on every rank (the sending rank dequantizes its own shard
//    too) and a reduce-scatter shard does not depend on which rank reduces
//    it (the ranks' contributions are summed in rank order);
//  - an element's quantization error is at most half its block's scale
//    (amax / 254); with error feedback, the sum of what a rank sent over
//    any number of steps is within that of the sum of its inputs.
// Host memory for now: the CUDA kernels (kernels/cuda/quantize.h) exist and
// match the CPU kernels' bytes, the device path of these classes does not.
#pragma once

#include "gradwire/export.h"

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gradwire/communicator.h"
#include "gradwire/types.h"

namespace gradwire {

struct GRADWIRE_API QuantizedOptions {
  // Elements per float32 scale, 1 .. 65536: smaller blocks follow the data's
  // magnitude more closely and add 4 bytes per block to the wire.
  size_t block_size = 256;
  // Reduce-scatter: add each call's quantization error to the next call's
  // input (Note [quantization error feedback] in kernels/quantize_math.h).
  // The allgather has no error buffer (parameters are quantized afresh from
  // an exact master each step) and ignores this.
  bool error_feedback = true;
};

// Like Communicator::reduce_scatter with op Sum or Avg: send holds count
// elements, recv receives shard_count(count, size, rank) elements, the
// reduction of elements [shard_offset, +shard_count), each rank's
// contribution quantized to int8 on the way. One alltoall per run().
class GRADWIRE_API QuantizedReduceScatter {
 public:
  // Collective over comm: every rank passes the same count, dtype and
  // options. An unsupported dtype or a bad block size (on any rank) is an
  // InvalidArgument, options that differ between ranks a Mismatch; either
  // is raised on every rank, naming the option and the ranks.
  QuantizedReduceScatter(Communicator& comm, size_t count, DataType dtype,
                         QuantizedOptions options = {});
  ~QuantizedReduceScatter();
  QuantizedReduceScatter(QuantizedReduceScatter&&) noexcept;
  QuantizedReduceScatter& operator=(QuantizedReduceScatter&&) noexcept;

  // Synchronous. op: Sum or Avg (Avg multiplies the sum by 1 / size(); else
  // InvalidArgument). recv may point at this rank's shard inside send (in
  // place).
  void run(const void* send, void* recv, ReduceOp op = ReduceOp::Sum);

  size_t count() const;
  DataType dtype() const;
  const QuantizedOptions& options() const;
  // Bytes this rank sends in one run() (int8 values, scales and padding).
  size_t wire_bytes() const;
  // The error-feedback buffer: count float32 (empty without error feedback).
  const std::vector<float>& error() const;
  void reset_error_feedback();
  // The error buffer, exactly (for checkpoints); load_state refuses a
  // state of another count, world size or block size.
  std::string save_state() const;
  void load_state(std::string_view state);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// Like Communicator::allgather: send holds shard_count(count, size, rank)
// elements, recv receives all count elements; each shard travels as int8
// and every rank (its sender too) dequantizes the same bytes, so every rank
// ends with identical data. One allgather per run().
class GRADWIRE_API QuantizedAllgather {
 public:
  // Collective, checked as QuantizedReduceScatter's.
  QuantizedAllgather(Communicator& comm, size_t count, DataType dtype,
                     QuantizedOptions options = {});
  ~QuantizedAllgather();
  QuantizedAllgather(QuantizedAllgather&&) noexcept;
  QuantizedAllgather& operator=(QuantizedAllgather&&) noexcept;

  // Synchronous. send may point at this rank's shard inside recv.
  void run(const void* send, void* recv);

  size_t count() const;
  DataType dtype() const;
  const QuantizedOptions& options() const;
  size_t wire_bytes() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gradwire
