// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The rest of the ProcessGroup surface (issues 21 and 43): point-to-point
// (send/recv, so isend/irecv and batch_isend_irecv), reduce, gather,
// scatter, the coalesced collectives, and monitored_barrier.
// Each is a thin adapter over one Communicator call.
#include <ATen/ops/empty.h>

#include <chrono>
#include <string>
#include <vector>

#include "c10d_helpers.h"
#include "gradwire/device_stream.h"
#include "gradwire/error.h"
#include "gradwire/torch/process_group.h"

namespace gradwire::torch {

using namespace detail;

namespace {

void same_kind(const std::vector<at::Tensor>& tensors, const std::string& what) {
  for (const auto& t : tensors) {
    check_tensor(t, what);
    same_dtype(tensors[0], t, what);
    if (t.device() != tensors[0].device()) {
      invalid(what + ": the tensors are on " + tensors[0].device().str() + " and " +
              t.device().str() + "; coalesced tensors must share one device");
    }
  }
}

}  // namespace

// Note [point-to-point] in src/runtime/p2p.h. CUDA tensors go through a
// host copy: the Communicator's messages are host memory for now.
c10::intrusive_ptr<c10d::Work> Backend::send(std::vector<at::Tensor>& tensors,
                                             int dst, int tag) {
  const auto comm = live("send");
  const std::string what = name(*comm, "send");
  const at::Tensor& t = single(tensors, what);
  const at::Tensor host = t.is_cuda() ? t.cpu() : t;
  auto w = comm->send(host.data_ptr(), count_of(host), to_dtype(host, what), dst,
                      uint32_t(tag));
  return make_work(rank_, c10d::OpType::SEND, std::move(w), {}, {host});
}

c10::intrusive_ptr<c10d::Work> Backend::recv(std::vector<at::Tensor>& tensors,
                                             int src, int tag) {
  const auto comm = live("recv");
  const std::string what = name(*comm, "recv");
  const at::Tensor& t = single(tensors, what);
  if (!t.is_cuda()) {
    auto w = comm->recv(t.data_ptr(), count_of(t), to_dtype(t, what), src, uint32_t(tag));
    return make_work(rank_, c10d::OpType::RECV, std::move(w), {t}, {t});
  }
  at::Tensor host = at::empty(t.sizes(), t.options().device(at::kCPU));
  auto w = comm->recv(host.data_ptr(), count_of(host), to_dtype(host, what), src, uint32_t(tag));
  at::Tensor out = t;
  return make_work(rank_, c10d::OpType::RECV, std::move(w), {t}, {host},
                   [out, host]() mutable { out.copy_(host); });
}

c10::intrusive_ptr<c10d::Work> Backend::recvAnysource(std::vector<at::Tensor>& tensors,
                                                      int tag) {
  const auto comm = live("recv");
  const std::string what = name(*comm, "recv");
  const at::Tensor& t = single(tensors, what);
  auto source = std::make_shared<int>(-1);
  at::Tensor host = t.is_cuda() ? at::empty(t.sizes(), t.options().device(at::kCPU)) : t;
  auto w = comm->recv_any(host.data_ptr(), count_of(host), to_dtype(host, what), uint32_t(tag),
                          source.get());
  std::function<void()> finish;
  if (t.is_cuda()) finish = [out = t, host]() mutable { out.copy_(host); };
  return make_recv_any_work(rank_, std::move(w), {t}, source, std::move(finish));
}

c10::intrusive_ptr<c10d::Work> Backend::reduce(std::vector<at::Tensor>& tensors,
                                               const c10d::ReduceOptions& opts) {
  const auto comm = live("reduce");
  const std::string what = name(*comm, "reduce");
  const at::Tensor& t = single(tensors, what);
  if (opts.rootTensor != 0) invalid(what + ": rootTensor must be 0");
  const int root = int(opts.rootRank);
  DeviceStreamScope scope(current_stream(t));
  // In place on the root; elsewhere the tensor is only read.
  auto w = comm->reduce(t.data_ptr(), rank_ == root ? t.data_ptr() : nullptr, count_of(t),
                        to_dtype(t, what), to_op(opts.reduceOp, t, what), root);
  return make_work(rank_, c10d::OpType::REDUCE, std::move(w), tensors, tensors);
}

c10::intrusive_ptr<c10d::Work> Backend::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  const auto comm = live("gather");
  const std::string what = name(*comm, "gather");
  const at::Tensor& in = single(inputs, what);
  const int root = int(opts.rootRank);
  DeviceStreamScope scope(current_stream(in));
  if (rank_ != root) {
    if (!outputs.empty() && !outputs[0].empty()) {
      invalid(what + ": only the root (rank " + std::to_string(root) +
              ") may pass output tensors");
    }
    auto w = comm->gather(in.data_ptr(), nullptr, count_of(in), to_dtype(in, what), root);
    return make_work(rank_, c10d::OpType::GATHER, std::move(w), {}, {in});
  }
  // Gathered into one buffer, copied out as the Work completes (Note
  // [list staging]).
  Staged out = stage_outputs(outputs, in, size_, what, /*root=*/true);
  auto w = comm->gather(in.data_ptr(), out.flat.data_ptr(), count_of(in), to_dtype(in, what),
                        root);
  return make_work(rank_, c10d::OpType::GATHER, std::move(w), out.list, {in, out.flat},
                   unpack(out.flat, out.list));
}

c10::intrusive_ptr<c10d::Work> Backend::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  const auto comm = live("scatter");
  const std::string what = name(*comm, "scatter");
  const at::Tensor& out = single(outputs, what);
  const int root = int(opts.rootRank);
  DeviceStreamScope scope(current_stream(out));
  if (rank_ != root) {
    if (!inputs.empty() && !inputs[0].empty()) {
      invalid(what + ": only the root (rank " + std::to_string(root) + ") may pass input tensors");
    }
    auto w = comm->scatter(nullptr, out.data_ptr(), count_of(out), to_dtype(out, what), root);
    return make_work(rank_, c10d::OpType::SCATTER, std::move(w), {out}, {out});
  }
  // Note [list staging]
  const at::Tensor flat = stage_inputs(inputs, out, size_, what, /*root=*/true).flat;
  auto w = comm->scatter(flat.data_ptr(), out.data_ptr(), count_of(out), to_dtype(out, what),
                         root);
  return make_work(rank_, c10d::OpType::SCATTER, std::move(w), {out}, {flat, out});
}

// One allreduce over the tensors laid end to end, as Gloo's
// allreduce_coalesced: the same dtype and device for all.
c10::intrusive_ptr<c10d::Work> Backend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  const auto comm = live("allreduce_coalesced");
  const std::string what = name(*comm, "allreduce_coalesced");
  if (tensors.empty()) invalid(what + ": no tensors");
  same_kind(tensors, what);
  at::Tensor flat = pack(tensors, tensors[0].options());  // Note [list staging]
  DeviceStreamScope scope(current_stream(flat));
  auto w = comm->allreduce(flat.data_ptr(), flat.data_ptr(), count_of(flat),
                           to_dtype(flat, what), to_op(opts.reduceOp, flat, what));
  return make_work(rank_, c10d::OpType::ALLREDUCE_COALESCED, std::move(w), tensors, {flat},
                   unpack(flat, tensors));
}

// outputs[r][i] receives rank r's inputs[i]: one allgather of every rank's
// inputs laid end to end.
c10::intrusive_ptr<c10d::Work> Backend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  const auto comm = live("allgather_coalesced");
  const std::string what = name(*comm, "allgather_coalesced");
  if (inputs.empty()) invalid(what + ": no tensors");
  same_kind(inputs, what);
  if (outputs.size() != size_t(size_)) {
    invalid(what + ": expected " + std::to_string(size_) + " output lists, got " +
            std::to_string(outputs.size()));
  }
  for (auto& list : outputs) {
    if (list.size() != inputs.size()) {
      invalid(what + ": every output list must hold " + std::to_string(inputs.size()) +
              " tensors, one per input");
    }
    for (size_t i = 0; i < list.size(); ++i) {
      check_tensor(list[i], what);
      same_dtype(inputs[i], list[i], what);
      numel_is(list[i], inputs[i].numel(), what, "an output tensor (like its input)");
    }
  }
  // Note [list staging]: every rank's inputs end to end, and the lists of
  // outputs, rank after rank, end to end.
  at::Tensor flat_in = pack(inputs, inputs[0].options());
  std::vector<at::Tensor> flat_outs;
  for (auto& list : outputs) flat_outs.insert(flat_outs.end(), list.begin(), list.end());
  at::Tensor flat_out = staging_for(flat_outs, flat_in.options());
  DeviceStreamScope scope(current_stream(flat_in));
  auto w = comm->allgather(flat_in.data_ptr(), flat_out.data_ptr(), count_of(flat_out),
                           to_dtype(flat_in, what));
  return make_work(rank_, c10d::OpType::ALLGATHER_COALESCED, std::move(w), flat_outs,
                   {flat_in, flat_out}, unpack(flat_out, flat_outs));
}

// Note [coalesced single-tensor collectives]: FSDP2's state dicts and
// DTensor.full_tensor() reach the backend through the functional
// collectives, whose all_gather_into_tensor and reduce_scatter_tensor are
// the coalesced forms with one pair; FSDP2's gradients, and
// torch.distributed's _coalescing_manager, use them with several. One pair
// is the single-tensor collective (no staging); several are one
// collective over flat staging tensors laid out by parts (Note [list
// staging]): rank r's block holds part r of every tensor, so the
// collective's sharding is each pair's.
namespace {

enum class Direction { Gather, Scatter };

// Gather: outputs[i] holds world size x inputs[i]'s elements; scatter:
// inputs[i] world size x outputs[i]'s. One dtype and device for all.
void check_coalesced(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                     int size, Direction direction, const std::string& what) {
  if (inputs.empty()) invalid(what + ": no tensors");
  if (outputs.size() != inputs.size()) {
    invalid(what + ": " + std::to_string(inputs.size()) + " inputs but " +
            std::to_string(outputs.size()) + " outputs; one output per input");
  }
  same_kind(inputs, what);
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_pair(inputs[i], outputs[i], what);
    if (outputs[i].device() != inputs[0].device()) {
      invalid(what + ": output " + std::to_string(i) + " is on " + outputs[i].device().str() +
              " but the inputs on " + inputs[0].device().str());
    }
    if (direction == Direction::Gather) {
      numel_is(outputs[i], inputs[i].numel() * size, what, "an output (world size x its input)");
    } else {
      numel_is(inputs[i], outputs[i].numel() * size, what, "an input (world size x its output)");
    }
  }
}

}  // namespace

c10::intrusive_ptr<c10d::Work> Backend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  if (outputs.size() == 1 && inputs.size() == 1) {
    return _allgather_base(outputs[0], inputs[0], opts);
  }
  const auto comm = live("allgather_into_tensor_coalesced");
  const std::string what = name(*comm, "allgather_into_tensor_coalesced");
  check_coalesced(outputs, inputs, size_, Direction::Gather, what);
  const at::Tensor flat_in = pack(inputs, inputs[0].options());
  const Layout by_rank{.parts = size_};
  at::Tensor flat_out = staging_for(outputs, flat_in.options(), by_rank);
  DeviceStreamScope scope(current_stream(flat_in));
  auto w = comm->allgather(flat_in.data_ptr(), flat_out.data_ptr(), count_of(flat_out),
                           to_dtype(flat_in, what));
  return make_work(rank_, c10d::OpType::ALLGATHER_INTO_TENSOR_COALESCED, std::move(w), outputs,
                   {flat_in, flat_out}, unpack(flat_out, outputs, by_rank));
}

c10::intrusive_ptr<c10d::Work> Backend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  if (outputs.size() == 1 && inputs.size() == 1) {
    return _reduce_scatter_base(outputs[0], inputs[0], opts);
  }
  const auto comm = live("reduce_scatter_tensor_coalesced");
  const std::string what = name(*comm, "reduce_scatter_tensor_coalesced");
  check_coalesced(outputs, inputs, size_, Direction::Scatter, what);
  const at::Tensor flat_in = pack(inputs, inputs[0].options(), Layout{.parts = size_});
  at::Tensor flat_out = staging_for(outputs, flat_in.options());
  DeviceStreamScope scope(current_stream(flat_in));
  auto w = comm->reduce_scatter(flat_in.data_ptr(), flat_out.data_ptr(), count_of(flat_in),
                                to_dtype(flat_in, what), to_op(opts.reduceOp, flat_in, what));
  return make_work(rank_, c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED, std::move(w), outputs,
                   {flat_in, flat_out}, unpack(flat_out, outputs));
}

// Note [monitored barrier]: Gloo's semantics and words. Every rank but 0
// reports to rank 0 and waits for its acknowledgement; rank 0 waits up to
// `timeout` for the reports and names the ranks that did not come (the
// first, or all with wait_all_ranks). A failure leaves the late ranks'
// messages posted; the process group is not meant to be used after it.
void Backend::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  const auto comm = live("monitored_barrier");
  constexpr uint32_t kReportTag = 0xfffffff0u, kAckTag = 0xfffffff1u;
  auto timeout = opts.timeout;
  if (timeout == c10d::kUnsetTimeout) {
    timeout = std::chrono::duration_cast<std::chrono::milliseconds>(comm->options().timeout);
  }
  const std::string ms = std::to_string(timeout.count()) + " ms";
  if (timeout.count() <= 0) {
    // Gloo's words for a deadline this rank exhausted itself; nothing posted.
    throw Error(ErrorCode::Timeout, "Rank " + std::to_string(rank_) +
                                        " timed out in monitoredBarrier after " + ms);
  }
  uint8_t token = 1;
  if (rank_ != 0) {
    comm->send(&token, 1, DataType::UInt8, 0, kReportTag);
    uint8_t ack = 0;
    auto w = comm->recv(&ack, 1, DataType::UInt8, 0, kAckTag);
    try {
      w.wait(timeout);
    } catch (const Error& e) {
      throw Error(e.code(), "Rank " + std::to_string(rank_) +
                                " successfully reached monitoredBarrier, but received errors "
                                "while waiting for send/recv from rank 0: " + e.message());
    }
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<uint8_t> reports(size_t(size_), 0);
  std::vector<Work> works(static_cast<size_t>(size_));
  for (int r = 1; r < size_; ++r) {
    works[r] = comm->recv(&reports[r], 1, DataType::UInt8, r, kReportTag);
  }
  std::vector<int> missing;
  for (int r = 1; r < size_; ++r) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    try {
      works[r].wait(std::max(left, std::chrono::milliseconds(1)));
    } catch (const Error& e) {
      if (e.code() != ErrorCode::Timeout || works[r].test()) throw;
      missing.push_back(r);
      if (!wait_all_ranks) break;
    }
  }
  if (!missing.empty()) {
    std::string ranks;
    for (int r : missing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    throw Error(ErrorCode::Timeout, "[Rank 0]: " + std::string(missing.size() > 1 ? "Ranks " : "Rank ") +
                                        ranks + " failed to pass monitoredBarrier in " + ms +
                                        " (Timed out waiting for " + ranks + ")");
  }
  std::vector<Work> acks;
  for (int r = 1; r < size_; ++r) acks.push_back(comm->send(&token, 1, DataType::UInt8, r, kAckTag));
  for (auto& a : acks) a.wait();
}

}  // namespace gradwire::torch
