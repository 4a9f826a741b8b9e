// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The Communicator: argument validation on the caller's thread, then
// collectives queued to the engine thread.
#include "gradwire/communicator.h"

#include <algorithm>
#include <cstring>

#include "collectives/collectives.h"
#include "collectives/algorithm.h"
#include "runtime/communicator_impl.h"
#include "runtime/submit.h"
#include "base/raise.h"
#include "diag/fingerprint.h"
#include "base/logging.h"
#include "runtime/setup.h"
#include "diag/trace.h"
#include "gradwire/device_stream.h"

namespace gradwire {

CommunicatorImpl::CommunicatorImpl(Options options_in, int rank_in, int size_in,
                                   std::string name_in,
                                   std::unique_ptr<bootstrap::Bootstrap> bootstrap_in,
                                   std::unique_ptr<transport::Transport> transport_in,
                                   std::string iface_in)
    : options(std::move(options_in)), rank(rank_in), size(size_in), name(std::move(name_in)),
      iface(std::move(iface_in)), bootstrap(std::move(bootstrap_in)),
      transport(std::move(transport_in)),
      engine_(std::make_unique<Engine>("gradwire " + name)) {
  world_rank = rank;  // setup::split overrides it for sub-communicators
  world_named_ = name == "world";
  // The first communicator of the process (the world) sizes the recorder.
  recorder_.configure(options.diagnostics.flight_recorder_size, options.diagnostics.flight_recorder_dir, rank, size);
  fr_comm_ = recorder_.register_comm(name, rank, size);
  trace::configure(options.diagnostics.trace_dir, rank);
  stragglers = std::make_shared<straggler::Detector>(straggler::Detector::Config{
      name, rank, size, fr_comm_, options.diagnostics.straggler_threshold,
      options.diagnostics.straggler_window});
  watchdog_ = std::make_unique<Watchdog>(*this, bootstrap ? bootstrap->store() : nullptr);
  // Note [device host]: what the device layer may use of this communicator.
  device::Host host;
  host.rank = rank;
  host.size = size;
  host.name = name;
  host.options = options;
  host.allgather_blobs = [this](const std::string& mine) { return allgather_blobs(mine); };
  host.submit = [this](const CollectiveCall& call, std::function<void(collectives::Context&)> fn,
                       const CallLabel& label) { return submit(call, std::move(fn), label); };
  devices = std::make_unique<device::Router>(std::move(host));
  engine_->set_poller([this] { return p2p_.poll(); }, [this] { p2p_.drop(); });
}

void CommunicatorImpl::check_usable(std::string_view op) {
  if (aborted_) {
    std::lock_guard<std::mutex> lk(state_mu_);
    raise(ErrorCode::Aborted, "rank {}: cannot start {} on communicator {}: it was aborted: {}",
          rank, op, name, abort_reason_);
  }
  if (job::failed_flag().load(std::memory_order_acquire)) {
    raise(ErrorCode::Aborted, "rank {}: cannot start {} on communicator {}: {}", rank, op, name,
          job::failure_reason());
  }
}

void CommunicatorImpl::fail(const std::string& reason, ErrorCode code) {
  fail_communicator(reason, uint32_t(std::max<int64_t>(0, last_started.load())), code);
}

CommunicatorImpl::~CommunicatorImpl() {
  if (!watchdog_->stop()) {
    // Its thread may still return into the store (Note [watchdog]).
    (void)bootstrap.release();
    (void)watchdog_.release();
  }
  engine_.reset();  // finishes queued collectives (each bounded by its deadline)
  if (name == "world") trace::flush();
}

// The timeline (diag/trace.h): a collective's queued and running phases.
// Out of line: only traced runs pay for it.
void detail_submit::trace_collective(const std::string& comm, std::string_view op, uint32_t seq,
                      const CollectiveCall& info, int64_t queued_us, int64_t started_us,
                      bool ok) {
  const std::string label = fmt::format("{} #{}", op, seq);
  trace::span(comm, label + " queued", "queued", queued_us, started_us);
  trace::span(comm, label, "collective", started_us, trace::now_us(),
              fmt::format("\"detail\": \"{}\", \"ok\": {}", info.describe(), ok));
}

// Note [the lean inline path]: a small collective on the caller's thread
// costs about 0.3 us of flag traffic, and everything around it was once
// more than that again (issue 18: 0.47 us for an 8-byte broadcast against
// Open MPI's 0.16). A perf profile showed no single item above 11 %, but
// seven mutex round trips, three heap allocations (the WorkState, the
// caller's std::function and the engine task's), the strings of the
// WorkState's description parts, and a cond var made and destroyed per call.
// So, without changing what a collective does or guarantees:
//  - the task is a lambda of the caller's type, called directly; it is
//    wrapped in a std::function only when it goes to the engine thread;
//  - a finished WorkState that nothing else holds (its Work was dropped) is
//    reused by the next submission (state_for), mutex and cond var included;
//  - Work::wait() and test() read an atomic `done` before taking the lock;
//  - the small path reads the control segments' windows through a pointer
//    cached once they exist (active_windows), not under shared_mu.
std::shared_ptr<detail::WorkState> CommunicatorImpl::state_for(uint32_t seq,
                                                               const CollectiveCall& call,
                                                               const Label& label) {
  // Note [descriptions on demand] in base/work_state.h: the parts only.
  const std::string_view comm = world_named_ ? std::string_view() : std::string_view(name);
  const std::string_view detail = label.name.empty() ? std::string_view() : label.detail;
  if (spare_state_ && spare_state_.use_count() == 1) {
    // Every other holder (a Work, the engine, the watchdog) let go with an
    // acq_rel decrement; this fence orders their last reads before our
    // writes.
    std::atomic_thread_fence(std::memory_order_acquire);
    spare_state_->reuse(rank, comm, label.name, detail, seq, call);
    return spare_state_;
  }
  spare_state_ = std::make_shared<detail::WorkState>(detail::CallText{}, options.timeout);
  spare_state_->reuse(rank, comm, label.name, detail, seq, call);
  return spare_state_;
}

Work CommunicatorImpl::submit(const CollectiveCall& info,
                              std::function<void(collectives::Context&)> fn, const Label& label,
                              bool inline_ok) {
  return submit_task(info, std::move(fn), label, inline_ok, coarse_now());
}

void CommunicatorImpl::fail_communicator(const std::string& reason, uint32_t seq,
                                         ErrorCode code) {
  {
    std::lock_guard<std::mutex> lk(state_mu_);
    if (aborted_) return;
    abort_reason_ = reason;
    aborted_ = true;
  }
  log().error("{}", reason);
  transport->cancel_all();
  on_failure(reason, seq, code);
}

void CommunicatorImpl::on_failure(const std::string& reason, uint32_t seq, ErrorCode code) {
  recorder_.set_error(fr_comm_, seq, reason);
  // A failure caused by another rank's report is not news to the job.
  if (!job::failed_flag().load(std::memory_order_acquire)) job::report_failure(world_rank, reason, code);
  recorder_.dump(reason);
  if (options.diagnostics.abort_process_on_error) {
    // The watchdog would publish on its next tick; the process will not
    // live that long.
    if (bootstrap && bootstrap->store()) job::exchange(*bootstrap->store(), world_rank, options);
    log().critical("rank {}: aborting the process after: {} (GRADWIRE_ASYNC_ERROR_HANDLING=abort)",
                   world_rank, reason);
    std::abort();
  }
}

// Called by the watchdog: the engine thread is inside an operation past its
// deadline plus slack and may never return. Nothing here may touch the
// transport (the stuck thread owns it).
void CommunicatorImpl::engine_stuck(const std::string& what) {
  const std::string reason = fmt::format(
      "{} is still running past its deadline of {:.1f} s: the engine thread of communicator {} "
      "is stuck (likely a hung provider call or a bug in gradwire); the communicator is aborted",
      what, std::chrono::duration<double>(options.timeout).count(), name);
  {
    std::lock_guard<std::mutex> lk(state_mu_);
    if (!aborted_) {
      abort_reason_ = reason;
      aborted_ = true;
    }
  }
  log().error("{}", reason);
  const size_t n = engine_->fail_queued(std::make_exception_ptr(
      Error(ErrorCode::Timeout, fmt::format("rank {}: a collective queued on communicator {} "
                                            "will never run: {}", rank, name, reason))));
  if (n > 0) log().error("rank {}: failed {} queued collectives of {}", rank, n, name);
  const size_t hash = what.find('#');  // "rank 0: allreduce #12 (...)"
  on_failure(reason, hash == std::string::npos ? 0 : uint32_t(std::atoi(what.c_str() + hash + 1)),
             ErrorCode::Timeout);
}

void CommunicatorImpl::abandon_engine(const std::shared_ptr<detail::WorkState>& running) {
  const ErrorCode code = ErrorCode(job::failure_code().load());
  const std::string reason = fmt::format(
      "{} was interrupted: {} (this rank's provider call did not return within {:.1f} s of the "
      "report, so the engine thread of communicator {} is left behind)",
      running->description(), job::failure_reason(),
      std::chrono::duration<double>(kInterruptGrace).count(), name);
  {
    std::lock_guard<std::mutex> lk(state_mu_);
    if (!aborted_) {
      abort_reason_ = reason;
      aborted_ = true;
    }
  }
  log().error("{}", reason);
  running->abandoned.store(true);
  transport->abandon();  // Note [a stuck engine is leaked]: nothing else of it is touched
  const size_t n = engine_->fail_queued(std::make_exception_ptr(Error(
      ErrorCode::Aborted, fmt::format("rank {}: a collective queued on communicator {} will never "
                                      "run: {}", rank, name, reason))));
  if (n > 0) log().error("rank {}: failed {} queued collectives of {}", rank, n, name);
  running->finish(std::make_exception_ptr(Error(code, reason)));
}

void CommunicatorImpl::abort(const std::string& reason) {
  // Marks the communicator first so queued collectives fail fast, then
  // cancels on the engine thread (the transport is single-threaded), and
  // waits for that so no buffer is touched after abort() returns.
  {
    std::lock_guard<std::mutex> lk(state_mu_);
    if (!aborted_) {
      abort_reason_ = fmt::format("abort() called on rank {}: {}", rank, reason);
      aborted_ = true;
    }
  }
  auto state = std::make_shared<detail::WorkState>("abort", options.timeout);
  engine_->submit(state, [this](detail::WorkState&) { transport->cancel_all(); });
  Work(state).wait();
}

std::vector<std::string> CommunicatorImpl::allgather_blobs(const std::string& mine) {
  std::vector<int64_t> lengths(size);
  int64_t my_len = int64_t(mine.size());
  auto run = [&](const void* send, void* recv, size_t count, DataType dt) {
    return submit({}, [=](collectives::Context& ctx) {
      collectives::allgather(ctx, send, recv, count, dt);
    }, {"allgather", "bootstrap"});
  };
  run(&my_len, lengths.data(), size_t(size), DataType::Int64).wait();
  const size_t max_len = size_t(*std::max_element(lengths.begin(), lengths.end()));
  std::string padded = mine;
  padded.resize(max_len);
  std::vector<char> all(max_len * size);
  if (max_len > 0) run(padded.data(), all.data(), all.size(), DataType::UInt8).wait();
  std::vector<std::string> out(size);
  for (int r = 0; r < size; ++r) out[r].assign(all.data() + r * max_len, size_t(lengths[r]));
  return out;
}

// ---------------------------------------------------------------- Communicator

void Retire::operator()(CommunicatorImpl* impl) const {
  if (impl == nullptr) return;
  if (!impl->shutdown()) {
    // Note [a stuck engine is leaked]: its thread still uses the transport
    // and the scratch memory; freeing them would crash it, joining it would
    // hang this process forever. Its watchdog has reported it already.
    impl->stop_watchdog();
    return;
  }
  delete impl;
}

Communicator::Communicator(std::unique_ptr<CommunicatorImpl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() { Retire{}(impl_.release()); }

std::unique_ptr<Communicator> Communicator::create(const Options& options) {
  return create(options, Rendezvous::from_environment());
}

std::unique_ptr<Communicator> Communicator::create(const Options& options,
                                                   const Rendezvous& rendezvous) {
  return std::unique_ptr<Communicator>(new Communicator(setup::create_world(options, rendezvous)));
}

int Communicator::rank() const { return impl_->rank; }
int Communicator::size() const { return impl_->size; }
std::string Communicator::provider() const { return impl_->transport->properties().provider; }
const Options& Communicator::options() const { return impl_->options; }
int Communicator::host_count() const { return impl_->host_count; }
bool Communicator::hierarchical() const { return impl_->host_local != nullptr; }
void Communicator::abort(const std::string& reason) { impl_->abort_all(reason); }
bool Communicator::aborted() const { return impl_->aborted(); }

void Communicator::on_straggler(StragglerCallback callback) {
  impl_->stragglers->set_callback(std::move(callback));
}
std::vector<StragglerReport> Communicator::stragglers() const {
  return impl_->stragglers->named();
}

void CommunicatorImpl::abort_all(const std::string& reason) {
  devices->abort(reason);  // device collectives too
  if (host_local) host_local->abort_all(reason);
  if (cross_host) cross_host->abort_all(reason);
  abort(reason);
}

std::unique_ptr<Communicator> Communicator::split(const std::vector<int>& ranks) {
  auto child = setup::split(*impl_, ranks);
  if (!child) return nullptr;
  return std::unique_ptr<Communicator>(new Communicator(std::move(child)));
}

Work CommunicatorImpl::start_device(const CollectiveCall& call, device::Steps steps) {
  validate(call, rank, size);
  device::Backend* gpu = devices->route(call);
  if (gpu == nullptr) {
    raise(ErrorCode::InvalidArgument, "rank {}: {} with device steps got host buffers; they are "
          "for collectives on CUDA memory", rank, call.name());
  }
  return gpu->submit(call, DeviceStreamScope::current().native(), std::move(steps));
}

// Note [one clock read per call]: a collective reads the coarse clock once,
// here, for the driver check of its routing (Note [rechecking for the
// driver] in device/memory.cpp), its flight-recorder entry (Note [recorded
// on the monotonic clock]) and, on the caller's thread, its start and
// deadline: three reads of ~30 instructions each before (issue 18).
Work CommunicatorImpl::start(const CollectiveCall& call) {
  validate(call, rank, size);
  // Note [ordered strategies] in runtime/router.h.
  return router_.start(call, coarse_now());
}

shm::Peers CommunicatorImpl::shm_peers(bool over_bootstrap) {
  shm::Peers peers{rank, size, name, options, {}};
  if (over_bootstrap) {
    bootstrap::Bootstrap* boot = bootstrap.get();
    const Deadline deadline = Deadline::after(options.timeout);
    peers.allgather = [boot, deadline](const std::string& mine) {
      return boot->allgather(mine, deadline);
    };
  } else {
    peers.allgather = [this](const std::string& mine) { return allgather_blobs(mine); };
  }
  return peers;
}

void CommunicatorImpl::activate_shm() {
  std::lock_guard<std::mutex> lk(shared_mu);
  if (shared) return;
  // The world exchanges through its bootstrap, so that its collectives keep
  // their numbers (the first user collective is #1, as errors and flight-
  // recorder dumps have always said); a sub-communicator, which has none,
  // through its own collectives.
  shared = shm::open(shm_peers(bootstrap != nullptr), "shared-memory collectives");
}

std::shared_ptr<detail::SharedAllocation> CommunicatorImpl::allocate_shared(size_t bytes) {
  std::lock_guard<std::mutex> lk(shared_mu);
  const shm::Peers peers = shm_peers(false);
  if (!shared) shared = shm::open(peers, "allocate_shared");
  return shm::allocate(shared, peers, bytes);
}

SharedBuffer Communicator::allocate_shared(size_t bytes) {
  return SharedBuffer(impl_->allocate_shared(bytes));
}

Work Communicator::allreduce(const void* send, void* recv, size_t count, DataType dtype,
                             ReduceOp op) {
  return impl_->start(CollectiveCall::allreduce(send, recv, count, dtype, op));
}

Work Communicator::reduce_scatter(const void* send, void* recv, size_t count, DataType dtype,
                                  ReduceOp op) {
  return impl_->start(CollectiveCall::reduce_scatter(send, recv, count, dtype, op));
}

Work Communicator::allgather(const void* send, void* recv, size_t count, DataType dtype) {
  return impl_->start(CollectiveCall::allgather(send, recv, count, dtype));
}

Work Communicator::broadcast(const void* send, void* recv, size_t count, DataType dtype, int root) {
  return impl_->start(CollectiveCall::broadcast(send, recv, count, dtype, root));
}

Work Communicator::alltoall(const void* send, void* recv, size_t count_per_rank, DataType dtype) {
  return impl_->start(CollectiveCall::alltoall(send, recv, count_per_rank, dtype));
}

Work Communicator::barrier() { return impl_->start(CollectiveCall::barrier()); }

Work Communicator::reduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                          int root) {
  return impl_->start(CollectiveCall::reduce(send, recv, count, dtype, op, root));
}

Work Communicator::gather(const void* send, void* recv, size_t count_per_rank, DataType dtype,
                          int root) {
  return impl_->start(CollectiveCall::gather(send, recv, count_per_rank, dtype, root));
}

Work Communicator::scatter(const void* send, void* recv, size_t count_per_rank, DataType dtype,
                           int root) {
  return impl_->start(CollectiveCall::scatter(send, recv, count_per_rank, dtype, root));
}

Work Communicator::send(const void* buf, size_t count, DataType dtype, int peer, uint32_t tag) {
  return impl_->p2p().send(buf, count, dtype, peer, tag);
}

Work Communicator::recv(void* buf, size_t count, DataType dtype, int peer, uint32_t tag) {
  if (peer == PointToPoint::kAnySource) {  // -1 is "not a rank" here, as in send
    raise(ErrorCode::InvalidArgument, "rank {}: recv from rank -1, which is not a rank of this "
          "communicator (size {}); use recv_any for a receive from any rank", impl_->rank,
          impl_->size);
  }
  return impl_->p2p().recv(buf, count, dtype, peer, tag);
}

Work Communicator::recv_any(void* buf, size_t count, DataType dtype, uint32_t tag, int* source) {
  return impl_->p2p().recv(buf, count, dtype, PointToPoint::kAnySource, tag, source);
}

}  // namespace gradwire
