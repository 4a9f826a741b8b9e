// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The torch-version-specific glue: gradwire::torch::Backend's c10d::Backend
// overrides for the collectives DDP uses (names and signatures as of torch
// 2.15, whose Backend forwards all_gather_single/reduce_scatter_single/
// all_to_all_single to the underscore names we override), its creation
// over a c10d store, and the c10d::ProcessGroup around it. The Work is
// c10d_work.cpp's, the rest of the ProcessGroup surface c10d_ops.cpp's.
#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "c10d_helpers.h"
#include "gradwire/device_stream.h"
#include "gradwire/error.h"
#include "gradwire/torch/process_group.h"
#include "gradwire/types.h"
#include "group_rendezvous.h"

namespace gradwire::torch {

using namespace detail;

// Note [communicators at exit]: torch.distributed.destroy_process_group
// only drops torch's references; a group's Backend lives on while anything
// else holds one, often until the process exits, and Python does not free
// such objects at exit. Then the communicator's threads (engine, watchdog,
// store server) still run while the C++ runtime tears the process down
// around them, and the peers' store servers wait for clients that never
// hang up. gradwire.torch registers shutdown_all() with atexit: every
// Backend still alive closes its Communicator while the interpreter is
// whole; later collectives on it raise AbortedError.
namespace {
struct Registry {
  std::mutex mu;
  std::set<Backend*> live;
};
Registry& registry() {
  static Registry* r = new Registry();  // leaked: used from destructors at exit
  return *r;
}

const Communicator& non_null(const std::shared_ptr<Communicator>& comm) {
  if (!comm) {
    throw Error(ErrorCode::InvalidArgument, "gradwire::torch::Backend: the communicator is null");
  }
  return *comm;
}
}  // namespace

Backend::Backend(std::shared_ptr<Communicator> comm)
    : c10d::Backend(non_null(comm).rank(), non_null(comm).size()), comm_(std::move(comm)) {
  std::lock_guard<std::mutex> lk(registry().mu);
  registry().live.insert(this);
}

std::shared_ptr<Communicator> Backend::live(const char* op) const {
  std::lock_guard<std::mutex> lk(mu_);
  if (!comm_) {
    throw Error(ErrorCode::Aborted, "gradwire backend rank " + std::to_string(rank_) + ": " + op +
                                        ": the process is exiting and gradwire's communicators "
                                        "were shut down (Note [communicators at exit])");
  }
  // getSequenceNumberForGroup(): collectives only, which every rank of the
  // group calls alike (point-to-point differs between ranks by design).
  const std::string_view name(op);
  if (name != "send" && name != "recv" && name != "communicator") ++collectives_;
  return comm_;
}

Communicator& Backend::communicator() { return *live("communicator"); }

void Backend::shutdown() {
  std::shared_ptr<Communicator> comm;
  {
    std::lock_guard<std::mutex> lk(mu_);
    comm.swap(comm_);
  }
  // Destroyed here, or by the last collective call still using it.
}

void Backend::shutdown_all() {
  std::lock_guard<std::mutex> lk(registry().mu);
  for (Backend* b : registry().live) b->shutdown();
}

Backend::~Backend() {
  std::lock_guard<std::mutex> lk(registry().mu);
  registry().live.erase(this);
}

c10::intrusive_ptr<Backend> Backend::create(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout) {
  // Group rank 0 publishes where gradwire's own store will listen; every
  // member then bootstraps through it (Note [group bootstrap]). Without a
  // GRADWIRE_JOB_SECRET of the user's, rank 0 also generates the group's
  // secret and publishes it there: gradwire's store is then exactly as
  // protected as torch's own store (README "Running securely").
  // torchrun's agent store outlives a restart (--max-restarts), and the
  // group's prefix does not change with it: a key without the generation
  // let a restarted rank read the dead generation's address before the new
  // rank 0 overwrote it, and time out connecting there (about 1 restart in
  // 5, tests/ranks/torchrun_restart.sh).
  const char* generation = std::getenv("TORCHELASTIC_RESTART_COUNT");
  const std::string key =
      std::string("gradwire/store_address/") + (generation ? generation : "0");
  std::string text;
  if (rank == 0) {
    const char* master = std::getenv("MASTER_ADDR");
    const std::string host = reachable_address(master ? master : "");
    text = host + " " + std::to_string(free_port(host));
    if (!std::getenv("GRADWIRE_JOB_SECRET")) text += " " + random_secret();
    store->set(key, std::vector<uint8_t>(text.begin(), text.end()));
  } else {
    const auto v = store->get(key);
    text.assign(v.begin(), v.end());
  }
  const GroupRendezvous r = parse_rendezvous(text);
  gradwire::Options options;
  options.timeout = timeout;
  return c10::make_intrusive<Backend>(
      create_at(options, rank, size, r.host, r.port, r.secret));
}

c10::intrusive_ptr<c10d::Work> Backend::broadcast(std::vector<at::Tensor>& tensors,
                                                  const c10d::BroadcastOptions& opts) {
  const auto comm = live("broadcast");
  const std::string what = name(*comm, "broadcast");
  const at::Tensor& t = single(tensors, what);
  if (opts.rootTensor != 0) invalid(what + ": rootTensor must be 0");
  DeviceStreamScope scope(current_stream(t));
  auto w = comm->broadcast(t.data_ptr(), t.data_ptr(), count_of(t), to_dtype(t, what),
                            int(opts.rootRank));
  return make_work(rank_, c10d::OpType::BROADCAST, std::move(w), tensors, tensors);
}

c10::intrusive_ptr<c10d::Work> Backend::allreduce(std::vector<at::Tensor>& tensors,
                                                  const c10d::AllreduceOptions& opts) {
  const auto comm = live("allreduce");
  const std::string what = name(*comm, "allreduce");
  if (tensors.size() == 1 && tensors[0].is_sparse()) {
    return sparse_allreduce(tensors[0], opts, *comm, what);
  }
  const at::Tensor& t = single(tensors, what);
  DeviceStreamScope scope(current_stream(t));
  auto w = comm->allreduce(t.data_ptr(), t.data_ptr(), count_of(t), to_dtype(t, what),
                            to_op(opts.reduceOp, t, what));
  return make_work(rank_, c10d::OpType::ALLREDUCE, std::move(w), tensors, tensors);
}

c10::intrusive_ptr<c10d::Work> Backend::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions&) {
  const auto comm = live("allgather_into_tensor");
  const std::string what = name(*comm, "allgather_into_tensor");
  check_pair(input, output, what);
  numel_is(output, input.numel() * size_, what, "output (world size x input)");
  DeviceStreamScope scope(current_stream(input));
  auto w = comm->allgather(input.data_ptr(), output.data_ptr(), count_of(output),
                            to_dtype(output, what));
  return make_work(rank_, c10d::OpType::_ALLGATHER_BASE, std::move(w), {output}, {input, output});
}

c10::intrusive_ptr<c10d::Work> Backend::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  const auto comm = live("allgather");
  const std::string what = name(*comm, "allgather");
  const at::Tensor& in = single(inputs, what);
  // Gathered into one staging buffer, copied out as the Work completes
  // (Note [list staging]).
  Staged out = stage_outputs(outputs, in, size_, what);
  DeviceStreamScope scope(current_stream(in));
  auto w = comm->allgather(in.data_ptr(), out.flat.data_ptr(), count_of(out.flat),
                            to_dtype(in, what));
  return make_work(rank_, c10d::OpType::ALLGATHER, std::move(w), out.list, {in, out.flat},
                   unpack(out.flat, out.list));
}

c10::intrusive_ptr<c10d::Work> Backend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const auto comm = live("reduce_scatter_tensor");
  const std::string what = name(*comm, "reduce_scatter_tensor");
  check_pair(input, output, what);
  numel_is(input, output.numel() * size_, what, "input (world size x output)");
  DeviceStreamScope scope(current_stream(input));
  auto w = comm->reduce_scatter(input.data_ptr(), output.data_ptr(), count_of(input),
                                 to_dtype(input, what), to_op(opts.reduceOp, input, what));
  return make_work(rank_, c10d::OpType::_REDUCE_SCATTER_BASE, std::move(w), {output},
                   {input, output});
}

c10::intrusive_ptr<c10d::Work> Backend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const auto comm = live("reduce_scatter");
  const std::string what = name(*comm, "reduce_scatter");
  const at::Tensor& out = single(outputs, what);
  // Staged: the inputs need not be adjacent in memory (Note [list staging]).
  const at::Tensor flat = stage_inputs(inputs, out, size_, what).flat;
  DeviceStreamScope scope(current_stream(flat));
  auto w = comm->reduce_scatter(flat.data_ptr(), out.data_ptr(), count_of(flat),
                                 to_dtype(out, what), to_op(opts.reduceOp, out, what));
  return make_work(rank_, c10d::OpType::REDUCE_SCATTER, std::move(w), {out}, {flat, out});
}

// Note [unequal all_to_all]: gradwire's alltoall moves equal blocks. When
// the blocks may differ (all_to_all_single with split sizes, which
// DTensor's redistribution of uneven shards passes; all_to_all's lists),
// every rank first learns every rank's block sizes, sent and expected
// (one allgather of 2 x world size counts per rank, waited for here), and
// checks that what each rank sends each peer is what that peer expects:
// every rank reaches the same verdict, so a mismatch is an InvalidArgument
// on every rank, never a hang. Then the blocks travel as one alltoall in
// slots of the largest block, zero-padded (Note [list staging], in slots).
// Whether to exchange sizes must not depend on one rank's sizes (equal
// here, unequal elsewhere): all_to_all_single exchanges them whenever
// split sizes are given, so ranks pass split sizes on all ranks or on none
// (funcol always does); all_to_all always.
namespace {

// The blocks' sizes, agreed with every rank (Note [unequal all_to_all]).
struct Slots {
  int64_t slot = 0;     // the largest block, in tensor elements
  bool equal = false;   // every block of every rank has `slot` elements
};

Slots agree_on_slots(Communicator& comm, const std::vector<int64_t>& sends,
                     const std::vector<int64_t>& recvs, const std::string& what) {
  const size_t n = size_t(comm.size());
  std::vector<int64_t> mine(sends), all(2 * n * n);
  mine.insert(mine.end(), recvs.begin(), recvs.end());
  comm.allgather(mine.data(), all.data(), all.size(), DataType::Int64).wait();
  Slots s{.slot = all[0], .equal = true};
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      const int64_t sent = all[i * 2 * n + j], expected = all[j * 2 * n + n + i];
      if (sent != expected) {
        invalid(what + ": rank " + std::to_string(i) + " sends " + std::to_string(sent) +
                " elements to rank " + std::to_string(j) + ", which expects " +
                std::to_string(expected) + " (split sizes that do not match between ranks)");
      }
      s.equal = s.equal && sent == s.slot;
      s.slot = std::max(s.slot, sent);
    }
  }
  return s;
}

Slots agree_on_slots(Communicator& comm, const std::vector<at::Tensor>& inputs,
                     const std::vector<at::Tensor>& outputs, const std::string& what) {
  std::vector<int64_t> sends, recvs;
  for (const auto& t : inputs) sends.push_back(t.numel());
  for (const auto& t : outputs) recvs.push_back(t.numel());
  return agree_on_slots(comm, sends, recvs, what);
}

// One alltoall of `inputs[j]` (to rank j) into `outputs[i]` (from rank i)
// through staging tensors in slots of `slot` elements; `result` is what
// the Work's result() returns (the caller's tensors, not the views).
c10::intrusive_ptr<c10d::Work> alltoall_in_slots(Communicator& comm, c10d::OpType type,
                                                 const std::vector<at::Tensor>& inputs,
                                                 const std::vector<at::Tensor>& outputs,
                                                 std::vector<at::Tensor> result, int64_t slot,
                                                 const std::string& what) {
  const Layout slots{.slot = slot};
  const at::TensorOptions options = inputs[0].options();
  at::Tensor send = pack(inputs, options, slots);
  at::Tensor recv = staging_for(outputs, options, slots);
  DeviceStreamScope scope(current_stream(send));
  auto w = comm.alltoall(send.data_ptr(), recv.data_ptr(), count_of(send) / size_t(comm.size()),
                         to_dtype(send, what));
  return make_work(comm.rank(), type, std::move(w), std::move(result), {send, recv},
                   unpack(recv, outputs, slots));
}

// A tensor's rows (dim 0) split as `splits` says (equal parts when empty).
std::vector<at::Tensor> split_rows(const at::Tensor& t, std::vector<int64_t> splits, int size,
                                   const std::string& what, const char* which) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  if (splits.empty()) {
    if (rows % size != 0) {
      invalid(what + ": the " + which + "'s dim 0 (" + std::to_string(rows) +
              ") is not divisible by the world size " + std::to_string(size) +
              "; pass split sizes");
    }
    splits.assign(size_t(size), rows / size);
  }
  if (splits.size() != size_t(size)) {
    invalid(what + ": " + std::to_string(splits.size()) + " " + which +
            " split sizes for a world of " + std::to_string(size));
  }
  int64_t sum = 0;
  for (int64_t s : splits) {
    if (s < 0) invalid(what + ": a negative " + which + " split size");
    sum += s;
  }
  if (sum != rows) {
    invalid(what + ": the " + which + " split sizes add up to " + std::to_string(sum) +
            " rows, but its dim 0 is " + std::to_string(rows));
  }
  return t.dim() == 0 ? std::vector<at::Tensor>{t.reshape({1})} : t.split_with_sizes(splits);
}

}  // namespace

c10::intrusive_ptr<c10d::Work> Backend::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions&) {
  const auto comm = live("all_to_all_single");
  const std::string what = name(*comm, "all_to_all_single");
  check_pair(input, output, what);
  const auto inputs = split_rows(input, input_split_sizes, size_, what, "input");
  const auto outputs = split_rows(output, output_split_sizes, size_, what, "output");
  if (input_split_sizes.empty() && output_split_sizes.empty()) {
    numel_is(output, input.numel(), what, "output (like the input, without split sizes)");
  } else {
    const Slots s = agree_on_slots(*comm, inputs, outputs, what);
    if (!s.equal) {
      return alltoall_in_slots(*comm, c10d::OpType::ALLTOALL_BASE, inputs, outputs, {output},
                               s.slot, what);
    }
  }
  DeviceStreamScope scope(current_stream(input));
  auto w = comm->alltoall(input.data_ptr(), output.data_ptr(), count_of(input) / size_t(size_),
                           to_dtype(input, what));
  return make_work(rank_, c10d::OpType::ALLTOALL_BASE, std::move(w), {output}, {input, output});
}

c10::intrusive_ptr<c10d::Work> Backend::alltoall(std::vector<at::Tensor>& outputs,
                                                 std::vector<at::Tensor>& inputs,
                                                 const c10d::AllToAllOptions&) {
  const auto comm = live("all_to_all");
  const std::string what = name(*comm, "all_to_all");
  if (inputs.size() != size_t(size_) || outputs.size() != size_t(size_)) {
    invalid(what + ": expected " + std::to_string(size_) + " input and output tensors");
  }
  for (int r = 0; r < size_; ++r) {
    check_tensor(inputs[r], what);
    check_tensor(outputs[r], what);
    same_dtype(inputs[0], inputs[r], what);
    same_dtype(inputs[0], outputs[r], what);
  }
  // Note [list staging], both ways, in slots of the largest block.
  return alltoall_in_slots(*comm, c10d::OpType::ALLTOALL, inputs, outputs, outputs,
                           agree_on_slots(*comm, inputs, outputs, what).slot, what);
}

c10::intrusive_ptr<c10d::Work> Backend::barrier(const c10d::BarrierOptions&) {
  return make_work(rank_, c10d::OpType::BARRIER, live("barrier")->barrier(), {}, {});
}

c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(c10::intrusive_ptr<Backend> backend,
                                                          c10::intrusive_ptr<c10d::Store> store) {
  if (!backend) {
    throw Error(ErrorCode::InvalidArgument,
                "gradwire::torch::make_process_group: the backend is null");
  }
  auto pg = c10::make_intrusive<c10d::ProcessGroup>(std::move(store), backend->getRank(),
                                                    backend->getSize());
  // CUSTOM is c10d's type for a backend it does not know by name, as
  // torch.distributed.Backend.register_backend gives it; one Backend for
  // both device types (Note [CUDA tensors in the backend] in c10d_work.cpp).
  constexpr auto kType = c10d::ProcessGroup::BackendType::CUSTOM;
  pg->setBackend(c10::DeviceType::CPU, kType, backend);
  pg->setBackend(c10::DeviceType::CUDA, kType, backend);
  pg->setDefaultBackend(kType);
  return pg;
}

c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout) {
  return make_process_group(Backend::create(store, rank, size, timeout), store);
}

}  // namespace gradwire::torch
