// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "collectives/context.h"
#include "base/collective_call.h"
#include "base/biased_mutex.h"
#include "runtime/engine.h"
#include "runtime/p2p.h"
#include "diag/flight_recorder.h"
#include "diag/straggler_detector.h"
#include "runtime/router.h"
#include "shm/shm.h"
#include "runtime/watchdog.h"
#include "gradwire/communicator.h"
#include "transport/transport.h"
#include "device/backend.h"

namespace gradwire {

class CommunicatorImpl;
// Destroys a CommunicatorImpl once its engine has finished its queue, or
// leaks it if the engine is stuck (Note [a stuck engine is leaked]): the
// owner of every CommunicatorImpl, the public Communicator's and the
// hierarchy's sub-communicators.
struct Retire {
  void operator()(CommunicatorImpl* impl) const;
};
using ImplPtr = std::unique_ptr<CommunicatorImpl, Retire>;

// Everything a Communicator owns. Member order is destruction order in
// reverse: the engine (last member) stops first, then the transport closes,
// then the bootstrap (whose TCP store other ranks may still be reading).
class CommunicatorImpl {
 public:
  CommunicatorImpl(Options options, int rank, int size, std::string name,
                   std::unique_ptr<bootstrap::Bootstrap> bootstrap,
                   std::unique_ptr<transport::Transport> transport, std::string iface);
  ~CommunicatorImpl();

  // The router (Note [ordered strategies] in runtime/router.h): validates
  // `call`, then runs it by the first of the communicator's strategies that
  // takes it (device, one host, hierarchical, transport).
  Work start(const CollectiveCall& call);
  // A collective on CUDA buffers with GPU work around it on the device
  // path's stream (Note [device steps] in device/backend.h), for composite
  // operations on device data; the producer is DeviceStreamScope's stream.
  // InvalidArgument if `call`'s buffers are not device memory.
  Work start_device(const CollectiveCall& call, device::Steps steps);

  using Label = CallLabel;
  // Enqueues `fn` as `call` and returns its Work. The description
  // ("rank 0: allreduce #12 (1048576 x float32 sum)"), the flight-recorder
  // record and, with GRADWIRE_DEBUG=DETAIL, the fingerprint the ranks compare
  // first derive from `call` (no fingerprint for CollectiveOp::Other:
  // internal exchanges, which name themselves with `label`).
  // `inline_ok`: `fn` makes no provider call, so it may run on the
  // caller's thread when the engine is idle (Note [inline small collectives]).
  Work submit(const CollectiveCall& call, std::function<void(collectives::Context&)> fn,
              const Label& label = {}, bool inline_ok = false);
  // submit() with `fn` of any type: on the caller's thread it runs without
  // being wrapped in a std::function (Note [the lean inline path]); the
  // definition is runtime/submit.h's, for the router's strategies.
  template <class F>
  // `now`: coarse_now() read once by the caller (Note [one clock read per
  // call] in communicator.cpp).
  Work submit_task(const CollectiveCall& call, F fn, const Label& label, bool inline_ok,
                   Clock::time_point now);
  void abort(const std::string& reason);
  // abort() of the device collectives, the hierarchy's sub-communicators and
  // this one: Communicator::abort.
  void abort_all(const std::string& reason);
  // Note [composite operations] (gradwire/communicator.h).
  Work compose(std::string_view name, std::string detail,
               std::function<void(CompositeSteps&)> body);
  // Note [point-to-point] in runtime/p2p.h.
  PointToPoint& p2p() { return p2p_; }
  // Throws Aborted naming `op` if this communicator or the job has failed.
  void check_usable(std::string_view op);
  // Fails the communicator as a failed collective does (Note [a failed
  // collective aborts its communicator]); engine thread.
  void fail(const std::string& reason, ErrorCode code);
  bool aborted() const { return aborted_.load(); }
  std::string abort_reason() {
    std::lock_guard<std::mutex> lk(state_mu_);
    return abort_reason_;
  }
  // Finishes queued work; false if the engine is stuck (then this object
  // must be leaked, Note [a stuck engine is leaked]).
  bool shutdown() { return engine_->shutdown(); }
  // Every rank's blob (synchronous; runs two allgathers on this communicator).
  std::vector<std::string> allgather_blobs(const std::string& mine);
  // For the watchdog (Note [watchdog]).
  Engine& engine() { return *engine_; }
  // Engine::submit_locked under submit_mu_: for submissions from outside
  // submit_task (posted messages), so that they pay no heavy_fence() when
  // the engine goes busy (Note [a claim is two stores] in
  // runtime/engine.cpp; a membarrier is ~9 us on this VM with the other
  // core running one of our threads).
  void submit_to_engine(std::shared_ptr<detail::WorkState> state, Engine::Task task) {
    std::lock_guard<BiasedMutex> lk(submit_mu_);
    engine_->submit_locked(std::move(state), std::move(task));
  }
  void stop_watchdog() {
    if (!watchdog_->stop()) (void)bootstrap.release();  // Note [watchdog]
  }
  void engine_stuck(const std::string& what);
  // Note [a published failure ends a stuck wait] (runtime/watchdog.h):
  // finishes `running`, which the engine thread is stuck in, with the
  // reported failure, fails the queue, aborts and leaks the engine.
  void abandon_engine(const std::shared_ptr<detail::WorkState>& running);
  // Note [reach report] in diag/reach.h: the sequence number of the last
  // collective the engine started (-1: none yet), published by the watchdog.
  std::atomic<int64_t> last_started{-1};
  // Shared with the watchdog thread, and outliving it if it is detached:
  // the engine thread asks for reach reports through this, never through
  // watchdog_ (which a stuck communicator releases).
  const std::shared_ptr<Watchdog::Shared> watchdog_state = std::make_shared<Watchdog::Shared>();
  // Note [straggler detection] in diag/straggler.h: driven by the watchdog
  // (which shares it, so it outlives a detached watchdog thread); set
  // before the watchdog starts.
  std::shared_ptr<straggler::Detector> stragglers;
  // The communicator's rank in the world, for messages and dumps.
  int world_rank = 0;
  // What the watchdog knows of each rank, set once after creation (its
  // thread already runs, hence the lock): the pid it may check (Note [a
  // dead peer on this host]; 0: not on this machine, or this rank) and the
  // rank's rank in the world (Note [a lost rank on another host]; empty:
  // the identity, as for the world itself).
  struct Members {
    std::vector<int> local_pids, world_ranks;
  };
  void set_members(Members m) {
    std::lock_guard<std::mutex> lk(watchdog_state->mu);
    members_ = std::move(m);
  }
  Members members() {
    std::lock_guard<std::mutex> lk(watchdog_state->mu);
    return members_;
  }
  // The watchdog's view, read under watchdog_state->mu.
  const Members& members_locked() const { return members_; }

  const Options options;
  const int rank, size;
  const std::string name;  // "world" or "group [0, 2]"
  const std::string iface;
  std::unique_ptr<bootstrap::Bootstrap> bootstrap;
  std::unique_ptr<transport::Transport> transport;
  int children = 0;  // sub-communicators created, for their names
  // Collectives on CUDA buffers (Note [device-buffer dispatch]); the backend
  // is created by the first one (Note [lazy NCCL communicator]), both in
  // device/. Initialised in the constructor (Note [device host]).
  std::unique_ptr<device::Router> devices;
  // Note [hierarchical allreduce] (collectives/hierarchy.cpp): set up by
  // create_world when the ranks span hosts evenly; null otherwise.
  int host_count = 1;  // set by create_world; sub-communicators say 1
  ImplPtr host_local, cross_host;
  // Note [the one-host path] (shm/shm.h): this rank's windows, made at
  // creation when the ranks share a host (activate_shm) or by the first
  // allocate_shared(); null before.
  std::mutex shared_mu;
  std::shared_ptr<shm::Windows> shared;
  // Collective: maps every rank's control segment (setup, for
  // communicators whose ranks share one host).
  void activate_shm();
  // Communicator::allocate_shared (collective).
  std::shared_ptr<detail::SharedAllocation> allocate_shared(size_t bytes);
  // The windows once every rank maps every other's (the one-host path is
  // on: alike on every rank), else null. Lock-free after the first hit
  // (Note [the lean inline path]): `shared` is set once and then lives as
  // long as this object, which finishes its queued collectives first.
  shm::Windows* active_windows() {
    if (shm::Windows* w = active_windows_.load(std::memory_order_acquire)) return w;
    std::lock_guard<std::mutex> lk(shared_mu);
    shm::Windows* w = shared && shared->active() ? shared.get() : nullptr;
    if (w) active_windows_.store(w, std::memory_order_release);
    return w;
  }

 private:
  void fail_communicator(const std::string& reason, uint32_t seq, ErrorCode code);
  // Flight recorder dump, report to the other ranks, and the
  // GRADWIRE_ASYNC_ERROR_HANDLING policy; any thread.
  void on_failure(const std::string& reason, uint32_t seq, ErrorCode code);
  // A finished WorkState that nothing else holds is reused by the next
  // submission (Note [the lean inline path]); under submit_mu_.
  std::shared_ptr<detail::WorkState> state_for(uint32_t seq, const CollectiveCall& call,
                                               const Label& label);
  // What the shm layer needs of this communicator; its blob exchange over
  // the bootstrap (the world, before its first collective) or over its own
  // collectives.
  shm::Peers shm_peers(bool over_bootstrap);
  // Note [ordered strategies] (runtime/router.h).
  route::Router router_{*this};

  // The running collective's (engine thread, or a caller that claimed the
  // engine: Note [inline small collectives]).
  std::array<std::vector<std::byte>, 2> scratch_;
  // Held for a submission only; every claim of the engine is made under it
  // (Engine::submit_locked). Note [a biased lock] in base/biased_mutex.h.
  BiasedMutex submit_mu_;
  uint32_t next_seq_ = 0;
  fr::Recorder::IdBlock fr_ids_;  // under submit_mu_ (Note [ids in blocks] in diag/flight_recorder.h)
  std::shared_ptr<detail::WorkState> spare_state_;  // under submit_mu_
  bool world_named_ = false;  // name == "world": left out of descriptions
  std::atomic<shm::Windows*> active_windows_{nullptr};
  std::mutex state_mu_;
  std::atomic<bool> aborted_{false};
  Members members_;  // guarded by watchdog_state->mu
  std::string abort_reason_;
  // Before the engine: its thread uses it until it exits.
  PointToPoint p2p_{*this};
  std::unique_ptr<Engine> engine_;
  uint16_t fr_comm_ = 0;  // this communicator in flight-recorder dumps
  fr::Recorder& recorder_ = fr::Recorder::instance();
  std::unique_ptr<Watchdog> watchdog_;  // stopped first, in ~CommunicatorImpl
};

}  // namespace gradwire
