// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Argument checks and conversions shared by the c10d::Backend overrides
// (c10d_backend.cpp: the collectives DDP uses; c10d_ops.cpp: point-to-point,
// rooted, coalesced and monitored-barrier operations).
#pragma once

#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gradwire/communicator.h"
#include "gradwire/types.h"

namespace gradwire::python {

[[noreturn]] void invalid(const std::string& msg);
// gradwire's dtype for the tensor's elements; a complex tensor's is its real
// part's (Note [complex as pairs of reals]). InvalidArgument otherwise.
DataType to_dtype(const at::Tensor& t, const std::string& what);
// Elements as gradwire counts them: 2 x numel for complex tensors.
size_t count_of(const at::Tensor& t);
// CPU or CUDA, strided, contiguous, a supported dtype.
void check_tensor(const at::Tensor& t, const std::string& what);
const at::Tensor& single(std::vector<at::Tensor>& tensors, const std::string& what);
ReduceOp to_op(const c10d::ReduceOp& op, const std::string& what);
// The same, refusing ops that are not element-wise on complex tensors.
ReduceOp to_op(const c10d::ReduceOp& op, const at::Tensor& t, const std::string& what);
void same_dtype(const at::Tensor& a, const at::Tensor& b, const std::string& what);
void numel_is(const at::Tensor& t, int64_t expected, const std::string& what, const char* which);
// PyTorch's current stream for a CUDA tensor; null for CPU tensors.
void* current_stream(const at::Tensor& t);
// "gradwire backend rank 0: <op>"
std::string name(const Communicator& c, const char* op);
// A c10d Work over a gradwire Work (Note [future callbacks on the engine
// thread] in c10d_backend.cpp); `finish` copies results out of staging
// buffers before the Work completes.
c10::intrusive_ptr<c10d::Work> make_work(int rank, c10d::OpType type, gradwire::Work work,
                                         std::vector<at::Tensor> outputs,
                                         std::vector<at::Tensor> keep_alive,
                                         std::function<void()> finish = {});

// The same for a receive from any source, whose sourceRank() is `*source`
// once the Work completed.
c10::intrusive_ptr<c10d::Work> make_recv_any_work(int rank, gradwire::Work work,
                                                  std::vector<at::Tensor> outputs,
                                                  std::shared_ptr<int> source,
                                                  std::function<void()> finish = {});

}  // namespace gradwire::python
