// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The pure half of elastic membership (Note [elastic generations] in
// group.cpp): what a process writes into its slot of a generation, when a
// generation may close, and, from the closed generation's slots alone, who
// gets which rank and which committed state every member continues from.
// Every member computes the same plan from the same slots, so no further
// agreement is needed.
#pragma once

#include <chrono>
#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gradwire::elastic {

// What a process writes into the slot it claims in a generation.
struct Candidate {
  std::string id;                 // host/pid/nonce: unique per process
  int64_t last_generation = -1;   // the generation it last belonged to; -1: none yet
  int hint = INT_MAX;             // its rank there, or the launcher's RANK before that
  std::vector<uint64_t> commits;  // steps of the committed states it holds, newest first
};
std::string encode(const Candidate& c);
// nullopt for anything encode() did not write.
std::optional<Candidate> decode(std::string_view text);

struct Plan {
  // order[r]: the slot whose process becomes rank r. Continuing members
  // (those of the newest previous generation among the slots) first, in
  // their old rank order, then everyone else by (hint, slot).
  std::vector<int> order;
  int continuing = 0;     // ranks [0, continuing) are continuing members
  bool restored = false;  // every continuing member holds the commit `step`
  uint64_t step = 0;      // the newest commit they all hold
  int root = -1;          // the rank that broadcasts it (restored only)
  // Per rank: holds its own commit of `step` (keeps its local state).
  std::vector<bool> keeps_local;
  // Continuing members' commits are their newest and the one before: two
  // survivors' newest differ by at most one commit (a rank cannot finish
  // a step's collectives before every rank has started that step), so the
  // older of the two newest is always held by everyone.
};
// `slots`: the closed generation's slots 0..N-1, N >= 1.
Plan plan_generation(const std::vector<Candidate>& slots);

// Whether a participant may close a generation now with `count` slots
// filled. `expect` > 0: as soon as that many arrived (the first
// generation's size; the members plus the joiners they saw; after a
// failure, the failed generation's size, in case nobody was lost).
// Besides, a continuing participant (it holds state from the newest
// generation among the slots) may close once `count` >= min_size and no
// slot was claimed for `quiet` >= `settle` (a lost member never arrives),
// but only if the participants from its own previous generation (`peers`,
// itself included) are a majority of that generation (`previous_size`).
// Two disjoint majorities cannot exist, so a member that hung (SIGSTOP)
// and comes back after the others moved on can never close a generation
// of its own and train apart: it waits, and joins them as a newcomer.
// Joiners (expect 0, not continuing) never close, so a generation always
// has a member that can hand on the state, unless it is the first.
// `suspected`: `expect` leaves out ranks only suspected lost (silent
// heartbeats, Note [heartbeats between hosts]), not seen to exit: a
// silent host may be alive behind a broken link, so closing at `expect`
// then also needs the majority, as closing after `settle` does.
// With a store that has leases (etcd, Note [etcd leases]), `alive_arrived`
// says that every member of the failed generation that still holds its
// lease has arrived: everyone the cluster counts as alive is here, so a
// continuing participant may close without the majority (etcd's quorum is
// the arbiter: a member cut off from the others but not from etcd keeps
// its lease and is waited for).
// `max_size` > 0 (ElasticOptions::max_size): a generation closes at once
// at that many, and never takes more (closed_size()).
// `first`: the job's first generation without an expected size (an
// elastic job over etcd, launched with a range of sizes): any participant
// may close it once `min_size` arrived and none more came for `settle`.
struct CloseQuery {
  int count = 0;
  int expect = 0;
  int min_size = 1;
  int max_size = 0;
  bool first = false;
  bool continuing = false;
  bool alive_arrived = false;
  bool suspected = false;
  int peers = 0;
  int previous_size = 0;
  std::chrono::milliseconds quiet{0};
  std::chrono::milliseconds settle{0};
};
bool may_close(const CloseQuery& q);
// The size a generation closes at: `count`, at most max_size.
int closed_size(const CloseQuery& q);

}  // namespace gradwire::elastic
