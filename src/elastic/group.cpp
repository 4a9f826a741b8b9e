// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [elastic generations]: how members agree on who is alive without a
// coordinator that could itself be the one lost.
//
// A membership is a generation g with its own world communicator, whose
// bootstrap keys live under "elastic/g<g>/comm/" of one store that outlives
// every member (a file store or an in-process one; rank 0's TCP store dies
// with rank 0). A process enters generation g by claiming the lowest free
// slot "elastic/g<g>/slot/<i>" with set_if_absent (atomic: of concurrent
// claimers exactly one gets each slot), writing who it is, which
// generation it last belonged to, its rank there, and the steps of the
// commits it holds (membership.h). Slots are therefore contiguous.
// The generation closes when one participant writes "elastic/g<g>/closed"
// = N, also with set_if_absent, so every participant reads the same N; the
// processes in slots 0..N-1 are its members, a later one tries g+1.
// When to close (may_close): at the expected count (the launcher's size for
// the first generation, members plus joiners at a commit, the failed
// generation's size after a failure); else, after a failure, when no slot
// was claimed for ElasticOptions::settle, by a member that holds state, so
// that a generation never forms of processes that cannot hand it on.
// Every member reads the N slots and computes the same plan
// (plan_generation): continuing members first in their old rank order, the
// newest commit they all hold, and which of them broadcasts it. No vote is
// needed beyond the store's two atomic writes.
//
// Why a generation number rather than a retry of the same world: a process
// that learns of the failure late (it was blocked, or it was SIGSTOPped)
// must not join the survivors' world under the old numbering, and two
// groups must never train as one. Each number is used by exactly one
// closed set of members; a process left out only ever moves forward, and
// comes in through a later generation as a joiner would, receiving the
// state instead of offering its own (plan: not continuing).
//
// Joiners are seen at commit points: rank 0 looks whether slot 0 of g+1 is
// taken and broadcasts the count, so every member decides alike, in the
// same collective order, to move to g+1.
//
// The process-wide failure state of Note [watchdog] is reset between
// generations (job::reset_for_new_world), after the failed communicator is
// destroyed: its interrupt would otherwise fail every collective of the
// next world at once.
#include "gradwire/elastic.h"

#include <fmt/ranges.h>

#include <unistd.h>

#include <algorithm>
#include <deque>
#include <random>
#include <thread>

#include "base/deadline.h"
#include "base/env_values.h"
#include "base/raise.h"
#include "base/logging.h"
#include "bootstrap/store.h"
#include "elastic/membership.h"
#include "runtime/job.h"

namespace gradwire {

using elastic::Candidate;
using elastic::Plan;
using std::chrono::milliseconds;

class ElasticGroupImpl {
 public:
  Options options;
  ElasticOptions eopts;
  // What join() was given; each generation's world is created over the same
  // store, its keys under the generation's prefix.
  Rendezvous rendezvous;
  std::shared_ptr<bootstrap::Store> store;
  std::string id;
  int first_hint = INT_MAX;  // the launcher's RANK: preferred rank in the first generation
  int64_t generation = -1;  // the generation this process is a member of; -1 none
  std::unique_ptr<Communicator> comm;
  ElasticState state;
  uint64_t recoveries = 0;
  struct Commit {
    uint64_t step;
    std::string shared, local;
  };
  std::deque<Commit> commits;  // newest first, at most two

  static std::string key(int64_t g, const std::string& what) {
    return fmt::format("elastic/g{}/{}", g, what);
  }

  int comm_rank_in_last = INT_MAX;  // this process's rank in `generation`
  int size_in_last = 0;             // and that generation's size

  Candidate me() const {
    Candidate c;
    c.id = id;
    c.last_generation = generation;
    c.hint = generation >= 0 ? comm_rank_in_last : first_hint;
    for (const auto& k : commits) c.commits.push_back(k.step);
    return c;
  }

  int claim(int64_t g) {
    const std::string mine = encode(me());
    for (int i = 0;; ++i) {
      if (store->set_if_absent(key(g, fmt::format("slot/{}", i)), mine)) return i;
    }
  }

  // Slots 0.. of generation g that exist now, starting from `known`.
  void read_slots(int64_t g, std::vector<Candidate>& slots) {
    while (auto v = store->try_get(key(g, fmt::format("slot/{}", slots.size())))) {
      auto c = elastic::decode(*v);
      if (!c) {
        raise(ErrorCode::Protocol, "elastic generation {}: slot {} of {} holds '{}', not a "
              "gradwire elastic slot (is the store shared with another job? it must be fresh "
              "for each job)", g, slots.size(), store->describe(), v->substr(0, 64));
      }
      slots.push_back(std::move(*c));
    }
  }

  // Waits until generation g is closed; its size.
  int wait_closed(int64_t g, int slot, int expect, Deadline deadline) {
    std::vector<Candidate> slots;
    auto last_change = Clock::now();
    for (;;) {
      if (auto closed = store->try_get(key(g, "closed"))) {
        const int n = std::atoi(closed->c_str());
        if (n < 1) {
          raise(ErrorCode::Protocol, "elastic generation {}: 'closed' holds '{}' in {}", g,
                closed->substr(0, 32), store->describe());
        }
        return n;
      }
      const size_t before = slots.size();
      read_slots(g, slots);
      if (slots.size() != before) last_change = Clock::now();
      int64_t newest = -1;
      int peers = 0;  // participants from this process's generation, itself included
      for (const auto& c : slots) {
        newest = std::max(newest, c.last_generation);
        if (generation >= 0 && c.last_generation == generation) ++peers;
      }
      elastic::CloseQuery q;
      q.count = int(slots.size());
      q.expect = expect;
      q.min_size = eopts.min_size;
      // A member of the newest generation among the slots, committed or
      // not (without commits the plan starts afresh, which beats waiting).
      q.continuing = generation >= 0 && generation >= newest;
      q.peers = peers;
      q.previous_size = size_in_last;
      q.quiet = std::chrono::duration_cast<milliseconds>(Clock::now() - last_change);
      q.settle = eopts.settle;
      if (elastic::may_close(q)) {
        if (store->set_if_absent(key(g, "closed"), std::to_string(q.count))) {
          log().info("elastic: closed generation {} at {} members (expected {}, quiet for {} "
                     "ms)", g, q.count, expect, q.quiet.count());
        }
        continue;
      }
      if (auto done = store->try_get("elastic/finished")) {
        raise(ErrorCode::Aborted, "elastic: the job finished (its last generation was {}) "
              "before this process could join generation {}; nothing to do", *done, g);
      }
      if (deadline.expired()) {
        raise(ErrorCode::Timeout,
              "elastic: generation {} did not form within {} ms: {} process(es) arrived (this "
              "one in slot {}), {} expected, at least {} needed (ElasticOptions::min_size); "
              "are the other members alive and using the same store ({})?",
              g, eopts.join_timeout.count(), slots.size(), slot, expect, eopts.min_size,
              store->describe());
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
  }

  static bool membership_error(ErrorCode c) {
    return c == ErrorCode::Timeout || c == ErrorCode::PeerLost || c == ErrorCode::Aborted ||
           c == ErrorCode::Transport;
  }

  // Enters generation g (or a later one, if g forms without this process).
  void form(int64_t g, int expect) {
    const Deadline deadline = Deadline::after(eopts.join_timeout);
    for (;; ++g) {
      const int slot = claim(g);
      const int n = wait_closed(g, slot, expect, deadline);
      if (slot >= n) {
        log().info("elastic: generation {} formed with {} members before this process (slot "
                   "{}) arrived; waiting to join generation {}", g, n, slot, g + 1);
        expect = 0;
        continue;
      }
      std::vector<Candidate> slots;
      read_slots(g, slots);
      slots.resize(size_t(n));
      const Plan plan = elastic::plan_generation(slots);
      const int rank = int(std::find(plan.order.begin(), plan.order.end(), slot) -
                           plan.order.begin());
      try {
        Rendezvous world = rendezvous;
        world.rank = rank;
        world.size = n;
        world.local_rank = -1;
        world.key_prefix = rendezvous.key_prefix + key(g, "comm/");
        comm = Communicator::create(options, world);
        synchronize(g, plan, rank, slots);
        // Only now a member of g: one whose synchronisation failed offers
        // its old generation's state next time, or is a joiner again (a
        // joiner that counted as continuing without state would make the
        // next generation start afresh).
        generation = g;
        comm_rank_in_last = rank;
        size_in_last = n;
      } catch (const Error& e) {
        if (!membership_error(e.code())) throw;
        log().warn("elastic: generation {} failed while forming ({}); trying generation {}", g,
                   e.what(), g + 1);
        comm.reset();
        job::reset_for_new_world();
        expect = n;
        continue;
      }
      if (rank == 0) store->set("elastic/current", std::to_string(g));
      return;
    }
  }

  // Every member leaves with the committed state the plan names.
  void synchronize(int64_t g, const Plan& plan, int rank, const std::vector<Candidate>& slots) {
    const int64_t previous = generation;
    const int previous_size = size_in_last;
    state = ElasticState{};
    if (rank == 0) {
      std::vector<int> kept;
      for (int r = 0; r < plan.continuing; ++r) kept.push_back(slots[size_t(plan.order[r])].hint);
      std::vector<int> lost;
      for (int r = 0; r < previous_size && previous >= 0; ++r) {
        if (std::find(kept.begin(), kept.end(), r) == kept.end()) lost.push_back(r);
      }
      auto& logger = log();
      logger.log(previous >= 0 ? spdlog::level::warn : spdlog::level::info,
                 "elastic: generation {}: {} members ({} continuing from generation {}, {} "
                 "joined){}{}", g, plan.order.size(), plan.continuing, previous,
                 plan.order.size() - size_t(plan.continuing),
                 lost.empty() ? "" : fmt::format("; ranks {} of generation {} are gone and "
                                                 "their local state (e.g. error feedback) is "
                                                 "dropped", fmt::join(lost, ","), previous),
                 plan.restored ? fmt::format("; continuing from the commit at step {}", plan.step)
                               : "; no committed state: starting afresh");
    }
    if (!plan.restored) {
      commits.clear();
      return;
    }
    const Commit* mine = nullptr;
    for (const auto& c : commits) {
      if (c.step == plan.step && rank < plan.continuing) mine = &c;
    }
    uint64_t len = rank == plan.root ? uint64_t(mine->shared.size()) : 0;
    std::string shared = rank == plan.root ? mine->shared : std::string();
    if (comm->size() > 1) {
      comm->broadcast(&len, &len, 1, DataType::Int64, plan.root).wait();
      shared.resize(size_t(len));
      comm->broadcast(shared.data(), shared.data(), size_t(len), DataType::UInt8, plan.root)
          .wait();
    }
    state.restored = true;
    state.step = plan.step;
    state.shared = std::move(shared);
    if (plan.keeps_local[size_t(rank)] && mine) {
      state.local = mine->local;
    } else if (rank < plan.continuing) {
      log().warn("elastic: this member's own commit at step {} is gone: its local state "
                 "starts empty", plan.step);
    }
    commits.clear();
    commits.push_back({state.step, state.shared, state.local});
  }
};

std::unique_ptr<ElasticGroup> ElasticGroup::join(const Options& options,
                                                 const Rendezvous& rendezvous,
                                                 const ElasticOptions& elastic) {
  auto impl = std::make_unique<ElasticGroupImpl>();
  impl->options = options.with_env_overrides();
  impl->options.validate();
  set_log_level(impl->options.diagnostics.log_level);
  impl->eopts = elastic;
  if (const char* v = env::required_value("GRADWIRE_ELASTIC_SETTLE_S")) {
    impl->eopts.settle = env::parse_seconds("GRADWIRE_ELASTIC_SETTLE_S", v, true);
  }
  if (impl->eopts.min_size < 1) {
    raise(ErrorCode::InvalidArgument, "ElasticOptions::min_size={} (expected >= 1)",
          impl->eopts.min_size);
  }
  if (rendezvous.size < 1 || rendezvous.rank < 0 || rendezvous.rank >= rendezvous.size) {
    raise(ErrorCode::InvalidArgument, "elastic join: rank {} of size {} (expected size >= 1 and "
          "0 <= rank < size: the first generation's size and this process's preferred rank)",
          rendezvous.rank, rendezvous.size);
  }
  using Kind = Rendezvous::Kind;
  impl->rendezvous = rendezvous;
  if (rendezvous.kind == Kind::FileStore) {
    impl->store = bootstrap::make_file_store(rendezvous.dir);
  } else if (rendezvous.kind == Kind::InProcess && rendezvous.store) {
    impl->store = bootstrap::share_in_process_store(rendezvous.store);
  } else {
    raise(ErrorCode::InvalidArgument,
          "elastic membership needs a store that outlives every member: a file store "
          "(Rendezvous::file, or GRADWIRE_STORE_DIR with RANK and WORLD_SIZE) or an in-process "
          "store; a TCP store is served by rank 0 and is lost with it, and mpirun cannot "
          "replace a rank");
  }
  if (!rendezvous.key_prefix.empty()) {
    impl->store = bootstrap::prefix_store(bootstrap::shared_store(impl->store),
                                          rendezvous.key_prefix);
  }
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  impl->id = fmt::format("{}/{}/{:08x}", host, ::getpid(), std::random_device{}());
  impl->first_hint = rendezvous.rank;
  // The first generation forms at the launcher's size; a process that comes
  // after it is a joiner and waits for the members' next commit.
  int64_t g = 0;
  int expect = rendezvous.size;
  if (auto cur = impl->store->try_get("elastic/current")) {
    g = std::atoll(cur->c_str()) + 1;
    expect = 0;
  } else if (impl->store->try_get(ElasticGroupImpl::key(0, "closed"))) {
    g = 1;
    expect = 0;
  }
  impl->form(g, expect);
  return std::unique_ptr<ElasticGroup>(new ElasticGroup(std::move(impl)));
}

ElasticGroup::ElasticGroup(std::unique_ptr<ElasticGroupImpl> impl) : impl_(std::move(impl)) {}
ElasticGroup::~ElasticGroup() = default;

Communicator& ElasticGroup::communicator() { return *impl_->comm; }
int ElasticGroup::rank() const { return impl_->comm->rank(); }
int ElasticGroup::size() const { return impl_->comm->size(); }
uint64_t ElasticGroup::generation() const { return uint64_t(impl_->generation); }
const ElasticState& ElasticGroup::state() const { return impl_->state; }
uint64_t ElasticGroup::recoveries() const { return impl_->recoveries; }

bool ElasticGroup::commit(uint64_t step, std::string shared, std::string local) {
  auto& d = *impl_;
  d.commits.push_front({step, std::move(shared), std::move(local)});
  if (d.commits.size() > 2) d.commits.pop_back();
  int64_t waiting = 0;
  if (d.comm->rank() == 0) {
    std::vector<Candidate> slots;
    d.read_slots(d.generation + 1, slots);
    waiting = int64_t(slots.size());
  }
  if (d.comm->size() > 1) {
    d.comm->broadcast(&waiting, &waiting, 1, DataType::Int64, 0).wait();
  }
  if (waiting == 0) return false;
  log().info("elastic: {} process(es) wait to join at step {}: moving to generation {}", waiting,
             step, d.generation + 1);
  const int expect = d.comm->size() + int(waiting);
  d.comm.reset();
  d.form(d.generation + 1, expect);
  return true;
}

void ElasticGroup::finish() {
  impl_->store->set("elastic/finished", std::to_string(impl_->generation));
}

const ElasticState& ElasticGroup::recover(std::exception_ptr error) {
  auto& d = *impl_;
  std::string what = "unknown error";
  bool membership = false;
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    what = e.what();
    membership = ElasticGroupImpl::membership_error(e.code());
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  // An error that reached us through another library (torch's autograd
  // wraps what a DDP hook throws) still left its mark on the communicator.
  if (d.comm && d.comm->aborted()) membership = true;
  if (job::failed_flag().load()) membership = true;
  if (!membership) std::rethrow_exception(error);
  const int previous_size = d.comm ? d.comm->size() : d.size_in_last;
  // Note [a dead peer on this host]: members this process saw exit will not
  // come; the rest are waited for (up to ElasticOptions::settle).
  auto exited = job::exited_ranks();
  std::sort(exited.begin(), exited.end());
  exited.erase(std::unique(exited.begin(), exited.end()), exited.end());
  const int expect = std::max(1, previous_size - int(exited.size()));
  log().warn("elastic: generation {} failed ({}); forming generation {} with the members that "
             "are alive{}", d.generation, what.substr(0, 400), d.generation + 1,
             exited.empty() ? std::string()
                            : fmt::format(" (ranks {} exited)", fmt::join(exited, ",")));
  if (d.comm) d.comm->abort("elastic recovery: " + what.substr(0, 200));
  d.comm.reset();
  job::reset_for_new_world();
  ++d.recoveries;
  d.form(d.generation + 1, expect);
  if (d.comm->size() < d.eopts.min_size) {
    raise(ErrorCode::PeerLost, "elastic: only {} members are left (ElasticOptions::min_size={})",
          d.comm->size(), d.eopts.min_size);
  }
  return d.state;
}

}  // namespace gradwire
