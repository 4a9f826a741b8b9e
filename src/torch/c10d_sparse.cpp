// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [sparse allreduce]: all_reduce of a sparse COO tensor, as Gloo does
// it (the only other torch backend that takes one): every rank's coalesced
// indices and values are gathered, padded to the largest count of
// non-zeros, then summed as sparse tensors and coalesced, and the result
// replaces the input (sizes and non-zeros may change). SUM only; the shape,
// sparse dimensions and dtype must agree (checked first, a Mismatch on
// every rank otherwise). It runs three allgathers back to back on the
// calling thread: the Work it returns is already complete.
#include <ATen/ops/empty.h>
#include <ATen/ops/sparse_coo_tensor.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <string>
#include <vector>

#include "c10d_helpers.h"
#include "gradwire/error.h"
#include "gradwire/torch/process_group.h"

namespace gradwire::torch {

using namespace detail;

c10::intrusive_ptr<c10d::Work> Backend::sparse_allreduce(
    at::Tensor& t, const c10d::AllreduceOptions& opts, Communicator& comm,
    const std::string& what) {
  if (to_op(opts.reduceOp, what) != ReduceOp::Sum) {
    invalid(what + ": sparse tensors are reduced with SUM only (as Gloo does)");
  }
  if (t.layout() != at::kSparse) {
    invalid(what + ": sparse layout " + c10::str(t.layout()) + " is not supported (COO is)");
  }
  if (!t.device().is_cpu()) {
    invalid(what + ": sparse tensors on " + t.device().str() + " are not supported (CPU ones are)");
  }
  const at::Tensor in = t.coalesce();
  const at::Tensor values = in._values().contiguous();
  const DataType dtype = to_dtype(values, what);
  const int64_t sparse_dim = in.sparse_dim(), nnz = in._nnz();
  int64_t row = 1;  // elements per non-zero (its dense dimensions)
  for (int64_t i = 1; i < values.dim(); ++i) row *= values.size(i);
  // What every rank must agree on, and its count of non-zeros.
  std::vector<int64_t> mine{sparse_dim, row, int64_t(values.scalar_type()), int64_t(t.dim())};
  for (int64_t d : t.sizes()) mine.push_back(d);
  const int64_t k = int64_t(mine.size()) + 1;
  std::vector<int64_t> all(size_t(k) * size_);
  mine.push_back(nnz);
  comm.allgather(mine.data(), all.data(), all.size(), DataType::Int64).wait();
  std::vector<int64_t> counts(size_);
  for (int r = 0; r < size_; ++r) {
    const bool same = std::size_t(all[r * k + 3]) == t.sizes().size() &&
                      std::equal(all.begin() + r * k, all.begin() + r * k + k - 1, mine.begin());
    if (!same) {
      throw Error(ErrorCode::Mismatch,
                  what + ": rank " + std::to_string(r) + "'s sparse tensor differs from rank " +
                      std::to_string(rank_) + "'s in shape, sparse dimensions or dtype; likely "
                      "cause: the ranks passed different tensors");
    }
    counts[r] = all[r * k + k - 1];
  }
  const int64_t most = *std::max_element(counts.begin(), counts.end());
  at::Tensor indices = at::zeros({sparse_dim, most}, in._indices().options());
  indices.narrow(1, 0, nnz).copy_(in._indices());
  std::vector<int64_t> value_shape = values.sizes().vec();
  value_shape[0] = most;
  at::Tensor padded = at::zeros(value_shape, values.options());
  padded.narrow(0, 0, nnz).copy_(values);
  at::Tensor all_indices = at::empty({int64_t(size_), sparse_dim, most}, indices.options());
  value_shape.insert(value_shape.begin(), int64_t(size_));
  at::Tensor all_values = at::empty(value_shape, values.options());
  comm.allgather(indices.data_ptr(), all_indices.data_ptr(), size_t(all_indices.numel()),
                 DataType::Int64).wait();
  Work last = comm.allgather(padded.data_ptr(), all_values.data_ptr(),
                             count_of(padded) * size_t(size_), dtype);
  last.wait();
  at::Tensor sum;
  for (int r = 0; r < size_; ++r) {
    at::Tensor part = at::sparse_coo_tensor(all_indices[r].narrow(1, 0, counts[r]),
                                            all_values[r].narrow(0, 0, counts[r]), t.sizes(),
                                            values.options().layout(at::kSparse));
    sum = r == 0 ? part : sum + part;
  }
  t.copy_(sum.coalesce());
  return make_work(rank_, c10d::OpType::ALLREDUCE, std::move(last), {t}, {t});
}

}  // namespace gradwire::torch
