// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Elastic membership: a job that survives a lost rank without restarting
// the survivors, and lets a replacement join while it trains (Note [elastic
// generations] in src/elastic/group.cpp).
//
//   auto group = gradwire::ElasticGroup::join({}, gradwire::Rendezvous::from_environment());
//   adopt(group->state());                      // build DDP over group->communicator()
//   while (step < total) {
//     try {
//       train_one_step(group->communicator());
//       if (++step % k == 0 && group->commit(step, model_bytes()))
//         adopt(group->state());                // a replacement came in
//     } catch (...) {
//       group->recover(std::current_exception());  // survivors, next generation
//       adopt(group->state());                  // back to the last commit
//     }
//   }
//
// Each membership is a generation with its own Communicator. commit() keeps
// the training state in memory (no disk); when the membership changes,
// every member leaves with the same committed state: the survivors roll
// back to their last common commit (at most one commit interval of steps
// is lost), a joining process receives it by broadcast from a survivor.
//
// The store must outlive every member: an etcd cluster across hosts
// (GRADWIRE_ETCD_ENDPOINTS, GRADWIRE_ETCD_PREFIX: a prefix of keys of the
// job's own), a file store (GRADWIRE_STORE_DIR, a directory every rank
// sees, fresh for each job) or an in-process store. Rank 0's TCP store dies
// with rank 0, so it is refused (InvalidArgument).
#pragma once

#include "gradwire/export.h"

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>

#include "gradwire/communicator.h"
#include "gradwire/options.h"
#include "gradwire/rendezvous.h"

namespace gradwire {

struct GRADWIRE_API ElasticOptions {
  // Fewer live members than this after a failure: recover() fails with
  // PeerLost instead of continuing. A job whose first size is left open
  // (an etcd rendezvous without a size) starts once this many processes
  // have arrived and no other came for `settle`.
  // GRADWIRE_ELASTIC_MIN_SIZE overrides it.
  int min_size = 1;
  // At most this many members (0: no limit): the first generation forms at
  // once when this many arrived; processes that come while the job is at
  // this size wait as spares and come in when a member is lost.
  // GRADWIRE_ELASTIC_MAX_SIZE overrides it.
  int max_size = 0;
  // After a failure the survivors wait until no further member has arrived
  // for this long (or until every member of the failed generation is back)
  // before they form the next generation. Survivors learn of a failure up
  // to a second apart (Note [watchdog]); GRADWIRE_ELASTIC_SETTLE_S
  // overrides it.
  std::chrono::milliseconds settle{2000};
  // How long join() (and a recovery) waits to be let into a generation
  // before it fails with Timeout.
  std::chrono::milliseconds join_timeout{std::chrono::minutes(10)};
};

// The state every member leaves a membership change with.
struct GRADWIRE_API ElasticState {
  // False: no member held a committed state (the job's first generation, or
  // a failure before the first commit): initialise as usual.
  bool restored = false;
  uint64_t step = 0;
  // The committed replicated state (the model, the optimizer): the same
  // bytes on every member.
  std::string shared;
  // This member's own committed state at `step` (e.g. error-feedback
  // buffers); empty on a member that joined, and on a survivor whose own
  // commit at `step` is gone.
  std::string local;
};

class ElasticGroupImpl;

class GRADWIRE_API ElasticGroup {
 public:
  // Joins the elastic job at `rendezvous` (Kind::Etcd, FileStore or
  // InProcess; its rank is only this process's preferred rank in the first
  // generation, its size the first generation's size, which an Etcd
  // rendezvous may leave 0: then min_size..max_size). The first processes
  // form the first generation once `size` of them have arrived; a process
  // that comes later waits until the members' next commit() (or recovery)
  // lets it in. Every process of a job must pass the same min_size and
  // max_size (InvalidArgument naming both otherwise); a store that holds
  // another program's keys is a Protocol error, and one that holds a job
  // that finished (Aborted) or whose members are all gone (etcd:
  // InvalidArgument) is refused, naming the prefix to change.
  static std::unique_ptr<ElasticGroup> join(const Options& options, const Rendezvous& rendezvous,
                                            const ElasticOptions& elastic = {});
  ~ElasticGroup();
  ElasticGroup(const ElasticGroup&) = delete;
  ElasticGroup& operator=(const ElasticGroup&) = delete;

  // The current generation's communicator. It changes when commit()
  // returns true and in recover(): rebuild whatever holds a reference.
  Communicator& communicator();
  int rank() const;
  int size() const;
  uint64_t generation() const;
  // What the latest membership change agreed on (see ElasticState).
  const ElasticState& state() const;
  // Membership changes after a failure since join().
  uint64_t recoveries() const;

  // Keeps (step, shared, local) in memory as this member's newest commit
  // (the two newest are kept), then asks whether a process waits to join.
  // Collective over the members (one small broadcast). Returns true if the
  // membership changed here: a new generation with the joiners, and state()
  // holds the commit just made. A failure inside it throws like any
  // collective; recover() then handles it.
  bool commit(uint64_t step, std::string shared, std::string local = {});

  // After an operation on communicator() failed with `error`: if the
  // communicator has failed (a lost or stuck peer: Timeout, PeerLost,
  // Aborted), abandons it, forms the next generation with the members that
  // are alive (and any process waiting to join), and returns the state
  // they agreed on. Anything else is not a membership problem: `error` is
  // rethrown. Fails with PeerLost if fewer than ElasticOptions::min_size
  // members are left.
  const ElasticState& recover(std::exception_ptr error);

  // The job is over: a process still waiting to join (or one that comes
  // later) fails at once with Aborted saying so, instead of waiting out
  // ElasticOptions::join_timeout. Any member may call it, once training
  // has ended on every member (e.g. after a final barrier).
  void finish();

 private:
  explicit ElasticGroup(std::unique_ptr<ElasticGroupImpl> impl);
  std::unique_ptr<ElasticGroupImpl> impl_;
};

}  // namespace gradwire
