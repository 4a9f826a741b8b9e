// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The torch-version-specific glue: c10d::Backend and c10d::Work overrides
// (names and signatures as of torch 2.15, whose Backend forwards
// all_gather_single/reduce_scatter_single/all_to_all_single to the
// underscore names we override). The rest of the extension uses only
// stable ATen API.
#include <ATen/ThreadLocalState.h>
#include <ATen/ops/empty.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/jit/python/pybind_utils.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>

#include "../rendezvous.h"
#include "backend.h"
#include "c10d_helpers.h"
#include "gradwire/device_stream.h"
#include "gradwire/error.h"
#include "gradwire/types.h"

namespace gradwire::python {

namespace py = pybind11;

// The helpers of c10d_helpers.h.
[[noreturn]] void invalid(const std::string& msg) {
  throw Error(ErrorCode::InvalidArgument, msg);
}

DataType to_dtype(const at::Tensor& t, const std::string& what) {
  switch (t.scalar_type()) {
    case at::kFloat: return DataType::Float32;
    case at::kDouble: return DataType::Float64;
    case at::kHalf: return DataType::Float16;
    case at::kBFloat16: return DataType::BFloat16;
    case at::kInt: return DataType::Int32;
    case at::kLong: return DataType::Int64;
    case at::kByte: return DataType::UInt8;
    case at::kChar: return DataType::Int8;
    case at::kShort: return DataType::Int16;
    case at::kBool: return DataType::Bool;
    // Note [complex as pairs of reals]: as Gloo and NCCL do.
    case at::kComplexFloat: return DataType::Float32;
    case at::kComplexDouble: return DataType::Float64;
    case at::kComplexHalf: return DataType::Float16;
    default:
      invalid(what + ": dtype " + std::string(c10::toString(t.scalar_type())) +
              " is not supported by the gradwire backend (float32/64, float16, bfloat16, "
              "int8/16/32/64, uint8, bool, complex64/128, complex32)");
  }
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

// Note [complex as pairs of reals]: a complex tensor of n elements is 2n
// reals to gradwire; sums and averages are the same element by element, so
// only SUM and AVG are accepted for it (as in Gloo).
size_t count_of(const at::Tensor& t) { return size_t(t.numel()) * (t.is_complex() ? 2 : 1); }

ReduceOp to_op(const c10d::ReduceOp& op, const at::Tensor& t, const std::string& what) {
  const ReduceOp r = to_op(op, what);
  if (t.is_complex() && r != ReduceOp::Sum && r != ReduceOp::Avg) {
    invalid(what + ": reduce op " + std::string(to_string(r)) + " is not defined for complex "
            "tensors (SUM and AVG are)");
  }
  return r;
}

void check_tensor(const at::Tensor& t, const std::string& what) {
  if (!t.device().is_cpu() && !t.is_cuda()) {
    invalid(what + ": tensors on " + t.device().str() +
            " are not supported by the gradwire backend (CPU and CUDA tensors are)");
  }
  if (t.layout() != at::kStrided) invalid(what + ": sparse tensors are not supported");
  if (!t.is_contiguous()) {
    invalid(what + ": the tensor is not contiguous (gradwire reduces in place; pass "
                   "tensor.contiguous() and copy back)");
  }
  (void)to_dtype(t, what);
}

void* current_stream(const at::Tensor& t) {
  if (!t.is_cuda()) return nullptr;
  return c10::impl::getDeviceGuardImpl(t.device().type())->getStream(t.device()).native_handle();
}

const at::Tensor& single(std::vector<at::Tensor>& tensors, const std::string& what) {
  if (tensors.size() != 1) {
    invalid(what + ": expected one tensor per process, got " + std::to_string(tensors.size()));
  }
  check_tensor(tensors[0], what);
  return tensors[0];
}

void same_dtype(const at::Tensor& a, const at::Tensor& b, const std::string& what) {
  if (a.scalar_type() != b.scalar_type()) {
    invalid(what + ": input is " + std::string(c10::toString(a.scalar_type())) +
            " but output is " + std::string(c10::toString(b.scalar_type())));
  }
}

void numel_is(const at::Tensor& t, int64_t expected, const std::string& what,
              const char* which) {
  if (t.numel() != expected) {
    invalid(what + ": " + which + " has " + std::to_string(t.numel()) + " elements, expected " +
            std::to_string(expected));
  }
}

namespace {

// Note [interruptible wait] (python/src/common.cpp) for c10d's Work.wait,
// which torch's binding calls with the GIL released: between slices the
// Python main thread takes the GIL briefly to run signal handlers.
uint64_t g_main_thread = 0;

void check_signals() {
  if (!Py_IsInitialized() || PyThread_get_thread_ident() != g_main_thread) return;
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

// Note [CUDA tensors in the backend]: a CUDA tensor's collective goes to
// the Communicator's GPU path (NCCL, or staged: GRADWIRE_DEVICE_PATH) after
// the work on PyTorch's current stream (a DeviceStreamScope, Note [producer
// stream]); the gradwire Work completes once the GPU is done, so the
// future, made with the tensors' device, can be completed from the poller
// or engine thread, and its callbacks and waiters need no further sync.
// Copies out of a staging buffer (`finish`) are synchronised before the
// Work completes, so wait() returns readable results on any stream.
std::optional<c10::Device> cuda_device_of(const std::vector<at::Tensor>& tensors) {
  for (const auto& t : tensors) {
    if (t.defined() && t.is_cuda()) return t.device();
  }
  return std::nullopt;
}


// A c10d Work over a gradwire Work. `finish` (copying results out of a
// staging buffer) runs on gradwire's engine thread as the Work completes,
// before wait() returns.
//
// Note [future callbacks on the engine thread]: the future is completed
// there too, so its callbacks (DDP's bucket handling, a
// comm hook's `then`, taking the GIL for Python ones) run inline, as gloo's
// run on its worker threads. Handing them to torch's inter-op pool instead
// cost a thread hop per bucket: DDP steps 1.3-1.9x slower on a loaded 2-core
// host. The price: a callback must not wait for another collective of the
// same group (the engine thread would wait for itself, until the deadline).
//
// Note [copy-out in the caller's mode]: `finish` runs on the engine thread
// under the calling thread's ThreadLocalState (grad mode, inference mode,
// dispatch keys), as at::launch and the autograd engine do: outputs made
// under torch.inference_mode() are inference tensors, and copying into them
// outside inference mode raised, so all_gather/all_to_all under
// inference_mode left stale outputs. The Work is one thing to its user:
// wait(), isSuccess(), exception() and the future all report the first
// failure of the collective or of the copy-out, never one without the
// other (the copy-out's error used to reach only the future).
class GradwireWork : public c10d::Work {
 public:
  GradwireWork(int rank, c10d::OpType type, gradwire::Work work, std::vector<at::Tensor> outputs,
               std::vector<at::Tensor> keep_alive, std::function<void()> finish = {})
      : c10d::Work(rank, type), work_(std::move(work)), outputs_(std::move(outputs)) {
    // CPU futures need no stream synchronisation; CUDA ones name their
    // device (Note [CUDA tensors in the backend]).
    std::optional<c10::Device> device = cuda_device_of(outputs_);
    if (!device) device = cuda_device_of(keep_alive);
    std::vector<c10::Device> devices;
    if (device) devices.push_back(*device);
    future_ = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()), std::move(devices));
    // Only Works with a copy-out pay for capturing the caller's state.
    std::optional<at::ThreadLocalState> caller;
    if (finish) caller.emplace();
    work_.then([fut = future_, outputs = outputs_, keep_alive = std::move(keep_alive),
                finish = std::move(finish), device,
                caller = std::move(caller)](std::exception_ptr error) {
      if (!error && finish) {
        try {
          at::ThreadLocalStateGuard mode(*caller);
          finish();
          if (device) {
            // The copies were enqueued on this thread's current stream.
            c10::impl::getDeviceGuardImpl(device->type())->getStream(*device).synchronize();
          }
        } catch (...) {
          error = std::current_exception();
        }
      }
      if (error) {
        fut->setError(error);
      } else {
        fut->markCompleted(c10::IValue(outputs));
      }
    });
  }

  // Complete once the collective and the copy-out are (the future is
  // completed last, Note [copy-out in the caller's mode]).
  bool isCompleted() override { return future_->completed(); }
  bool isSuccess() const override { return future_->completed() && !future_->hasError(); }
  std::exception_ptr exception() const override {
    if (future_->completed() && future_->hasError()) return future_->exception_ptr();
    return work_.error();
  }
  std::vector<at::Tensor> result() override { return outputs_; }
  // A receive from any source: the sender, once complete.
  int sourceRank() const override {
    if (!source_) return c10d::Work::sourceRank();
    return *source_;
  }
  void set_source(std::shared_ptr<int> source) { source_ = std::move(source); }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  bool wait(std::chrono::milliseconds timeout) override {
    using clock = std::chrono::steady_clock;
    const bool bounded = timeout.count() > 0;  // kNoTimeout (0): the collective's deadline
    const auto deadline = clock::now() + timeout;
    while (!work_.test()) {
      auto slice = std::chrono::milliseconds(50);
      if (bounded) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
        if (left.count() <= 0) {
          throw Error(ErrorCode::Timeout, work_.describe() + ": Timed out in Work.wait(timeout=" +
                                              std::to_string(timeout.count()) +
                                              " ms) before the collective finished");
        }
        slice = std::min(slice, left);
      }
      try {
        work_.wait(slice);
      } catch (const Error& e) {
        if (e.code() != ErrorCode::Timeout || work_.test()) break;
      }
      check_signals();
    }
    work_.wait();  // rethrows the collective's gradwire::Error
    // The engine thread completes the future right after the collective,
    // once the copy-out ran: a short wait, never for another collective.
    future_->wait();
    if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
    return true;
  }

 private:
  gradwire::Work work_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::shared_ptr<int> source_;
};

}  // namespace

c10::intrusive_ptr<c10d::Work> make_work(int rank, c10d::OpType type, gradwire::Work work,
                                         std::vector<at::Tensor> outputs,
                                         std::vector<at::Tensor> keep_alive,
                                         std::function<void()> finish) {
  return c10::make_intrusive<GradwireWork>(rank, type, std::move(work), std::move(outputs),
                                           std::move(keep_alive), std::move(finish));
}

c10::intrusive_ptr<c10d::Work> make_recv_any_work(int rank, gradwire::Work work,
                                                  std::vector<at::Tensor> outputs,
                                                  std::shared_ptr<int> source,
                                                  std::function<void()> finish) {
  auto w = c10::make_intrusive<GradwireWork>(rank, c10d::OpType::RECVANYSOURCE, std::move(work),
                                             outputs, outputs, std::move(finish));
  w->set_source(std::move(source));
  return w;
}

std::string name(const Communicator& c, const char* op) {
  return "gradwire backend rank " + std::to_string(c.rank()) + ": " + op;
}

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
  std::set<GradwireBackend*> live;
};
Registry& registry() {
  static Registry* r = new Registry();  // leaked: used from destructors at exit
  return *r;
}
}  // namespace

GradwireBackend::GradwireBackend(std::unique_ptr<Communicator> comm)
    : c10d::Backend(comm->rank(), comm->size()), comm_(std::move(comm)) {
  std::lock_guard<std::mutex> lk(registry().mu);
  registry().live.insert(this);
}

std::shared_ptr<Communicator> GradwireBackend::live(const char* op) const {
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

Communicator& GradwireBackend::communicator() { return *live("communicator"); }

void GradwireBackend::shutdown() {
  std::shared_ptr<Communicator> comm;
  {
    std::lock_guard<std::mutex> lk(mu_);
    comm.swap(comm_);
  }
  // Destroyed here, or by the last collective call still using it.
}

void GradwireBackend::shutdown_all() {
  std::lock_guard<std::mutex> lk(registry().mu);
  for (GradwireBackend* b : registry().live) b->shutdown();
}

void set_main_thread(uint64_t ident) { g_main_thread = ident; }

py::object future_of(Work work, at::Tensor result) {
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
  work.then([future, result](std::exception_ptr error) {
    if (error) {
      future->setError(error);
    } else {
      future->markCompleted(c10::IValue(result));
    }
  });
  return py::cast(std::make_shared<torch::jit::PythonFutureWrapper>(future));
}

GradwireBackend::~GradwireBackend() {
  std::lock_guard<std::mutex> lk(registry().mu);
  registry().live.erase(this);
}

c10::intrusive_ptr<GradwireBackend> GradwireBackend::create(
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
  return c10::make_intrusive<GradwireBackend>(
      create_at(options, rank, size, r.host, r.port, r.secret));
}

c10::intrusive_ptr<c10d::Work> GradwireBackend::broadcast(std::vector<at::Tensor>& tensors,
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

c10::intrusive_ptr<c10d::Work> GradwireBackend::allreduce(std::vector<at::Tensor>& tensors,
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

c10::intrusive_ptr<c10d::Work> GradwireBackend::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions&) {
  const auto comm = live("allgather_into_tensor");
  const std::string what = name(*comm, "allgather_into_tensor");
  check_tensor(output, what);
  check_tensor(input, what);
  same_dtype(input, output, what);
  numel_is(output, input.numel() * size_, what, "output (world size x input)");
  DeviceStreamScope scope(current_stream(input));
  auto w = comm->allgather(input.data_ptr(), output.data_ptr(), count_of(output),
                            to_dtype(output, what));
  return make_work(rank_, c10d::OpType::_ALLGATHER_BASE, std::move(w), {output}, {input, output});
}

c10::intrusive_ptr<c10d::Work> GradwireBackend::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  const auto comm = live("allgather");
  const std::string what = name(*comm, "allgather");
  const at::Tensor& in = single(inputs, what);
  if (outputs.size() != 1 || outputs[0].size() != size_t(size_)) {
    invalid(what + ": expected one list of " + std::to_string(size_) + " output tensors");
  }
  for (auto& o : outputs[0]) {
    check_tensor(o, what);
    same_dtype(in, o, what);
    numel_is(o, in.numel(), what, "an output tensor (like the input)");
  }
  // Gathered into one staging buffer, copied out as the Work completes.
  at::Tensor flat = at::empty({in.numel() * size_}, in.options());
  DeviceStreamScope scope(current_stream(in));
  auto w = comm->allgather(in.data_ptr(), flat.data_ptr(), count_of(flat),
                            to_dtype(in, what));
  std::vector<at::Tensor> outs = outputs[0];
  auto finish = [flat, outs, n = in.numel()]() mutable {
    for (size_t r = 0; r < outs.size(); ++r) {
      outs[r].view({-1}).copy_(flat.narrow(0, int64_t(r) * n, n));
    }
  };
  return make_work(rank_, c10d::OpType::ALLGATHER, std::move(w), outs, {in, flat},
                   std::move(finish));
}

c10::intrusive_ptr<c10d::Work> GradwireBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const auto comm = live("reduce_scatter_tensor");
  const std::string what = name(*comm, "reduce_scatter_tensor");
  check_tensor(output, what);
  check_tensor(input, what);
  same_dtype(input, output, what);
  numel_is(input, output.numel() * size_, what, "input (world size x output)");
  DeviceStreamScope scope(current_stream(input));
  auto w = comm->reduce_scatter(input.data_ptr(), output.data_ptr(), count_of(input),
                                 to_dtype(input, what), to_op(opts.reduceOp, input, what));
  return make_work(rank_, c10d::OpType::_REDUCE_SCATTER_BASE, std::move(w), {output},
                   {input, output});
}

c10::intrusive_ptr<c10d::Work> GradwireBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const auto comm = live("reduce_scatter");
  const std::string what = name(*comm, "reduce_scatter");
  const at::Tensor& out = single(outputs, what);
  if (inputs.size() != 1 || inputs[0].size() != size_t(size_)) {
    invalid(what + ": expected one list of " + std::to_string(size_) + " input tensors");
  }
  for (auto& i : inputs[0]) {
    check_tensor(i, what);
    same_dtype(i, out, what);
    numel_is(i, out.numel(), what, "an input tensor (like the output)");
  }
  // Staged: the inputs need not be adjacent in memory.
  at::Tensor flat = at::empty({out.numel() * size_}, out.options());
  for (int r = 0; r < size_; ++r) {
    flat.narrow(0, int64_t(r) * out.numel(), out.numel()).copy_(inputs[0][r].view({-1}));
  }
  DeviceStreamScope scope(current_stream(flat));
  auto w = comm->reduce_scatter(flat.data_ptr(), out.data_ptr(), count_of(flat),
                                 to_dtype(out, what), to_op(opts.reduceOp, out, what));
  return make_work(rank_, c10d::OpType::REDUCE_SCATTER, std::move(w), {out}, {flat, out});
}

c10::intrusive_ptr<c10d::Work> GradwireBackend::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions&) {
  const auto comm = live("all_to_all_single");
  const std::string what = name(*comm, "all_to_all_single");
  check_tensor(output, what);
  check_tensor(input, what);
  same_dtype(input, output, what);
  numel_is(output, input.numel(), what, "output (like the input)");
  // Rows of dim 0 are what split sizes count; equal splits only (for now).
  const int64_t rows = input.dim() == 0 ? 1 : input.size(0);
  if (rows % size_ != 0) {
    invalid(what + ": dim 0 (" + std::to_string(rows) + ") is not divisible by the world size " +
            std::to_string(size_));
  }
  for (const auto* splits : {&input_split_sizes, &output_split_sizes}) {
    for (int64_t s : *splits) {
      if (s != rows / size_) {
        invalid(what + ": unequal split sizes are not supported by the gradwire backend yet");
      }
    }
  }
  DeviceStreamScope scope(current_stream(input));
  auto w = comm->alltoall(input.data_ptr(), output.data_ptr(), count_of(input) / size_t(size_),
                           to_dtype(input, what));
  return make_work(rank_, c10d::OpType::ALLTOALL_BASE, std::move(w), {output}, {input, output});
}

c10::intrusive_ptr<c10d::Work> GradwireBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::AllToAllOptions&) {
  const auto comm = live("all_to_all");
  const std::string what = name(*comm, "all_to_all");
  if (inputs.size() != size_t(size_) || outputs.size() != size_t(size_)) {
    invalid(what + ": expected " + std::to_string(size_) + " input and output tensors");
  }
  const int64_t n = inputs[0].numel();
  for (int r = 0; r < size_; ++r) {
    check_tensor(inputs[r], what);
    check_tensor(outputs[r], what);
    same_dtype(inputs[0], inputs[r], what);
    same_dtype(inputs[0], outputs[r], what);
    numel_is(inputs[r], n, what, "an input tensor (equal sizes only, for now)");
    numel_is(outputs[r], n, what, "an output tensor (equal sizes only, for now)");
  }
  at::Tensor send = at::empty({n * size_}, inputs[0].options());
  at::Tensor recv = at::empty({n * size_}, inputs[0].options());
  for (int r = 0; r < size_; ++r) send.narrow(0, int64_t(r) * n, n).copy_(inputs[r].view({-1}));
  DeviceStreamScope scope(current_stream(send));
  auto w = comm->alltoall(send.data_ptr(), recv.data_ptr(), count_of(send) / size_t(size_),
                          to_dtype(send, what));
  std::vector<at::Tensor> outs = outputs;
  auto finish = [recv, outs, n]() mutable {
    for (size_t r = 0; r < outs.size(); ++r) {
      outs[r].view({-1}).copy_(recv.narrow(0, int64_t(r) * n, n));
    }
  };
  return make_work(rank_, c10d::OpType::ALLTOALL, std::move(w), outs, {send, recv},
                   std::move(finish));
}

c10::intrusive_ptr<c10d::Work> GradwireBackend::barrier(const c10d::BarrierOptions&) {
  return make_work(rank_, c10d::OpType::BARRIER, live("barrier")->barrier(), {}, {});
}

}  // namespace gradwire::python
