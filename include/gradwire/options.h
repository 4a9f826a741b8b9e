// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include "gradwire/export.h"

#include <chrono>
#include <cstddef>
#include <string>

namespace gradwire {

// Explicit options first; GRADWIRE_* environment variables override them
// (see Options::from_env and docs in README.md). Every field is validated
// when a Communicator is created.
struct GRADWIRE_API Options {
  // Deadline of every collective and bootstrap step (GRADWIRE_TIMEOUT_S).
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  // libfabric provider: "" = automatic (shm on one host, tcp;ofi_rxm
  // otherwise), or a name fi_info lists, e.g. "efa", "shm", "tcp;ofi_rxm"
  // (GRADWIRE_OFI_PROVIDER).
  std::string provider;
  // Network interface for tcp providers: "" = loopback when every rank is on
  // one host, else the provider's first choice (GRADWIRE_OFI_IFACE).
  std::string iface;
  // Messages up to this many bytes use the latency-optimal algorithms
  // (GRADWIRE_SMALL_MSG_BYTES).
  size_t small_message_bytes = 64 * 1024;
  // Ring pipelining granularity (GRADWIRE_SEGMENT_BYTES).
  size_t segment_bytes = 1 << 20;
  // Register every buffer with the provider even when its mr_mode does not
  // require it (GRADWIRE_OFI_REGISTER=always|auto). "always" exercises the
  // registration path that EFA needs on providers that do not.
  bool always_register = false;
  // When the ranks span several hosts with the same number of ranks on
  // each, large allreduces run hierarchically: reduce-scatter inside each
  // host (shm), allreduce between hosts (one stream per local rank), then
  // allgather inside each host (GRADWIRE_HIERARCHICAL=auto|off). A host is
  // what gethostname() says, or GRADWIRE_HOST_ID where set (containers that
  // share a hostname, emulated hosts in tests).
  bool hierarchical = true;
  // Small collectives (up to 64 KiB per rank) of a communicator whose ranks
  // share one host run through pre-mapped shared memory, on the caller's
  // thread when nothing is queued (GRADWIRE_SHM_COLLECTIVES=auto|off).
  bool shm_collectives = true;
  // Long point-to-point messages between ranks of one host are read by the
  // receiver straight from the sender's memory (process_vm_readv) where the
  // kernel allows it (GRADWIRE_P2P_SINGLE_COPY=auto|off).
  bool p2p_single_copy = true;
  std::string host_id;  // "" = gethostname() (GRADWIRE_HOST_ID)
  // How collectives on CUDA buffers run (GRADWIRE_DEVICE_PATH):
  //  "auto"   NCCL when this gradwire was built with its headers, else staged;
  //  "nccl"   NCCL (one GPU per rank);
  //  "staged" gradwire's own algorithms over libfabric on pinned host copies
  //           of the device buffers (Note [staged device collectives] in
  //           src/device/staged/backend.cpp): for providers and
  //           machines without NCCL, and ranks that share a GPU.
  // Every rank must choose the same path.
  std::string device_path = "auto";
  // spdlog level: trace, debug, info, warn, error, off (GRADWIRE_LOG_LEVEL).
  std::string log_level = "warn";

  // Never hang silently (README "Reading a timeout report").
  // Collectives the flight recorder keeps per process, newest last; 0 turns
  // recording and dumps off (GRADWIRE_FR_SIZE).
  size_t flight_recorder_size = 2048;
  // Where each rank writes gradwire-fr-rank<R>.json on a timeout or error:
  // "" = /tmp/gradwire-fr (GRADWIRE_FR_DIR).
  std::string flight_recorder_dir;
  // Before every collective, ranks exchange a fingerprint (op, dtype, count,
  // root, sequence number) and fail with Mismatch if they differ: one small
  // exchange per collective (GRADWIRE_DEBUG=DETAIL; OFF is the default).
  bool debug_detail = false;
  // On a collective's failure: false raises in the caller (the
  // communicator is aborted); true dumps, logs and aborts the process, like
  // TORCH_NCCL_ASYNC_ERROR_HANDLING=1 (GRADWIRE_ASYNC_ERROR_HANDLING=raise|abort).
  bool abort_process_on_error = false;
  // Timeline: a Chrome-trace file per rank and a run manifest in this
  // directory ("" = off; GRADWIRE_TRACE_DIR). For diagnosis runs: each
  // event is appended under a lock.
  std::string trace_dir;

  // Returns *this with GRADWIRE_* overrides applied. Throws InvalidArgument
  // naming the variable for a malformed value or an unknown GRADWIRE_ name.
  Options with_env_overrides() const;
  // Throws InvalidArgument naming the field if a value can never work.
  void validate() const;
};

}  // namespace gradwire
