// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [watchdog]: one thread per communicator, waking every 100 ms. It
//  1. checks the engine's heartbeat: an operation running past its deadline
//     plus engine_slack() means the engine thread is stuck (a hung provider
//     call, a bug). The watchdog then aborts the communicator, fails every
//     queued Work (nobody waits behind a stuck engine), dumps the flight
//     recorder and reports the failure to the job;
//  2. (world communicator of a store bootstrap: torchrun env or file store)
//     tells the other ranks about this process's first failure by writing
//     the store key "gradwire/failure", and polls that key once a second.
//     A rank that sees another rank's failure dumps its flight recorder (so
//     the diagnosis shows where it was) and interrupts its collectives,
//     which fail with the reported error's code (Timeout, PeerLost,
//     Mismatch) naming the reporting rank and its error;
//  3. (same communicators) publishes in that round which collective this
//     rank last started, and on request reads the other ranks' to say in
//     a failed collective's error which ranks had reached it (Note [reach
//     report] in diag/reach.h).
//  4. Note [a published failure ends a stuck wait]: once another rank's
//     failure is known here, a collective still running kInterruptGrace
//     later is not going to notice the interrupt: its engine thread is
//     inside a provider call that does not return (libfabric 1.17's shm
//     spins in fi_cq_read after a truncated large message whose sender
//     left, Note [no inline execution]). The watchdog then finishes that
//     Work itself with the reported error (its code, e.g. Mismatch, and
//     the reporting rank's words), fails what is queued, aborts the
//     communicator and leaks its engine and transport, after unlinking the
//     transport's shared-memory name (Transport::abandon). Waiting for the
//     deadline instead blamed "a bug in gradwire or a hung provider" at
//     twice the deadline and left the region in /dev/shm (issue 17, item 1).
//  5. Note [the store host is gone]: rank 0 serves the TCP store. When the
//     store closes our connections (PeerLost: refused or reset, not a
//     store that stops answering, which a SIGSTOPped rank 0 also is), rank
//     0 is gone, and no rank can publish a failure any more. While a
//     world collective is running here, or as soon as one runs, the
//     watchdog then fails this process's collectives as a published
//     failure would, with PeerLost and "rank 0 is gone". Before, a rank
//     waiting for a live rank that was itself waiting for rank 0 timed out
//     at the deadline blaming the live rank (issue 17 item 7: 14 of 42
//     survivor errors). Only a running collective triggers it, so a rank
//     that outlives rank 0 at the end of a healthy job logs nothing.
//  6. Note [a dead peer on this host]: ranks exchange their pid, boot id
//     and pid namespace at start-up (setup.cpp); while a collective runs,
//     the watchdog checks that the peers it can see (same machine, same pid
//     namespace) still exist. A peer gone (or a zombie) for kDeadPeerGrace
//     with the collective still running fails this process's collectives
//     with PeerLost naming the rank and its pid, and reports it to the job
//     like any failure, unless the store holds a failure the peer published
//     before it exited (a rank that failed on a mismatch and quit): that
//     report names the cause and is used instead. A SIGKILLed rank used to surface only as a Timeout
//     at the deadline ("waiting for rank 1 to enter"), on every survivor;
//     elastic recovery (src/elastic/group.cpp) now starts within a few
//     hundred milliseconds and knows whom it lost. The grace covers a peer
//     that finished its part of the collective and exited normally while
//     this rank completes it. Only local peers: across machines the
//     transport (PeerLost) or the deadline still tells, and:
//  7. Note [heartbeats between hosts] (runtime/heartbeat.h): the world's
//     watchdog with a store exchanges UDP heartbeats with the ranks on other
//     machines; one silent for GRADWIRE_HOST_LOST_S (1 s) while a collective
//     waits fails it, after kDeadPeerGrace, with PeerLost naming every
//     silent rank and its host, within about 1.5 s of the loss.
// Under mpirun there is no store: ranks blocked in the failed collective
// reach its deadline on their own; a rank elsewhere learns at its next
// collective. The store is only touched by this thread, never by the engine,
// so a hung rank 0 (which serves the TCP store) cannot stall collectives.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gradwire/error.h"
#include "gradwire/options.h"
#include "runtime/job.h"

namespace gradwire {

class CommunicatorImpl;

// Note [a published failure ends a stuck wait]: how long a collective may
// keep running after another rank's failure is known before its engine
// counts as stuck. An interrupt is seen within milliseconds by a collective
// that polls (Note [interrupting a collective]).
inline constexpr std::chrono::milliseconds kInterruptGrace{1000};
// Note [a dead peer on this host]: how long a peer must be seen gone, with
// the collective still running, before it fails.
inline constexpr std::chrono::milliseconds kDeadPeerGrace{300};
// Note [heartbeats between hosts] (runtime/heartbeat.h): a rank on another
// host silent this long is lost (GRADWIRE_HOST_LOST_S).
inline constexpr std::chrono::milliseconds kDefaultHostLost{1000};


class Watchdog {
 public:
  // `store` may be null (sub-communicators, mpirun). Starts the thread,
  // which shares comm.watchdog_state.
  Watchdog(CommunicatorImpl& comm, bootstrap::Store* store);
  // Stops the thread. If it is inside a store call (rank 0 hung), it is
  // detached after a short wait instead of joined: then detached() is true
  // and the owner must leak the store (Note [a stuck engine is leaked]).
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  bool stop();  // false: detached (see above)

  // What the watchdog thread shares with its owner and the engine thread.
  // Owned by a shared_ptr (CommunicatorImpl::watchdog_state) so that it
  // outlives a detached thread.
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;  // every waiter has its own predicate: notify_all
    bool stop = false;
    bool in_store = false;
    // Note [reach report] in diag/reach.h.
    bool has_store = false;  // false also once the store stopped answering
    std::string store_gone;  // why it stopped, if it did
    uint64_t asked = 0, answered = 0;  // requests; the latest wins
    std::string ask_label;              // "allreduce #22"
    int64_t ask_seq = 0;
    std::string answer;
  };
  // What to append to the error of collective `label` (sequence number
  // `seq`) of this watchdog's communicator: "; <reach::sentence>", or
  // " (which ranks reached it is unknown: <why>)" when the store gives no
  // answer within reach::kReachWait, or "" without a store. Blocks up to
  // kReachWait; any thread but the watchdog's.
  static std::string reach_report(Shared& sh, std::string_view label, uint32_t seq);

 private:
  static void loop(std::shared_ptr<Shared> sh, CommunicatorImpl* comm, bootstrap::Store* store);

  std::shared_ptr<Shared> sh_;
  bootstrap::Store* store_;
  int rank_;
  Options options_;
  std::thread thread_;
  bool stopped_ = false;
  bool detached_ = false;
};

}  // namespace gradwire
