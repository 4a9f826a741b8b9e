// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// What gradwire's comm hooks for c10d's DDP (torch's DistributedDataParallel,
// c10d::Reducer) run on a c10d GradBucket: the 16-bit compression of the
// fp16/bf16 hooks, and any gradwire CommHook (gradwire/reducer.h,
// gradwire/compress.h: powersgd_hook) on a bucket's flat buffer. Python's
// gradwire.torch.hooks binds these.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gradwire/communicator.h"
#include "gradwire/reducer.h"

namespace gradwire::torch {

// dst = 16-bit(src) / divisor, each element rounded once (torch's
// fp16_compress_hook: cast, then divide; gradwire's CPU kernels). `src`: a
// contiguous float32 CPU tensor; `dst`: a contiguous float16 or bfloat16
// CPU tensor of as many elements. InvalidArgument otherwise.
void compress(const at::Tensor& src, at::Tensor& dst, int divisor);
// dst = float32(src): the same tensors the other way round.
void decompress(const at::Tensor& src, at::Tensor& dst);

// Runs `hook` on one DDP bucket: `buffer` is the bucket's flat float32
// buffer (CPU or CUDA, contiguous) holding the gradients of `shapes` end to
// end, `index` the bucket's index, `step` the training step. The buffer is
// divided by the world size first (c10d's Reducer does not divide when a
// comm hook is registered; gradwire's hooks expect the division folded in),
// then `hook` runs on `comm` (CUDA buckets: on PyTorch's current stream,
// with the hook's work on the device). The future completes with `buffer`
// holding the average, or with the hook's error. `what` names the hook in
// errors ("gradwire powerSGD_hook").
c10::intrusive_ptr<c10::ivalue::Future> run_comm_hook(
    const CommHook& hook, Communicator& comm, at::Tensor buffer,
    const std::vector<std::vector<int64_t>>& shapes, size_t index, uint64_t step,
    const std::string& what);

}  // namespace gradwire::torch
