// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "runtime/watchdog.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

#include "bootstrap/store.h"
#include "collectives/context.h"
#include "runtime/communicator_impl.h"
#include "base/raise.h"
#include "diag/flight_recorder.h"
#include "base/logging.h"
#include "diag/reach.h"
#include "base/env_values.h"
#include "runtime/heartbeat.h"

namespace gradwire {


Watchdog::Watchdog(CommunicatorImpl& comm, bootstrap::Store* store)
    : sh_(comm.watchdog_state), store_(store), rank_(comm.rank), options_(comm.options) {
  sh_->has_store = store != nullptr;  // before the thread starts: no lock needed
  if (store) {
    job::begin_world(comm.size);
  }
  thread_ = std::thread(&Watchdog::loop, sh_, &comm, store);  // after the reset above
}

Watchdog::~Watchdog() {
  if (!stop()) {
    log().warn("watchdog thread is blocked in a store call; leaving it behind");
  }
}

bool Watchdog::stop() {
  if (stopped_) return !detached_;
  stopped_ = true;
  std::unique_lock<std::mutex> lk(sh_->mu);
  // A failure of the last collective (the caller is about to exit with its
  // error): tell the others now, or they would never hear of it.
  if (store_ && job::pending() &&
      sh_->cv.wait_for(lk, std::chrono::seconds(2), [&] { return !sh_->in_store; })) {
    sh_->in_store = true;
    lk.unlock();
    job::exchange(*store_, rank_, options_);
    lk.lock();
    sh_->in_store = false;
  }
  sh_->stop = true;
  sh_->cv.notify_all();
  // A store call is bounded by the store's own deadline, which can be the
  // whole collective timeout; do not make the caller wait that long.
  if (!sh_->cv.wait_for(lk, std::chrono::seconds(2), [&] { return !sh_->in_store; })) {
    lk.unlock();
    thread_.detach();
    detached_ = true;
    return false;
  }
  lk.unlock();
  thread_.join();
  return true;
}

namespace {

std::string unknown_reach(std::string_view why) {
  return fmt::format(" (which ranks reached it is unknown: {})", why);
}

// Note [reach report]: every other rank's last started collective, as far
// as it can be read before kReachGather has passed. Throws Error when the
// store is gone.
std::string gather_reach(bootstrap::Store& store, const std::string& comm, int rank, int size,
                         const std::string& label, int64_t seq) {
  const auto give_up = std::chrono::steady_clock::now() + reach::kReachGather;
  std::vector<std::optional<int64_t>> last(static_cast<size_t>(size));
  last[size_t(rank)] = seq;  // the failing collective runs here
  bool cut = false;
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    if (std::chrono::steady_clock::now() >= give_up) {
      cut = true;
      break;
    }
    if (auto v = store.try_get(reach::progress_key(comm, r))) {
      last[size_t(r)] = reach::parse_progress(*v);
    }
  }
  return "; " + reach::sentence(label, seq, last,
                                cut ? fmt::format("not published, or not read within {:.1f} s",
                                                  reach::kReachGather.count() / 1000.0)
                                    : "no progress published");
}

constexpr const char* kStoreGone =
    "the job's store stopped answering; a TCP store is served by rank 0";

// Note [straggler detection] in diag/straggler.h: its part of the store
// round. False when the store is gone (`lost` says why, as for progress).
bool straggler_round(straggler::Detector& stragglers, bootstrap::Store& store, int rank,
                     std::string& lost) {
  try {
    stragglers.round(store);
    return true;
  } catch (const Error& e) {
    log().debug("rank {}: watchdog stops using the store: {}", rank, e.what());
    if (e.code() == ErrorCode::PeerLost) lost = e.message();
    return false;
  }
}

}  // namespace

namespace {

// Note [a lost rank on another host]
// A rank on this host that dies is seen by its pid (Note [a dead peer on
// this host]); one on another host was seen by nobody until the deadline.
// So each world rank leaves a will in the job's store (Note [a connection's
// last will] in src/bootstrap/tcp_store_server.h): "gradwire/lost" =
// rank, pid, host. If its process dies (its kernel closes the connection) or
// its host or link goes silent (rank 0's kernel gives up on the connection
// within liveness_timeout(), Note [store liveness]), the store writes the key;
// the world's watchdog reads it in its once-a-second exchange, and a
// collective still running kDeadPeerGrace after that fails with PeerLost
// naming the rank, as a dead local peer does: the world's, or a group's
// that has the rank among its members (set_members). A collective that is
// not running is left alone (the rank may have finished and exited without
// closing its communicator); the next one that waits for the lost rank
// fails the same way. The lost rank itself, if alive behind a dead link,
// loses the store too and reports rank 0 (Note [the store host is gone]).
// The file and in-process stores keep no connection and leave no will.
void leave_will(bootstrap::Store& store, int world_rank) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "?");
  try {
    store.set_will(job::kLostKey, job::encode_lost_rank({world_rank, int(::getpid()), host}));
  } catch (const Error& e) {
    log().warn("rank {}: could not leave a will in the store ({}); a loss of this rank on "
               "another host will be found only by the collective deadline", world_rank,
               e.what());
  }
}

// Note [a dead peer on this host]: false once `pid` is gone or a zombie
// (a SIGKILLed child stays one until its launcher reaps it).
bool process_alive(int pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (!f) return errno != ENOENT;
  char buf[512] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  // "pid (comm) S ...": the state follows the last ')'.
  const char* close = nullptr;
  for (size_t i = 0; i < n; ++i) {
    if (buf[i] == ')') close = buf + i;
  }
  if (!close || close + 2 >= buf + n) return true;
  return close[2] != 'Z' && close[2] != 'X';
}

// Note [heartbeats between hosts]: GRADWIRE_HOST_LOST_S, 0 for off.
std::chrono::milliseconds host_lost_timeout() {
  const char* v = env::required_value("GRADWIRE_HOST_LOST_S");
  if (!v) return kDefaultHostLost;
  const auto t = env::parse_seconds("GRADWIRE_HOST_LOST_S", v, /*zero_allowed=*/true);
  if (t.count() != 0 && t < std::chrono::milliseconds(200)) {
    raise(ErrorCode::InvalidArgument, "GRADWIRE_HOST_LOST_S='{}' is below 0.2 s: heartbeats go "
          "out every tenth of it, and a scheduling hiccup would report live ranks lost (0 turns "
          "them off)", v);
  }
  return t;
}

constexpr const char* kHeartbeatKey = "gradwire/heartbeat/";

// "ranks 2, 3 (pids 41 and 42 on host node-b)", for a PeerLost message.
std::string describe_silent(const std::vector<std::pair<int, Heartbeats::Peer>>& silent,
                            const std::string& comm_name) {
  std::string ranks, where;
  for (size_t i = 0; i < silent.size(); ++i) {
    ranks += fmt::format("{}{}", i ? ", " : "", silent[i].first);
    where += fmt::format("{}pid {} on host {}", i ? ", " : "", silent[i].second.pid,
                         silent[i].second.host);
  }
  return fmt::format("{} {}{} ({})", silent.size() == 1 ? "rank" : "ranks", ranks,
                     comm_name == "world" ? "" : " of the world", where);
}

}  // namespace

std::string Watchdog::reach_report(Shared& sh, std::string_view label, uint32_t seq) {
  std::unique_lock<std::mutex> lk(sh.mu);
  if (!sh.has_store) return sh.store_gone.empty() ? "" : unknown_reach(sh.store_gone);
  if (sh.stop) return unknown_reach("the communicator was shutting down");
  const uint64_t id = ++sh.asked;
  sh.ask_label = std::string(label);
  sh.ask_seq = seq;
  sh.cv.notify_all();
  sh.cv.wait_for(lk, reach::kReachWait, [&] { return sh.answered >= id || sh.stop; });
  if (sh.answered >= id) return sh.answer;
  if (sh.stop) return unknown_reach("the communicator was shutting down");
  return unknown_reach(fmt::format("the store did not answer within {:.1f} s",
                                   reach::kReachWait.count() / 1000.0));
}

namespace {

// Note [heartbeats between hosts]: the world's heartbeats, if any of its
// ranks is on another machine (`pids`: members' local pids, 0 for those),
// with this rank's address published in `store`. Null when off or
// impossible (logged).
std::unique_ptr<Heartbeats> start_heartbeats(CommunicatorImpl& comm, const std::vector<int>& pids,
                                             bootstrap::Store& store,
                                             const std::shared_ptr<Watchdog::Shared>& sh) {
  std::vector<bool> watched(pids.size(), false);
  bool any = false;
  for (size_t r = 0; r < pids.size(); ++r) {
    watched[r] = int(r) != comm.rank && pids[r] == 0;
    any = any || watched[r];
  }
  const auto timeout = host_lost_timeout();
  if (!any || timeout.count() == 0) return nullptr;
  const std::string ip =
      Heartbeats::local_ip(comm.transport ? comm.transport->address() : std::string(), comm.iface);
  if (ip.empty()) {
    log().info("rank {}: no heartbeats between hosts (this rank's endpoint has no IP address: "
               "set GRADWIRE_OFI_IFACE); a lost host is found by the store's will or the "
               "deadline", comm.rank);
    return nullptr;
  }
  std::unique_ptr<Heartbeats> hb;
  try {
    hb = std::make_unique<Heartbeats>(comm.rank, std::move(watched), timeout, ip);
  } catch (const Error& e) {
    log().warn("rank {}: no heartbeats between hosts: {}", comm.rank, e.what());
    return nullptr;
  }
  {
    std::lock_guard<std::mutex> lk(sh->mu);
    if (sh->stop) return hb;
    sh->in_store = true;
  }
  try {
    store.set(kHeartbeatKey + std::to_string(comm.rank), Heartbeats::encode(hb->self()));
  } catch (const Error& e) {
    log().warn("rank {}: could not publish this rank's heartbeat address: {}", comm.rank, e.what());
  }
  {
    std::lock_guard<std::mutex> lk(sh->mu);
    sh->in_store = false;
  }
  sh->cv.notify_all();
  log().debug("rank {}: heartbeats on {}:{} (lost after {} ms of silence)", comm.rank, ip,
              hb->self().port, timeout.count());
  return hb;
}

}  // namespace

void Watchdog::loop(std::shared_ptr<Shared> sh, CommunicatorImpl* comm, bootstrap::Store* store) {
  using namespace std::chrono;
  auto next_poll = steady_clock::now();
  bool stuck_reported = false;
  steady_clock::time_point failure_seen{};  // when another rank's failure was first seen
  const Options options = comm->options;
  const int rank = comm->rank, size = comm->size;
  const std::string name = comm->name;
  const std::shared_ptr<straggler::Detector> stragglers = comm->stragglers;
  int64_t published = -1;  // the progress last written to the store
  // Note [the store host is gone]: why the store closed on us, if it did.
  std::string store_lost;
  // Note [a dead peer on this host]: the first peer seen gone, and when;
  // dead_host is set when the store reported it (Note [a lost rank on
  // another host]).
  int dead_rank = -1, dead_pid = 0, dead_world_rank = -1;
  std::optional<std::string> dead_host;
  steady_clock::time_point dead_seen{};
  bool dead_reported = false;
  // Note [heartbeats between hosts]: the world's, once its members are known.
  std::unique_ptr<Heartbeats> heartbeats;
  bool heartbeats_decided = false;
  std::vector<std::pair<int, Heartbeats::Peer>> dead_silent;
  if (store && name == "world") {
    {
      std::lock_guard<std::mutex> lk(sh->mu);
      if (sh->stop) return;
      sh->in_store = true;
    }
    leave_will(*store, comm->world_rank);
    {
      std::lock_guard<std::mutex> lk(sh->mu);
      sh->in_store = false;
    }
    sh->cv.notify_all();
  }
  auto drop_store = [&] {  // under sh->mu
    store = nullptr;
    sh->has_store = false;
    sh->store_gone = kStoreGone;
  };
  for (;;) {
    // Note [spins that adapt] in collectives/context.cpp: every ~100 ms.
    if (rusage ru{}; getrusage(RUSAGE_SELF, &ru) == 0) {
      collectives::note_preemptions(uint64_t(ru.ru_nivcsw), steady_clock::now());
    }
    bool report_store_lost = false;  // decided under the locks, reported after them
    std::string report_dead;         // likewise: the collective a dead peer left waiting
    int64_t progress = -1;
    uint64_t ask = 0;
    std::string ask_label;
    int64_t ask_seq = 0;
    {
      std::unique_lock<std::mutex> lk(sh->mu);
      sh->cv.wait_for(lk, milliseconds(100), [&] { return sh->stop || sh->asked != sh->answered; });
      if (sh->stop) return;
      // Under sh->mu: the communicator cannot be destroyed meanwhile.
      if (!stuck_reported) {
        const std::string what = comm->engine().overdue();
        if (!what.empty()) {
          stuck_reported = true;
          comm->engine_stuck(what);
        }
      }
      // Note [a published failure ends a stuck wait].
      if (!stuck_reported && job::failed_flag().load(std::memory_order_acquire)) {
        const auto now = steady_clock::now();
        if (failure_seen == steady_clock::time_point{}) failure_seen = now;
        if (auto cur = comm->engine().running()) {
          steady_clock::time_point started;
          bool running = false;
          {
            std::lock_guard<std::mutex> state_lk(cur->mu);
            running = cur->phase == detail::WorkState::Phase::Running && !cur->finishing;
            started = cur->started;
          }
          if (running && now - std::max(started, failure_seen) > kInterruptGrace) {
            stuck_reported = true;
            comm->abandon_engine(cur);
          }
        }
      }
      // Note [the store host is gone]: a world collective that runs after
      // rank 0's store closed on us cannot finish.
      if (!stuck_reported && !store_lost.empty() &&
          !job::failed_flag().load(std::memory_order_acquire)) {
        if (auto cur = comm->engine().running()) {
          std::lock_guard<std::mutex> state_lk(cur->mu);
          report_store_lost = cur->phase == detail::WorkState::Phase::Running && !cur->finishing;
        }
      }
      // Note [a dead peer on this host].
      if (!stuck_reported && !dead_reported &&
          !job::failed_flag().load(std::memory_order_acquire)) {
        std::string running_label;
        if (auto cur = comm->engine().running()) {
          std::lock_guard<std::mutex> state_lk(cur->mu);
          if (cur->phase == detail::WorkState::Phase::Running && !cur->finishing) {
            running_label = cur->description();
          }
        }
        if (!running_label.empty()) {
          const auto now = steady_clock::now();
          if (dead_rank < 0) {
            const auto& pids = comm->members_locked().local_pids;
            for (size_t r = 0; r < pids.size(); ++r) {
              if (pids[r] > 0 && !process_alive(pids[r])) {
                dead_rank = int(r);
                dead_pid = pids[r];
                dead_seen = now;
                break;
              }
            }
            if (dead_rank < 0) {
              // A world rank; a group's watchdog looks it up among its members.
              if (auto lost = job::lost_rank()) {
                const auto& world = comm->members_locked().world_ranks;
                int r = world.empty() ? lost->rank : -1;
                for (size_t i = 0; i < world.size(); ++i) {
                  if (world[i] == lost->rank) r = int(i);
                }
                if (r >= 0 && r < size && r != rank) {
                  dead_rank = r;
                  dead_world_rank = lost->rank;
                  dead_pid = lost->pid;
                  dead_host = lost->host;
                  dead_seen = now;
                }
              }
            }
            if (dead_rank < 0 && heartbeats) {
              if (auto silent = heartbeats->silent(); !silent.empty()) {
                dead_silent = std::move(silent);
                dead_rank = dead_silent.front().first;
                dead_seen = now;
              }
            }
          } else if (now - dead_seen >= kDeadPeerGrace) {
            dead_reported = true;
            report_dead = std::move(running_label);
          }
        }
      }
      progress = comm->last_started.load(std::memory_order_relaxed);
      if (sh->asked != sh->answered) {
        if (store) {
          ask = sh->asked;
          ask_label = sh->ask_label;
          ask_seq = sh->ask_seq;
          sh->in_store = true;
        } else {
          sh->answer = unknown_reach(sh->store_gone.empty() ? kStoreGone : sh->store_gone);
          sh->answered = sh->asked;
          sh->cv.notify_all();
        }
      }
    }
    if (store) stragglers->harvest(progress);  // Note [straggler detection]
    // Outside sh->mu: it dumps the flight recorder (file I/O) and may abort.
    if (report_store_lost) job::store_host_lost(rank, store_lost, options);
    if (!report_dead.empty() && store) {
      // A peer that failed first publishes its error before it exits
      // (CommunicatorImpl::fail): that report names the cause (a mismatch,
      // its own timeout), its exit is only the consequence. Read it first.
      {
        std::lock_guard<std::mutex> lk(sh->mu);
        if (sh->stop) return;
        sh->in_store = true;
      }
      const bool alive = job::exchange(*store, rank, options, &store_lost);
      {
        std::lock_guard<std::mutex> lk(sh->mu);
        sh->in_store = false;
        if (!alive) drop_store();
      }
      sh->cv.notify_all();
      if (job::failed_flag().load(std::memory_order_acquire)) report_dead.clear();
    }
    if (!report_dead.empty() && !dead_silent.empty()) {
      std::vector<int> ranks;
      for (const auto& [r, peer] : dead_silent) ranks.push_back(r);
      job::peers_suspected(comm->world_rank, ranks,
                        fmt::format("{}: {} stopped answering heartbeats for {:.1f} s while this "
                                    "collective waited; likely cause: their host went down or "
                                    "lost its network, or they were killed (GRADWIRE_HOST_LOST_S "
                                    "sets how long a silence counts as lost)",
                                    report_dead, describe_silent(dead_silent, name),
                                    heartbeats->timeout().count() / 1000.0));
    } else if (!report_dead.empty() && dead_host) {
      const std::string who =
          name == "world" ? fmt::format("rank {}", dead_rank)
                          : fmt::format("rank {} of {} (world rank {})", dead_rank, name,
                                        dead_world_rank);
      job::peer_exited(comm->world_rank, dead_world_rank,
                       fmt::format("{}: {} (pid {} on host {}) lost its connection to the "
                                   "job's store on rank 0 while this collective waited for it; "
                                   "likely cause: {} {} was killed or crashed, or its host or "
                                   "the network to it went down",
                                   report_dead, who, dead_pid, *dead_host,
                                   name == "world" ? "rank" : "world rank", dead_world_rank));
    } else if (!report_dead.empty()) {
      job::peer_exited(comm->world_rank, name == "world" ? dead_rank : -1,
                       fmt::format("{}: rank {}{} (pid {} on this host) has exited while "
                                   "this collective waited for it; likely cause: rank {} was "
                                   "killed (SIGKILL, the OOM killer) or crashed",
                                   report_dead, dead_rank, name == "world" ? "" : " of " + name,
                                   dead_pid, dead_rank));
    }
    if (store && name == "world" && !heartbeats_decided) {
      std::vector<int> pids;
      {
        std::lock_guard<std::mutex> lk(sh->mu);
        pids = comm->members_locked().local_pids;
      }
      if (int(pids.size()) == size) {
        heartbeats_decided = true;
        heartbeats = start_heartbeats(*comm, pids, *store, sh);
        if (sh->stop) return;
      }
    }
    if (heartbeats && store) {
      if (const auto unknown = heartbeats->unknown(); !unknown.empty()) {
        {
          std::lock_guard<std::mutex> lk(sh->mu);
          if (sh->stop) return;
          sh->in_store = true;
        }
        try {
          for (int r : unknown) {
            if (auto v = store->try_get(kHeartbeatKey + std::to_string(r))) {
              if (auto peer = Heartbeats::decode(*v)) heartbeats->set_peer(r, *peer);
            }
          }
        } catch (const Error& e) {
          log().debug("rank {}: heartbeats: cannot read the peers' addresses: {}", rank, e.what());
        }
        {
          std::lock_guard<std::mutex> lk(sh->mu);
          sh->in_store = false;
        }
        sh->cv.notify_all();
      }
    }
    if (ask) {
      std::string answer;
      bool alive = true;
      try {
        answer = gather_reach(*store, name, rank, size, ask_label, ask_seq);
      } catch (const Error& e) {
        log().debug("rank {}: watchdog stops using the store: {}", rank, e.what());
        answer = unknown_reach(kStoreGone);
        alive = false;
        if (e.code() == ErrorCode::PeerLost) store_lost = e.message();
      }
      {
        std::lock_guard<std::mutex> lk(sh->mu);
        sh->in_store = false;
        sh->answer = std::move(answer);
        sh->answered = ask;
        if (!alive) drop_store();
      }
      sh->cv.notify_all();
    }
    if (store && (steady_clock::now() >= next_poll || job::pending())) {
      next_poll = steady_clock::now() + seconds(1);
      {
        std::lock_guard<std::mutex> lk(sh->mu);
        if (sh->stop) return;
        sh->in_store = true;
      }
      bool alive = job::exchange(*store, rank, options, &store_lost);
      // Note [reach report]: at most one write a second, and only a change.
      if (alive && progress >= 0 && progress != published) {
        try {
          store->set(reach::progress_key(name, rank), std::to_string(progress));
          published = progress;
        } catch (const Error& e) {
          log().debug("rank {}: watchdog stops using the store: {}", rank, e.what());
          alive = false;
          if (e.code() == ErrorCode::PeerLost) store_lost = e.message();
        }
      }
      if (alive) alive = straggler_round(*stragglers, *store, rank, store_lost);
      {
        std::lock_guard<std::mutex> lk(sh->mu);
        sh->in_store = false;
        if (!alive) drop_store();
      }
      sh->cv.notify_all();
      stragglers->deliver();
    }
  }
}

}  // namespace gradwire
