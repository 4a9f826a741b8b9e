// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [reach report]: a collective that fails with Timeout or PeerLost says
// which ranks had reached it (issue 8), e.g.
//   "allreduce #22: reached by ranks 0, 2; not reached by rank 1 (last seen starting #21)"
// so that the error alone names the rank to look at, without collecting
// every rank's flight-recorder dump first.
//  * Progress: the engine stores the sequence number of each collective it
//    starts in an atomic of its communicator (one relaxed store per
//    collective). The communicator's watchdog publishes it, only when it
//    changed, in its once-a-second store round as "gradwire/progress/<name>/
//    <rank>": at most one store write per rank per second, whatever the
//    collective rate. A published value is thus at most ~1 s old; a rank
//    frozen or killed within that second of starting its last collective
//    shows an earlier one (or none: "progress unknown"), hence "last seen
//    starting".
//  * Report: on Timeout or PeerLost the engine thread asks the watchdog
//    thread (Note [watchdog]: only it touches the store, so a hung rank 0
//    cannot stall the engine) to read the other ranks' keys, and waits at
//    most kReachWait. The watchdog gives up reading at kReachGather and
//    counts the ranks it did not read as unknown. On no answer in time the
//    error says "(which ranks reached it is unknown: <why>)". The wait
//    delays the failing Work by at most kReachWait, well inside
//    engine_slack() (5 s at least), so it never looks like a stuck engine.
//  * The report is appended to the error before the communicator fails, so
//    the reason published in "gradwire/failure" carries it and the ranks
//    interrupted by it repeat it. A collective failed by another rank's
//    report (job::failed_flag() set) is not reported again.
//  * Without a store (mpirun, sub-communicators) nothing is published and
//    nothing is appended: no rank can see another's progress, and the
//    flight-recorder dumps (tools/gradwire-fr) remain the way to find out.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gradwire::reach {

constexpr std::chrono::milliseconds kReachWait{2000};
constexpr std::chrono::milliseconds kReachGather{1500};

// "gradwire/progress/<communicator name>/<rank>"
std::string progress_key(std::string_view comm, int rank);
// The published value: the decimal sequence number; nullopt if malformed.
std::optional<int64_t> parse_progress(std::string_view value);

// "0", "0, 2", "0-3, 7" (runs of three or more ranks as a range).
std::string rank_list(const std::vector<int>& ranks);

// The sentence for collective `label` ("allreduce #22") with sequence
// number `seq`, from each rank's last started sequence number (index =
// rank; nullopt = unknown, explained by `unknown_why`). A rank that started
// `seq` or a later collective has reached it. Pure.
std::string sentence(std::string_view label, int64_t seq,
                     const std::vector<std::optional<int64_t>>& last_started,
                     std::string_view unknown_why = "no progress published");

}  // namespace gradwire::reach
