// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The process-wide state of the job (Note [watchdog] in runtime/watchdog.h):
// this process's first failure and the failure another rank reported, the
// stall inspector's status lines, the ranks seen to exit. It is the
// runtime's face to the layers above it: the Reducer's stall inspector
// reports a stall and reads the other ranks' statuses through it, elastic
// recovery resets it between generations. tools/check_layers.py lets those
// layers include this header and no other file of src/runtime/ (Note
// [the runtime's face]); everything else they need of a communicator is
// public API (gradwire/communicator.h).
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gradwire/error.h"
#include "gradwire/options.h"

namespace gradwire {

namespace bootstrap {
class Store;
}

namespace job {
// A world communicator with a store begins (its watchdog starts): forgets
// the previous world's unpublished failure, statuses and lost rank.
void begin_world(int world_size);
// This process's first failure, reported to the other ranks by the
// watchdog of the world communicator (if it has a store). Any thread.
void report_failure(int world_rank, const std::string& reason, ErrorCode code);
// Set once another rank's failure was seen; collectives check it (Note
// [interrupting a collective]). The reason never changes once set.
const std::atomic<bool>& failed_flag();
const std::string& failure_reason();
// The code of the reported failure (an ErrorCode as int): interrupted
// collectives raise it, so a Timeout on one rank is a Timeout on every rank.
const std::atomic<int>& failure_code();
// The three above at once: a collective's start asks for all of them (five
// calls, ~55 of an 8-byte broadcast's ~1500 instructions, issue 18).
struct Interrupt {
  const std::atomic<bool>& failed;
  const std::string& reason;
  const std::atomic<int>& code;
};
const Interrupt& interrupt();
// Fails this process's collectives now (they end with Aborted naming
// `reason`) and reports it to the other ranks: the stall inspector's
// shutdown. Any thread.
void fail_locally(int world_rank, const std::string& reason, ErrorCode code);
// Status lines for the stall inspector (Note [stall inspector] in
// reducer/stall.h): this rank's own, published as "gradwire/status/<rank>"
// while non-empty, and the other ranks' as last read (empty: none).
// Exchanged by the world communicator's watchdog once a second, only
// while this rank's own status is non-empty.
void set_status(const std::string& status);
std::vector<std::string> statuses();
// A failure of this process waits to be published.
bool pending();
// Note [a dead peer on this host]: fails this process's collectives with
// PeerLost and `reason` (which names the rank) and reports it to the job.
// `exited_rank` (a world rank; -1 if not known as one) is remembered for
// exited_ranks() until reset_for_new_world().
void peer_exited(int my_world_rank, int exited_rank, const std::string& reason);
// Several world ranks at once, only suspected lost (Note [heartbeats
// between hosts]: every rank of a host that went silent, which may be alive
// behind a broken link); suspected_ranks() until reset_for_new_world().
void peers_suspected(int my_world_rank, const std::vector<int>& ranks, const std::string& reason);
std::vector<int> exited_ranks();
std::vector<int> suspected_ranks();
// Forgets this process's failure and any other rank's seen so far, so
// that a new world can run collectives (Note [elastic generations] in
// src/elastic/group.cpp). Call only once every communicator of the failed
// world is destroyed. The reason string stays (a leaked engine may still
// read it) until the next failure replaces it.
void reset_for_new_world();
// One round with the store: publish this process's failure (once), or look
// for another rank's. False once the store is gone (rank 0 exited); then
// `lost`, if given, gets the store's words when it closed on us (PeerLost,
// not a store that stopped answering).
bool exchange(bootstrap::Store& store, int my_rank, const Options& options,
              std::string* lost = nullptr);
// Note [the store host is gone]: fails this process's collectives with
// PeerLost naming rank 0, as a report from another rank would.
void store_host_lost(int my_rank, const std::string& why, const Options& options);

// A failure report as another rank wrote it to "gradwire/failure":
// "<rank>\x1f<code>\x1f<reason>". Pure; nullopt for anything else (a key
// some other software wrote, a truncated value). The reason is cut to
// kMaxFailureReasonBytes: it is logged and carried in every later error.
struct FailureReport {
  int rank = -1;
  ErrorCode code = ErrorCode::Aborted;  // Aborted for a code this build does not know
  std::string reason;
};
constexpr size_t kMaxFailureReasonBytes = 16 * 1024;
std::optional<FailureReport> parse_failure_report(std::string_view value);

// Note [a lost rank on another host]: the will every world rank leaves in
// the store ("gradwire/lost"), "<rank>\x1f<pid>\x1f<host>", and its parser
// (pure; nullopt for anything else). lost_rank(): the rank the store wrote
// it for, once an exchange() read it (never this process's own).
constexpr const char* kLostKey = "gradwire/lost";
struct LostRank {
  int rank = -1;
  int pid = 0;
  std::string host;
};
std::string encode_lost_rank(const LostRank& lost);
std::optional<LostRank> parse_lost_rank(std::string_view value);
std::optional<LostRank> lost_rank();
}  // namespace job

}  // namespace gradwire
