// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "c10d_helpers.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <string>
#include <vector>

namespace gradwire::torch::detail {

const at::Tensor& single(std::vector<at::Tensor>& tensors, const std::string& what) {
  if (tensors.size() != 1) {
    invalid(what + ": expected one tensor per process, got " + std::to_string(tensors.size()));
  }
  check_tensor(tensors[0], what);
  return tensors[0];
}

ReduceOp to_op(const c10d::ReduceOp& op, const std::string& what) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return ReduceOp::Sum;
    case c10d::ReduceOp::AVG: return ReduceOp::Avg;
    case c10d::ReduceOp::PRODUCT: return ReduceOp::Prod;
    case c10d::ReduceOp::MIN: return ReduceOp::Min;
    case c10d::ReduceOp::MAX: return ReduceOp::Max;
    default:
      invalid(what + ": reduce op " + std::to_string(int(op.op_)) +
              " is not supported (SUM, AVG, PRODUCT, MIN, MAX)");
  }
}

// Note [complex as pairs of reals] (tensors.cpp): element-wise sums and
// averages only.
ReduceOp to_op(const c10d::ReduceOp& op, const at::Tensor& t, const std::string& what) {
  const ReduceOp r = to_op(op, what);
  if (t.is_complex() && r != ReduceOp::Sum && r != ReduceOp::Avg) {
    invalid(what + ": reduce op " + std::string(to_string(r)) + " is not defined for complex "
            "tensors (SUM and AVG are)");
  }
  return r;
}

void same_dtype(const at::Tensor& a, const at::Tensor& b, const std::string& what) {
  if (a.scalar_type() != b.scalar_type()) {
    invalid(what + ": input is " + std::string(c10::toString(a.scalar_type())) +
            " but output is " + std::string(c10::toString(b.scalar_type())));
  }
}

void check_pair(const at::Tensor& input, const at::Tensor& output, const std::string& what) {
  check_tensor(output, what);
  check_tensor(input, what);
  same_dtype(input, output, what);
}

void numel_is(const at::Tensor& t, int64_t expected, const std::string& what,
              const char* which) {
  if (t.numel() != expected) {
    invalid(what + ": " + which + " has " + std::to_string(t.numel()) + " elements, expected " +
            std::to_string(expected));
  }
}

std::string name(const Communicator& c, const char* op) {
  return "gradwire backend rank " + std::to_string(c.rank()) + ": " + op;
}

// ---------------------------------------------------------------- Note [list staging]

namespace {

// `lists` holds one list of `size` tensors, each checked against `like`.
const std::vector<at::Tensor>& checked_list(std::vector<std::vector<at::Tensor>>& lists,
                                            const at::Tensor& like, int size,
                                            const std::string& what, bool root, bool outputs) {
  const char* role = outputs ? "output" : "input";
  if (lists.size() != 1 || lists[0].size() != size_t(size)) {
    invalid(what + (root ? ": the root expects" : ": expected") + " one list of " +
            std::to_string(size) + " " + role + " tensors");
  }
  for (const auto& t : lists[0]) {
    check_tensor(t, what);
    if (outputs) {
      same_dtype(like, t, what);
      numel_is(t, like.numel(), what, "an output tensor (like the input)");
    } else {
      same_dtype(t, like, what);
      numel_is(t, like.numel(), what, "an input tensor (like the output)");
    }
  }
  return lists[0];
}

}  // namespace

Staged stage_outputs(std::vector<std::vector<at::Tensor>>& lists, const at::Tensor& input, int size,
                     const std::string& what, bool root) {
  const auto& list = checked_list(lists, input, size, what, root, /*outputs=*/true);
  return {list, staging_for(list, input.options())};
}

Staged stage_inputs(std::vector<std::vector<at::Tensor>>& lists, const at::Tensor& output, int size,
                    const std::string& what, bool root) {
  const auto& list = checked_list(lists, output, size, what, root, /*outputs=*/false);
  return {list, pack(list, output.options())};
}

namespace {

// Where tensor i of `list` lies in a flat tensor viewed as parts x row:
// columns [column[i], column[i] + numel / parts) of every row.
struct Placement {
  int64_t row = 0;
  std::vector<int64_t> column;
};

Placement place(const std::vector<at::Tensor>& list, Layout layout) {
  Placement p;
  for (const auto& t : list) {
    p.column.push_back(layout.slot ? int64_t(p.column.size()) * layout.slot : p.row);
    p.row += t.numel() / layout.parts;
  }
  if (layout.slot) p.row = int64_t(list.size()) * layout.slot;
  return p;
}

// Tensor i's elements in `flat` (laid out by `layout`), shaped parts x n.
at::Tensor window(const at::Tensor& flat, const Placement& p, const Layout& layout, size_t i,
                  int64_t numel) {
  return flat.view({layout.parts, p.row}).narrow(1, p.column[i], numel / layout.parts);
}

}  // namespace

at::Tensor staging_for(const std::vector<at::Tensor>& list, const at::TensorOptions& options,
                       Layout layout) {
  const int64_t total = place(list, layout).row * layout.parts;
  // Padding is sent: zeros rather than whatever the allocator held.
  return layout.slot ? at::zeros({total}, options) : at::empty({total}, options);
}

at::Tensor pack(const std::vector<at::Tensor>& list, const at::TensorOptions& options,
                Layout layout) {
  at::Tensor flat = staging_for(list, options, layout);
  const Placement p = place(list, layout);
  for (size_t i = 0; i < list.size(); ++i) {
    const int64_t n = list[i].numel();
    window(flat, p, layout, i, n).copy_(list[i].reshape({layout.parts, n / layout.parts}));
  }
  return flat;
}

std::function<void()> unpack(at::Tensor flat, std::vector<at::Tensor> list, Layout layout) {
  return [flat = std::move(flat), list = std::move(list), layout]() mutable {
    const Placement p = place(list, layout);
    for (size_t i = 0; i < list.size(); ++i) {
      const int64_t n = list[i].numel();
      list[i].view({layout.parts, n / layout.parts}).copy_(window(flat, p, layout, i, n));
    }
  };
}

}  // namespace gradwire::torch::detail
