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
#include <charconv>
#include <deque>
#include <random>
#include <thread>

#include "base/deadline.h"
#include "base/env_values.h"
#include "base/raise.h"
#include "base/logging.h"
#include "bootstrap/etcd_store.h"
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
  // The ids of `generation`'s members, by rank (Note [etcd leases]: whose
  // presence to look for after a failure).
  std::vector<std::string> member_ids;
  // The store has leases: "elastic/alive/<id>" says which processes live.
  bool leases = false;
  // Note [heartbeats between hosts]: the last recovery's expectation leaves
  // out ranks only suspected lost.
  bool suspected = false;
  // The job's first size is left open (an etcd rendezvous without a size):
  // generation 0 forms with min_size..max_size processes (CloseQuery::first).
  bool open_size = false;

  static std::string alive_key(const std::string& id) { return "elastic/alive/" + id; }

  // With leases: does every member of `generation` (but those among
  // `arrived`) hold no lease any more? Members that arrived count as here.
  bool alive_arrived(const std::vector<Candidate>& arrived) {
    for (const std::string& id : member_ids) {
      const bool here = std::any_of(arrived.begin(), arrived.end(),
                                    [&](const Candidate& c) { return c.id == id; });
      if (!here && store->try_get(alive_key(id))) return false;
    }
    return true;
  }

  // With leases: is any member of the job's current generation alive? A
  // job whose members all died (or ended without finish()) left its keys
  // behind; a process that comes later must not wait for it.
  void check_job_alive(Deadline* next_check) {
    if (!leases || (next_check && Clock::now() < next_check->at())) return;
    if (next_check) *next_check = Deadline::after(milliseconds(1000));
    auto cur = store->try_get("elastic/current");
    if (!cur) return;
    const int64_t g = parse_generation(*cur);
    std::vector<Candidate> slots;
    read_slots(g, slots);
    const auto closed = store->try_get(key(g, "closed"));
    const size_t n = closed ? std::min(slots.size(), size_t(std::max(0, std::atoi(closed->c_str()))))
                            : slots.size();
    for (size_t i = 0; i < n; ++i) {
      if (slots[i].id == id || store->try_get(alive_key(slots[i].id))) return;
    }
    raise(ErrorCode::InvalidArgument,
          "elastic: {} holds an elastic job that is no longer running: none of the {} member(s) "
          "of its generation {} holds its lease (they died, or ended without "
          "ElasticGroup::finish()). Its keys would be read as this job's; give this job a "
          "prefix of its own (GRADWIRE_ETCD_PREFIX), or delete the old keys (etcdctl "
          "--endpoints=... del --prefix <the prefix>)",
          store->describe(), n, g);
  }

  int64_t parse_generation(const std::string& text) const {
    int64_t g = -1;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), g);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || g < 0) {
      raise(ErrorCode::Protocol, "elastic: 'elastic/current' holds '{}' in {}, not a generation "
            "number: the store holds another program's or another job's data (it must be the "
            "job's own: a fresh GRADWIRE_STORE_DIR, or a GRADWIRE_ETCD_PREFIX of its own)",
            text.substr(0, 32), store->describe());
    }
    return g;
  }

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
    uint64_t cursor = 0;  // Store::wait_change: watches where the store can
    Deadline next_alive_check = Deadline::after(milliseconds(0));
    Deadline next_job_check = Deadline::after(milliseconds(1000));
    bool alive_arrived = false;
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
      q.max_size = eopts.max_size;
      q.first = g == 0 && open_size;
      q.suspected = suspected;
      // Note [etcd leases]: after a failure, has everyone the cluster
      // counts as alive arrived? Looked up at most 4 times a second.
      if (leases && q.continuing && !member_ids.empty() && Clock::now() >= next_alive_check.at()) {
        alive_arrived = alive_arrived_for(slots);
        next_alive_check = Deadline::after(milliseconds(250));
      }
      q.alive_arrived = alive_arrived;
      if (elastic::may_close(q)) {
        const int n = elastic::closed_size(q);
        if (store->set_if_absent(key(g, "closed"), std::to_string(n))) {
          log().info("elastic: closed generation {} at {} members (expected {}, quiet for {} "
                     "ms{})", g, n, expect, q.quiet.count(),
                     q.alive_arrived ? ", every member alive by its lease arrived" : "");
        }
        continue;
      }
      if (auto done = store->try_get("elastic/finished")) {
        raise(ErrorCode::Aborted, "elastic: the job finished (its last generation was {}) "
              "before this process could join generation {}; nothing to do (a new job needs a "
              "store of its own: a fresh GRADWIRE_STORE_DIR, or a new GRADWIRE_ETCD_PREFIX)",
              *done, g);
      }
      if (!q.continuing) check_job_alive(&next_job_check);
      if (deadline.expired()) {
        raise(ErrorCode::Timeout,
              "elastic: generation {} did not form within {} ms: {} process(es) arrived (this "
              "one in slot {}), {} expected, at least {} needed (ElasticOptions::min_size); "
              "are the other members alive and using the same store ({})?",
              g, eopts.join_timeout.count(), slots.size(), slot, expect, eopts.min_size,
              store->describe());
      }
      // Wake on a change of the generation's keys (a slot claimed, the
      // generation closed), or when it is time to look again otherwise.
      auto until = std::min(deadline.at(), Clock::now() + milliseconds(500));
      if (q.count >= q.min_size && q.quiet < q.settle) {
        until = std::min(until, last_change + q.settle + milliseconds(1));
      }
      if (leases && q.continuing) until = std::min(until, next_alive_check.at());
      store->wait_change(key(g, ""), &cursor, Deadline(until));
    }
  }

  bool alive_arrived_for(const std::vector<Candidate>& slots) {
    try {
      return alive_arrived(slots);
    } catch (const Error& e) {
      log().debug("elastic: cannot read the members' leases: {}", e.what());
      return false;
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
        member_ids.clear();
        for (int s : plan.order) member_ids.push_back(slots[size_t(s)].id);
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

namespace {

int size_from_env(const char* name, int fallback) {
  const char* v = env::required_value(name);
  if (!v) return fallback;
  int n = 0;
  const std::string_view t(v);
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
  if (ec != std::errc() || end != t.data() + t.size() || n < 1) {
    raise(ErrorCode::InvalidArgument, "{}='{}' is not a whole number >= 1 (a world size of the "
          "elastic job)", name, v);
  }
  return n;
}

// "gradwire elastic 1 min 2 max 4": what every process of a job must agree
// on, written once in the store (Note [elastic generations]).
std::string job_marker(const ElasticOptions& e) {
  return fmt::format("gradwire elastic 1 min {} max {}", e.min_size, e.max_size);
}

}  // namespace

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
  impl->eopts.min_size = size_from_env("GRADWIRE_ELASTIC_MIN_SIZE", impl->eopts.min_size);
  impl->eopts.max_size = size_from_env("GRADWIRE_ELASTIC_MAX_SIZE", impl->eopts.max_size);
  if (impl->eopts.min_size < 1) {
    raise(ErrorCode::InvalidArgument, "ElasticOptions::min_size={} (expected >= 1)",
          impl->eopts.min_size);
  }
  if (impl->eopts.max_size < 0 ||
      (impl->eopts.max_size > 0 && impl->eopts.max_size < impl->eopts.min_size)) {
    raise(ErrorCode::InvalidArgument, "ElasticOptions::max_size={} (GRADWIRE_ELASTIC_MAX_SIZE) is "
          "below min_size={} (GRADWIRE_ELASTIC_MIN_SIZE) (expected 0 for no limit, or >= "
          "min_size)", impl->eopts.max_size, impl->eopts.min_size);
  }
  using Kind = Rendezvous::Kind;
  // An etcd job may leave the first generation's size open (size 0): it
  // then starts with min_size..max_size processes, ranks by arrival.
  const bool open_size = rendezvous.kind == Kind::Etcd && rendezvous.size == 0;
  if (!open_size &&
      (rendezvous.size < 1 || rendezvous.rank < 0 || rendezvous.rank >= rendezvous.size)) {
    raise(ErrorCode::InvalidArgument, "elastic join: rank {} of size {} (expected size >= 1 and "
          "0 <= rank < size: the first generation's size and this process's preferred rank)",
          rendezvous.rank, rendezvous.size);
  }
  impl->rendezvous = rendezvous;
  impl->open_size = open_size;
  if (rendezvous.kind == Kind::Etcd) {
    impl->store = bootstrap::make_etcd_job_store(rendezvous, impl->options.timeout,
                                                 /*ephemeral_writes=*/false);
  } else if (rendezvous.kind == Kind::FileStore) {
    impl->store = bootstrap::make_file_store(rendezvous.dir);
  } else if (rendezvous.kind == Kind::InProcess && rendezvous.store) {
    impl->store = bootstrap::share_in_process_store(rendezvous.store);
  } else {
    raise(ErrorCode::InvalidArgument,
          "elastic membership needs a store that outlives every member: etcd across hosts "
          "(Rendezvous::etcd, or GRADWIRE_ETCD_ENDPOINTS with GRADWIRE_ETCD_PREFIX), a file "
          "store on one host or a shared file system (Rendezvous::file, or GRADWIRE_STORE_DIR "
          "with RANK and WORLD_SIZE) or an in-process store; a TCP store is served by rank 0 "
          "and is lost with it, and mpirun cannot replace a rank");
  }
  if (!rendezvous.key_prefix.empty() && rendezvous.kind != Kind::Etcd) {
    impl->store = bootstrap::prefix_store(bootstrap::shared_store(impl->store),
                                          rendezvous.key_prefix);
  }
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  impl->id = fmt::format("{}/{}/{:08x}", host, ::getpid(), std::random_device{}());
  impl->first_hint = rendezvous.rank;
  // Every process of the job must agree on its sizes; a store that holds
  // something else under this name is another program's.
  const std::string marker = job_marker(impl->eopts);
  if (!impl->store->set_if_absent("elastic/job", marker)) {
    const std::string theirs = impl->store->try_get("elastic/job").value_or("");
    if (!theirs.starts_with("gradwire elastic 1 ")) {
      raise(ErrorCode::Protocol, "elastic: {} holds '{}' under elastic/job, not a gradwire "
            "elastic job: the store belongs to another program or job; give this job its own "
            "(a fresh GRADWIRE_STORE_DIR, or a GRADWIRE_ETCD_PREFIX of its own)",
            impl->store->describe(), theirs.substr(0, 64));
    }
    if (theirs != marker) {
      raise(ErrorCode::InvalidArgument, "elastic: this process asks for '{}' but the job in {} "
            "was started with '{}': every process of a job needs the same "
            "GRADWIRE_ELASTIC_MIN_SIZE and GRADWIRE_ELASTIC_MAX_SIZE (ElasticOptions::min_size, "
            "max_size), or this is another job's store", marker, impl->store->describe(), theirs);
    }
  }
  // Note [etcd leases]: this process's presence, for as long as it lives.
  impl->leases = impl->store->set_ephemeral(ElasticGroupImpl::alive_key(impl->id), host);
  // The first generation forms at the launcher's size (or, size left open,
  // with min_size..max_size processes); a process that comes after it is a
  // joiner and waits for the members' next commit.
  int64_t g = 0;
  int expect = open_size ? impl->eopts.max_size : rendezvous.size;
  if (impl->eopts.max_size > 0) expect = std::min(expect, impl->eopts.max_size);
  if (auto cur = impl->store->try_get("elastic/current")) {
    g = impl->parse_generation(*cur) + 1;
    expect = 0;
    if (auto done = impl->store->try_get("elastic/finished")) {
      raise(ErrorCode::Aborted, "elastic: the job finished (its last generation was {}) before "
            "this process could join; nothing to do (a new job needs a store of its own: a fresh "
            "GRADWIRE_STORE_DIR, or a new GRADWIRE_ETCD_PREFIX)", *done);
    }
    impl->check_job_alive(nullptr);
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
  // ElasticOptions::max_size: joiners beyond it stay waiting (spares: they
  // come in when a member is lost).
  if (d.eopts.max_size > 0) waiting = std::min<int64_t>(waiting, d.eopts.max_size - d.comm->size());
  if (d.comm->size() > 1) {
    d.comm->broadcast(&waiting, &waiting, 1, DataType::Int64, 0).wait();
  }
  if (waiting <= 0) return false;
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
  // Note [heartbeats between hosts]: ranks of a silent host are expected
  // no more either, but only suspected: closing without them needs the
  // majority (membership.h, CloseQuery::suspected).
  const auto suspected = job::suspected_ranks();
  d.suspected = !suspected.empty();
  exited.insert(exited.end(), suspected.begin(), suspected.end());
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
  d.suspected = false;
  if (d.comm->size() < d.eopts.min_size) {
    raise(ErrorCode::PeerLost, "elastic: only {} members are left (ElasticOptions::min_size={})",
          d.comm->size(), d.eopts.min_size);
  }
  return d.state;
}

}  // namespace gradwire
