// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Argument checks, list staging and the c10d Work shared by the
// c10d::Backend overrides (c10d_backend.cpp: the collectives DDP uses;
// c10d_ops.cpp: point-to-point, rooted, coalesced and monitored-barrier
// operations; c10d_sparse.cpp). Tensor dtypes, devices and streams are
// tensors.h's, shared with the DDP module.
#pragma once

#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gradwire/communicator.h"
#include "gradwire/types.h"
#include "tensors.h"

namespace gradwire::torch::detail {

const at::Tensor& single(std::vector<at::Tensor>& tensors, const std::string& what);
ReduceOp to_op(const c10d::ReduceOp& op, const std::string& what);
// The same, refusing ops that are not element-wise on complex tensors.
ReduceOp to_op(const c10d::ReduceOp& op, const at::Tensor& t, const std::string& what);
void same_dtype(const at::Tensor& a, const at::Tensor& b, const std::string& what);
// Both tensors are ones the backend takes (check_tensor), of one dtype.
void check_pair(const at::Tensor& input, const at::Tensor& output, const std::string& what);
void numel_is(const at::Tensor& t, int64_t expected, const std::string& what, const char* which);
// "gradwire backend rank 0: <op>"
std::string name(const Communicator& c, const char* op);

// Note [list staging]: c10d's list forms (allgather and gather into a list
// of outputs, reduce_scatter and scatter from a list of inputs, all_to_all,
// the coalesced operations) run as one gradwire collective over one flat
// staging tensor: the list is packed into it, end to end in list order,
// before the collective, or the flat result is unpacked into the list as
// the Work completes (the Work's `finish`, on the engine thread: Note
// [copy-out in the caller's mode] in c10d_work.cpp). The list's tensors
// need not be adjacent in memory, nor of one size.

// A list and its flat staging tensor, which lives where the collective's
// single tensor (`like` below) does, in its dtype.
struct Staged {
  std::vector<at::Tensor> list;
  at::Tensor flat;
};
// The list form's outputs (allgather; gather on the root): `lists` must be
// one list of `size` tensors (the c10d API nests it in a list per device),
// each one the backend takes (check_tensor) of `input`'s dtype and numel;
// `flat` is not filled. "<what>: [the root ]expect(s|ed) one list of
// <size> output tensors" and the like otherwise.
Staged stage_outputs(std::vector<std::vector<at::Tensor>>& lists, const at::Tensor& input, int size,
                     const std::string& what, bool root = false);
// The list form's inputs (reduce_scatter; scatter on the root), checked
// against `output` alike; `flat` holds them end to end.
Staged stage_inputs(std::vector<std::vector<at::Tensor>>& lists, const at::Tensor& output, int size,
                    const std::string& what, bool root = false);
//
// Two variations of "end to end", for the collectives whose blocks are
// rank by rank (a Layout):
// - by parts: every tensor is `parts` equal parts, and the flat tensor
//   holds part 0 of every tensor in list order, then part 1 of every
//   tensor, and so on. A coalesced allgather's outputs and a coalesced
//   reduce-scatter's inputs are laid out so, `parts` = the world size: rank
//   r's block is part r of every tensor, as one collective over the flat
//   tensor has it;
// - in slots: tensor i at i x `slot` elements, each slot padded to `slot`
//   (zeros): all_to_all with unequal splits, as one alltoall of equal
//   blocks (Note [unequal all_to_all]).
struct Layout {
  int parts = 1;     // each tensor's numel must be divisible by it
  int64_t slot = 0;  // 0: tensors end to end; else each one's room
};
// A new flat tensor of `options` holding `list` laid out as `layout` says.
at::Tensor pack(const std::vector<at::Tensor>& list, const at::TensorOptions& options,
                Layout layout = {});
// A flat tensor of `options` with room for `list` laid out so (not filled).
at::Tensor staging_for(const std::vector<at::Tensor>& list, const at::TensorOptions& options,
                       Layout layout = {});
// A `finish` for make_work: copies `flat` back into `list`, laid out so.
std::function<void()> unpack(at::Tensor flat, std::vector<at::Tensor> list, Layout layout = {});

// A c10d Work over a gradwire Work (Note [future callbacks on the engine
// thread] in c10d_work.cpp); `finish` copies results out of staging
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

}  // namespace gradwire::torch::detail
