// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include "gradwire/export.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gradwire {

// Explicit options first; GRADWIRE_* environment variables override them
// (see Options::with_env_overrides and the README's table). Every field is
// validated when a Communicator is created. Grouped by concern: how ranks
// reach each other (transport), which paths and algorithms collectives take
// (collectives), collectives on CUDA buffers (device), and what gradwire
// says when something goes wrong (diagnostics).
struct GRADWIRE_API Options {
  // Deadline of every collective and bootstrap step (GRADWIRE_TIMEOUT_S).
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};

  struct Transport {
    // libfabric provider: "" = automatic (shm on one host, net or
    // tcp;ofi_rxm across hosts), or a name fi_info lists, e.g. "efa",
    // "shm", "tcp;ofi_rxm" (GRADWIRE_OFI_PROVIDER).
    std::string provider;
    // Network interface for socket providers: "" = loopback when every rank
    // is on one host, else the provider's first choice (GRADWIRE_OFI_IFACE).
    std::string iface;
    // Auto registers buffers with the provider when its mr_mode requires it;
    // Always registers every buffer, which exercises the path EFA needs on
    // providers that do not (GRADWIRE_OFI_REGISTER=auto|always).
    enum class Registration : uint8_t { Auto, Always };
    Registration registration = Registration::Auto;
    // Which host this rank runs on, for the provider's choice and the
    // hierarchy: "" = gethostname(); set it where containers share a host
    // name, or to emulate hosts in tests (GRADWIRE_HOST_ID).
    std::string host_id;
  } transport;

  struct Collectives {
    // Messages up to this many bytes use the latency-optimal algorithms
    // (GRADWIRE_SMALL_MSG_BYTES).
    size_t small_message_bytes = 64 * 1024;
    // Ring pipelining granularity (GRADWIRE_SEGMENT_BYTES).
    size_t segment_bytes = 1 << 20;
    // When the ranks span several hosts with the same number of ranks on
    // each, large allreduces run hierarchically: reduce-scatter inside each
    // host (shm), allreduce between hosts (one stream per local rank), then
    // allgather inside each host (GRADWIRE_HIERARCHICAL=auto|off).
    bool hierarchical = true;
    // Collectives of a communicator whose ranks share one host run through
    // pre-mapped shared memory: small ones (up to 64 KiB per rank) on the
    // caller's thread when nothing is queued, larger ones through staging
    // areas (GRADWIRE_SHM_COLLECTIVES=auto|off).
    bool shm_collectives = true;
    // Long point-to-point messages between ranks of one host are read by the
    // receiver straight from the sender's memory (process_vm_readv) where
    // the kernel allows it (GRADWIRE_P2P_SINGLE_COPY=auto|off).
    bool p2p_single_copy = true;
    // How long a rank that waits for a peer keeps its core, busy-polling,
    // before it gives the core away: sleeps on the peer's doorbell, hands a
    // collective it runs on the caller's thread to the engine thread, or
    // yields where nothing can wake it (Note [the spin budget] in
    // collectives/context.cpp says which waits it governs and why).
    // Unset = auto, the default: tens of microseconds when this host runs
    // no more of the job's ranks than it has cores and the process is not
    // being preempted by other work, a few hundred polls otherwise. 0 = never spin: give the core away at once (a busy
    // machine, at the cost of a wake-up's latency, tens of microseconds,
    // per wait). At most kMaxSpinBudget. Each communicator uses its own;
    // ranks may differ (GRADWIRE_SPIN_US=auto or microseconds).
    std::optional<std::chrono::microseconds> spin_budget;
    static constexpr std::chrono::microseconds kMaxSpinBudget{1000000};
  } collectives;

  struct Device {
    // How collectives on CUDA buffers run (GRADWIRE_DEVICE_PATH):
    //  Auto    NCCL when this gradwire was built with its headers, else staged;
    //  Nccl    NCCL (one GPU per rank);
    //  Staged  gradwire's own algorithms over libfabric on pinned host
    //          copies of the device buffers (Note [staged device
    //          collectives] in src/device/staged/backend.cpp): for providers
    //          and machines without NCCL, and ranks that share a GPU.
    // Every rank must choose the same path.
    enum class Path : uint8_t { Auto, Nccl, Staged };
    Path path = Path::Auto;
  } device;

  // Never hang silently (README "Reading a timeout report").
  struct Diagnostics {
    // spdlog level: trace, debug, info, warn, error, critical, off
    // (GRADWIRE_LOG_LEVEL).
    std::string log_level = "warn";
    // Collectives the flight recorder keeps per process, newest last; 0
    // turns recording and dumps off (GRADWIRE_FR_SIZE).
    size_t flight_recorder_size = 2048;
    // Where each rank writes gradwire-fr-rank<R>.json on a timeout or error:
    // "" = /tmp/gradwire-fr (GRADWIRE_FR_DIR).
    std::string flight_recorder_dir;
    // Before every collective, ranks exchange a fingerprint (op, dtype,
    // count, root, sequence number) and fail with Mismatch if they differ:
    // one small exchange per collective (GRADWIRE_DEBUG=DETAIL; OFF is the
    // default).
    bool debug_detail = false;
    // On a collective's failure: false raises in the caller (the
    // communicator is aborted); true dumps, logs and aborts the process,
    // like TORCH_NCCL_ASYNC_ERROR_HANDLING=1
    // (GRADWIRE_ASYNC_ERROR_HANDLING=raise|abort).
    bool abort_process_on_error = false;
    // Timeline: a Chrome-trace file per rank and a run manifest in this
    // directory ("" = off; GRADWIRE_TRACE_DIR). For diagnosis runs: each
    // event is appended under a lock.
    std::string trace_dir;
    // Stragglers (README "Reading a straggler report"): a rank that kept
    // the other ranks waiting for at least `straggler_threshold` of the last
    // `straggler_window` of training (and in at least three of its one-second
    // rounds) is named in a log line, the timeline and the
    // Communicator::on_straggler callback. Measured from the flight
    // recorder's times without synchronised clocks; costs the watchdog's
    // store round one get and at most one set a second per rank (rank 0:
    // one get per rank). A window of 0 turns it off
    // (GRADWIRE_STRAGGLER_WINDOW_S, 0 or at least 3 s;
    // GRADWIRE_STRAGGLER_THRESHOLD, a fraction in (0, 1]).
    std::chrono::milliseconds straggler_window{std::chrono::seconds(10)};
    double straggler_threshold = 0.25;
  } diagnostics;

  // Returns *this with GRADWIRE_* overrides applied. Throws InvalidArgument
  // naming the variable for a malformed value or an unknown GRADWIRE_ name.
  Options with_env_overrides() const;
  // Throws InvalidArgument naming the field if a value can never work.
  void validate() const;
};

// "auto", "nccl", "staged" (GRADWIRE_DEVICE_PATH's words).
GRADWIRE_API std::string_view to_string(Options::Device::Path path);
// "auto", "always" (GRADWIRE_OFI_REGISTER's words).
GRADWIRE_API std::string_view to_string(Options::Transport::Registration registration);

}  // namespace gradwire
