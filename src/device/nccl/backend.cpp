// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The NCCL backend (Note [lazy NCCL communicator], Note [NCCL completion] in
// device/backend.h).
#if GRADWIRE_HAVE_NCCL
#include "device/backend.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <sys/prctl.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "base/deadline.h"
#include "base/raise.h"
#include "base/logging.h"
#include "base/work_state.h"
#include "device/nccl/collectives.h"
#include "device/nccl/library.h"
#include "device/cuda.h"

namespace gradwire::device::nccl {
namespace {

using std::chrono::milliseconds;
constexpr auto kPollInterval = std::chrono::microseconds(20);
constexpr auto kSpinFor = std::chrono::microseconds(200);

// Note [poller back-off]: waiting for the GPU first yields for kSpinFor,
// then sleeps kPollInterval at a time. Sleeping at once made every device
// collective cost ~100 us at world size 1 on an H100 (two sleeps, each
// ~50 us over its 20 us because of the default timer slack); a collective
// that completes within the spin window is now seen at once. The poller
// also cuts its timer slack (loop()), so its sleeps are what they say.
class Backoff {
 public:
  void idle() {
    if (std::chrono::steady_clock::now() - since_ < kSpinFor) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(kPollInterval);
    }
  }
  void progress() { since_ = std::chrono::steady_clock::now(); }

 private:
  std::chrono::steady_clock::time_point since_ = std::chrono::steady_clock::now();
};
// Longest wait for the stream to drain after ncclCommAbort (cf. the ofi
// transport's cancel_timeout_ms).
constexpr milliseconds kDrainTimeout{2000};

ErrorCode code_for(ncclResult_t rc) {
  switch (rc) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return ErrorCode::InvalidArgument;
    case ncclRemoteError:
      return ErrorCode::PeerLost;
    case ncclSystemError:
    case ncclUnhandledCudaError:
      return ErrorCode::Transport;
    default:
      return ErrorCode::Internal;
  }
}

std::string_view cause_for(ncclResult_t rc) {
  switch (rc) {
    case ncclRemoteError:
      return "likely cause: a peer process died or its network connection failed";
    case ncclSystemError:
      return "likely cause: a system or network call failed on this rank (NCCL_DEBUG=WARN shows "
             "which)";
    case ncclUnhandledCudaError:
      return "likely cause: a CUDA error on this rank (out of memory, or a fault on this device)";
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return "likely cause: the ranks called different collectives, counts or dtypes, or a "
             "buffer is not device memory of this rank's device";
    default:
      return "likely cause: a bug in NCCL or gradwire (NCCL_DEBUG=WARN shows more)";
  }
}

std::string seconds(milliseconds d) {
  return fmt::format("{:.1f} s", std::chrono::duration<double>(d).count());
}

// Polls a non-blocking communicator until it is no longer busy. Throws
// Timeout at the deadline (the caller aborts the communicator).
ncclResult_t settle(const Library& lib, ncclComm_t comm, ncclResult_t rc, Deadline deadline) {
  Backoff backoff;
  while (rc == ncclInProgress) {
    if (deadline.expired()) return ncclInProgress;
    backoff.idle();
    ncclResult_t state = ncclSuccess;
    ncclResult_t q = lib.CommGetAsyncError(comm, &state);
    rc = q != ncclSuccess ? q : state;
  }
  return rc;
}

struct Op {
  std::vector<CollectiveCall> parts;
  std::string what;
  std::shared_ptr<detail::WorkState> state;
  Steps steps;  // Note [device steps]
  EventPtr ready, done;
  bool started = false;  // oldest in flight: its deadline runs
  Clock::time_point deadline{};
};

class NcclBackend final : public Backend {
 public:
  NcclBackend(const Library& lib, const Host& c, int device, CommPtr comm, StreamPtr stream,
              DeviceMemoryPtr barrier_word)
      : lib_(lib), rank_(c.rank), size_(c.size),
        prefix_(fmt::format("rank {}{}", c.rank, c.name == "world" ? "" : " of " + c.name)),
        timeout_(c.options.timeout), device_(device), comm_(std::move(comm)),
        stream_(std::move(stream)), barrier_word_(std::move(barrier_word)),
        thread_([this] { loop(); }) {}

  ~NcclBackend() override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();  // drains: every collective in flight ends by its deadline
  }

  int device() const override { return device_; }
  bool aborted() const override { return aborted_.load(); }

  Work submit(const CollectiveCall& c, void* producer, Steps steps) override {
    check(c, rank_, size_);
    return enqueue_op({c}, std::string(c.name()), c.describe(), producer, std::move(steps));
  }

  Work submit_group(const std::vector<CollectiveCall>& group, void* producer) override {
    if (group.empty()) {
      raise(ErrorCode::InvalidArgument, "{}: submit_group() needs at least one collective", prefix_);
    }
    std::string detail;
    for (const auto& c : group) {
      check(c, rank_, size_);
      if (!detail.empty()) detail += ", ";
      detail += fmt::format("{}{}{}", c.name(), c.op == CollectiveOp::Barrier ? "" : " ",
                            c.describe());
    }
    return enqueue_op(group, "group", detail, producer);
  }

  void abort(const std::string& reason) override {
    std::unique_lock<std::mutex> lk(mu_);
    if (aborted_) return;
    abort_request_ = fmt::format("abort() called on {}: {}", prefix_, reason);
    cv_.notify_all();
    // The poller aborts NCCL and drains the stream, each bounded.
    cv_.wait_for(lk, timeout_ + detail::engine_slack(timeout_), [&] { return aborted_.load(); });
  }

 private:
  Work enqueue_op(std::vector<CollectiveCall> parts, std::string op, const std::string& detail,
                  void* producer, Steps steps = {}) {
    std::lock_guard<std::mutex> lk(mu_);  // submission order = seq order = launch order
    if (aborted_) {
      raise(ErrorCode::Aborted, "{}: cannot start {}: the NCCL communicator was aborted: {}",
            prefix_, op, abort_reason_);
    }
    auto o = std::make_unique<Op>();
    o->parts = std::move(parts);
    o->steps = std::move(steps);
    o->what = fmt::format("{}: {} #{} ({}{}nccl on device {})", prefix_, op, next_seq_++, detail,
                          detail.empty() ? "" : ", ", device_);
    {
      DeviceGuard guard(device_);
      o->ready = make_event(o->what);
      o->done = make_event(o->what);
      cudaError_t err = cudaEventRecord(o->ready.get(), static_cast<cudaStream_t>(producer));
      if (err != cudaSuccess) {
        cudaGetLastError();
        raise(ErrorCode::InvalidArgument, "{}: recording its start on the producer stream failed: {} "
              "(is the stream on device {}?)", o->what, cudaGetErrorString(err), device_);
      }
    }
    o->state = std::make_shared<detail::WorkState>(o->what, timeout_);
    Work work(o->state);
    queued_.push_back(std::move(o));
    cv_.notify_all();
    return work;
  }

  EventPtr make_event(const std::string& what) {
    cudaEvent_t e = nullptr;
    cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    if (err != cudaSuccess) {
      cudaGetLastError();
      raise(ErrorCode::Transport, "{}: cudaEventCreate failed: {}", what, cudaGetErrorString(err));
    }
    return EventPtr(e);
  }

  // ------------------------------------------------------------ poller thread

  void loop() {
    cudaSetDevice(device_);
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);  // 1 us (Note [poller back-off])
    Backoff backoff;
    for (;;) {
      std::string abort_request;
      {
        std::unique_lock<std::mutex> lk(mu_);
        if (inflight_.empty()) {
          cv_.wait(lk, [&] { return stopping_ || !queued_.empty() || !abort_request_.empty(); });
        }
        while (!queued_.empty()) {
          batch_.push_back(std::move(queued_.front()));
          queued_.pop_front();
        }
        abort_request.swap(abort_request_);
        if (stopping_ && batch_.empty() && inflight_.empty() && abort_request.empty()) break;
      }
      if (!abort_request.empty()) {
        abort_all(ErrorCode::Aborted, abort_request, nullptr);
        continue;
      }
      while (!batch_.empty() && !aborted_) {
        backoff.progress();
        std::unique_ptr<Op> o = std::move(batch_.front());
        batch_.pop_front();
        try {
          launch(*o);
          inflight_.push_back(std::move(o));
        } catch (const Error& e) {
          abort_all(e.code(), e.message(), o.get());
        } catch (const std::exception& e) {
          abort_all(ErrorCode::Internal, fmt::format("{}: {}", o->what, e.what()), o.get());
        }
      }
      if (poll()) backoff.progress();
      if (!inflight_.empty()) backoff.idle();
    }
    close();
  }

  void cuda_check(cudaError_t err, const Op& o, const char* call) {
    if (err == cudaSuccess) return;
    cudaGetLastError();
    raise(ErrorCode::Transport, "{}: {} failed on device {}: {}", o.what, call, device_,
          cudaGetErrorString(err));
  }

  void launch(Op& o) {
    const Deadline deadline = Deadline::after(timeout_);
    cuda_check(cudaStreamWaitEvent(stream_.get(), o.ready.get(), 0), o, "cudaStreamWaitEvent");
    if (o.steps.before) o.steps.before(stream_.get());
    Launch l{lib_, comm_.get(), stream_.get(), rank_, size_, barrier_word_.get(), {}, o.what};
    ncclResult_t rc = lib_.GroupStart();
    if (rc != ncclSuccess) {
      raise(code_for(rc), "{}: ncclGroupStart failed: {}", o.what, lib_.describe(rc, comm_.get()));
    }
    try {
      for (const CollectiveCall& c : o.parts) enqueue(l, c);
    } catch (...) {
      lib_.GroupEnd();  // a group must be closed even when abandoned
      throw;
    }
    rc = settle(lib_, comm_.get(), lib_.GroupEnd(), deadline);
    if (rc == ncclInProgress) {
      raise(ErrorCode::Timeout,
            "{} could not be launched within {}: NCCL was still connecting; likely cause: a "
            "rank has not reached this collective (NCCL connects peers at their first "
            "collective), died, or cannot be reached (GRADWIRE_TIMEOUT_S sets the deadline)",
            o.what, seconds(timeout_));
    }
    if (rc != ncclSuccess) {
      raise(code_for(rc), "{} failed to launch: {}; {}", o.what, lib_.describe(rc, comm_.get()),
            cause_for(rc));
    }
    for (void* p : l.free_after) cuda_check(cudaFreeAsync(p, stream_.get()), o, "cudaFreeAsync");
    if (o.steps.after) o.steps.after(stream_.get());
    cuda_check(cudaEventRecord(o.done.get(), stream_.get()), o, "cudaEventRecord");
  }

  // True if a collective completed.
  bool poll() {
    bool completed = false;
    if (inflight_.empty() || aborted_) return false;
    ncclResult_t state = ncclSuccess;
    ncclResult_t q = lib_.CommGetAsyncError(comm_.get(), &state);
    if (q != ncclSuccess) state = q;
    if (state != ncclSuccess && state != ncclInProgress) {
      abort_all(code_for(state),
                fmt::format("{} failed: NCCL reported {}; {}", inflight_.front()->what,
                            lib_.describe(state, comm_.get()), cause_for(state)),
                nullptr);
      return false;
    }
    while (!inflight_.empty()) {
      Op& head = *inflight_.front();
      if (!head.started) {
        head.started = true;
        head.deadline = Clock::now() + timeout_;
        head.state->mark_started();
      }
      cudaError_t err = cudaEventQuery(head.done.get());
      if (err == cudaSuccess) {
        std::unique_ptr<Op> o = std::move(inflight_.front());
        inflight_.pop_front();
        o->state->finish(nullptr);
        completed = true;
        continue;
      }
      if (err != cudaErrorNotReady) {
        cudaGetLastError();
        abort_all(ErrorCode::Transport,
                  fmt::format("{} failed on the GPU: {}; likely cause: a fault on device {} (a "
                              "buffer freed or smaller than the count says?)",
                              head.what, cudaGetErrorString(err), device_),
                  nullptr);
        return completed;
      }
      if (Clock::now() >= head.deadline) {
        abort_all(ErrorCode::Timeout,
                  fmt::format("{} timed out after {} waiting for NCCL on device {}; likely cause: "
                              "a rank died, is stuck, or called a different collective or count "
                              "(GRADWIRE_TIMEOUT_S sets the deadline)",
                              head.what, seconds(timeout_), device_),
                  nullptr);
        return completed;
      }
      break;
    }
    return completed;
  }

  // Aborts the NCCL communicator, waits (bounded) until the stream has
  // drained so no user buffer is written afterwards, then fails `culprit`
  // (or the oldest collective in flight) with `code` and every other
  // pending collective with Aborted (Note [NCCL completion]).
  void abort_all(ErrorCode code, const std::string& message, Op* culprit) {
    log().error("{}", message);
    if (comm_) {
      ncclResult_t rc = lib_.CommAbort(comm_.release());
      if (rc != ncclSuccess) log().warn("{}: ncclCommAbort failed: {}", prefix_, lib_.GetErrorString(rc));
    }
    if (!inflight_.empty()) {
      const Deadline drain = Deadline::after(kDrainTimeout);
      cudaEvent_t last = inflight_.back()->done.get();
      while (cudaEventQuery(last) == cudaErrorNotReady && !drain.expired()) {
        std::this_thread::sleep_for(kPollInterval);
      }
      if (cudaEventQuery(last) == cudaErrorNotReady) {
        stream_stuck_ = true;
        log().warn("{}: the NCCL stream did not drain within {} after ncclCommAbort; buffers of "
                   "the aborted collectives may still be written", prefix_, seconds(kDrainTimeout));
      }
      cudaGetLastError();
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      aborted_ = true;
      abort_reason_ = message;
      while (!queued_.empty()) {
        batch_.push_back(std::move(queued_.front()));
        queued_.pop_front();
      }
    }
    cv_.notify_all();  // abort() waits for aborted_
    if (culprit == nullptr && !inflight_.empty()) culprit = inflight_.front().get();
    if (culprit != nullptr) {
      if (!culprit->started) culprit->state->mark_started();
      culprit->state->finish(std::make_exception_ptr(Error(code, message)));
    }
    auto fail = [&](std::deque<std::unique_ptr<Op>>& ops) {
      for (auto& o : ops) {
        if (o.get() == culprit) continue;
        o->state->finish(std::make_exception_ptr(Error(
            ErrorCode::Aborted, fmt::format("{} did not complete: the NCCL communicator was "
                                            "aborted: {}", o->what, message))));
      }
      ops.clear();
    };
    fail(inflight_);
    fail(batch_);
  }

  // Graceful end on the poller thread (the device is current here).
  void close() {
    if (comm_) {
      ncclResult_t rc = settle(lib_, comm_.get(), lib_.CommFinalize(comm_.get()),
                               Deadline::after(timeout_));
      if (rc != ncclSuccess) {
        log().warn("{}: ncclCommFinalize {}; aborting the NCCL communicator instead", prefix_,
                   rc == ncclInProgress ? "timed out" : lib_.GetErrorString(rc));
        lib_.CommAbort(comm_.release());
      }
      comm_.reset();
    }
    // cudaFree waits for the device: after a stream that never drained it
    // could wait forever, so the word is leaked then (cudaStreamDestroy
    // does not wait).
    if (stream_stuck_) (void)barrier_word_.release();
    barrier_word_.reset();
    stream_.reset();
  }

  const Library& lib_;
  const int rank_, size_;
  const std::string prefix_;  // "rank 1" or "rank 1 of group 1 [0, 1]"
  const milliseconds timeout_;
  const int device_;

  // Poller thread only (after construction).
  CommPtr comm_;
  StreamPtr stream_;
  DeviceMemoryPtr barrier_word_;
  std::deque<std::unique_ptr<Op>> batch_;     // taken from queued_, not launched yet
  std::deque<std::unique_ptr<Op>> inflight_;  // launched, in stream order
  bool stream_stuck_ = false;                  // not drained after an abort

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Op>> queued_;  // guarded by mu_
  uint32_t next_seq_ = 0;                   // guarded by mu_
  bool stopping_ = false;                   // guarded by mu_
  std::string abort_request_;               // guarded by mu_
  std::string abort_reason_;                // guarded by mu_
  std::atomic<bool> aborted_{false};

  std::thread thread_;  // last: starts once every member exists
};

void check_cuda(int rank, int device, cudaError_t err, const char* call) {
  if (err == cudaSuccess) return;
  cudaGetLastError();
  raise(ErrorCode::Transport, "rank {}: {} on device {} failed while creating the NCCL backend: {}",
        rank, call, device, cudaGetErrorString(err));
}

}  // namespace

BackendPtr create(const Host& c, int device) {
  // Every rank learns the id and whether every rank could get this far, so
  // a failure on one rank fails all (Note [lazy NCCL communicator]).
  const Library* lib = nullptr;
  ncclUniqueId id{};
  std::string failure;
  try {
    lib = &Library::get();
    DeviceGuard guard(device);
    if (!guard.ok()) {
      raise(ErrorCode::InvalidArgument, "cudaSetDevice({}) failed: {}", device,
            cudaGetErrorString(cudaGetLastError()));
    }
    if (c.rank == 0) {
      ncclResult_t rc = lib->GetUniqueId(&id);
      if (rc != ncclSuccess) {
        raise(code_for(rc), "ncclGetUniqueId failed: {}", lib->describe(rc, nullptr));
      }
    }
  } catch (const Error& e) {
    failure = e.message();
  }
  const std::string mine = failure.empty()
                               ? "ok:" + std::string(reinterpret_cast<const char*>(&id), sizeof(id))
                               : "error:" + failure;
  const auto blobs = c.allgather_blobs(mine);
  for (size_t r = 0; r < blobs.size(); ++r) {
    if (blobs[r].rfind("error:", 0) == 0) {
      raise(ErrorCode::InvalidArgument,
            "rank {}: cannot create the NCCL communicator of {} for collectives on device "
            "buffers: rank {} failed: {}",
            c.rank, c.name, r, blobs[r].substr(6));
    }
  }
  if (blobs[0].size() != 3 + sizeof(ncclUniqueId)) {
    raise(ErrorCode::Mismatch, "rank {}: rank 0 sent a malformed NCCL id ({} bytes); is every rank "
          "running the same gradwire?", c.rank, blobs[0].size());
  }
  std::memcpy(&id, blobs[0].data() + 3, sizeof(id));

  DeviceGuard guard(device);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every wait below is ours, with a deadline
  const std::string comm_name = fmt::format("gradwire {}", c.name);
  config.commName = comm_name.c_str();
  const Deadline deadline = Deadline::after(c.options.timeout);
  ncclComm_t raw = nullptr;
  ncclResult_t rc = lib->CommInitRankConfig(&raw, c.size, id, c.rank, &config);
  if (raw != nullptr) rc = settle(*lib, raw, rc, deadline);
  if (rc != ncclSuccess) {
    std::string why =
        rc == ncclInProgress
            ? fmt::format("timed out after {}; likely cause: a rank did not reach its first "
                          "collective on device buffers, or the ranks cannot reach each other "
                          "over NCCL's network (NCCL_SOCKET_IFNAME)",
                          seconds(c.options.timeout))
            : fmt::format("failed: {}; {}", lib->describe(rc, raw), cause_for(rc));
    if (raw != nullptr) lib->CommAbort(raw);
    raise(rc == ncclInProgress ? ErrorCode::Timeout : code_for(rc),
          "rank {}: creating the NCCL communicator of {} on device {} {}", c.rank, c.name, device,
          why);
  }
  CommPtr comm(raw);
  cudaStream_t s = nullptr;
  // Non-blocking: the legacy default stream must never serialise with NCCL
  // kernels (a classic deadlock); ordering comes from the ready events.
  check_cuda(c.rank, device, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
             "cudaStreamCreateWithFlags");
  StreamPtr stream(s);
  void* word = nullptr;
  check_cuda(c.rank, device, cudaMalloc(&word, sizeof(int32_t)), "cudaMalloc");
  DeviceMemoryPtr barrier_word(word);
  check_cuda(c.rank, device, cudaMemset(word, 0, sizeof(int32_t)), "cudaMemset");
  // cudaMemset runs on the legacy stream, which does not order with the
  // non-blocking one above, and may return before it is done: wait for it.
  check_cuda(c.rank, device, cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  log().info("rank {}: NCCL communicator of {} ready on device {} ({} ranks, NCCL {})", c.rank,
             c.name, device, c.size, lib->version);
  return std::make_unique<NcclBackend>(*lib, c, device, std::move(comm), std::move(stream),
                                       std::move(barrier_word));
}

}  // namespace gradwire::device::nccl
#endif  // GRADWIRE_HAVE_NCCL
