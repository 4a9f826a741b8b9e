// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The Transport boundary: non-blocking, tagged point-to-point messages
// between the ranks of one communicator. Modelled on NCCL's net plugin
// contract: posting may be refused for now (handled inside by driving
// progress), progress() drives completions, memory registration is
// explicit and cached inside the transport.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/deadline.h"

namespace gradwire::transport {

// One posted send or receive. Owned by the caller; must stay at the same
// address until done() (the transport keeps a pointer to it).
struct Request {
  enum class State : uint8_t { Idle, Pending, Done, Failed };
  State state = State::Idle;
  bool is_send = false;
  int peer = -1;
  uint64_t tag = 0;
  size_t length = 0;     // bytes posted
  size_t received = 0;   // bytes actually received (receives)
  int pieces_left = 0;   // transport-internal: outstanding fabric operations
  int fi_errno = 0;      // positive libfabric error number when Failed
  std::string error;     // provider's description when Failed

  bool done() const { return state == State::Done || state == State::Failed; }
};

struct Properties {
  std::string provider;       // "shm", "tcp;ofi_rxm", "efa"
  std::string fabric;         // fabric name reported by fi_getinfo
  size_t max_msg_size = 0;    // larger messages are split by the transport
  size_t inject_size = 0;     // sends up to this size complete at once
  bool registration_required = false;  // mr_mode has FI_MR_LOCAL
  uint64_t mr_mode = 0;
  // Receives can name their source (FI_DIRECTED_RECV). When false, a tag
  // alone decides which send a receive matches, so callers must encode the
  // source rank in the tag (Note [tags carry the source rank]).
  bool directed_recv = false;
  // Sends to one peer with one tag are matched in order (FI_ORDER_SAS);
  // required to split messages larger than max_msg_size.
  bool ordered_sends = false;
  uint64_t tag_mask = ~uint64_t{0};  // tag bits the provider can match on
};

// Note [tags carry the source rank]: not every provider offers directed
// receives (tcp;ofi_rxm here does not), so a receive's tag alone must
// identify the sender. The collectives build tags as
// seq:24 | src rank:20 | slot:20, which makes the source part of the match
// on every provider; transports use the peer as an extra filter only where
// the fabric supports it.

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const Properties& properties() const = 0;
  // This endpoint's name, to exchange through the bootstrap.
  virtual std::string address() const = 0;
  // Installs every rank's address (indexed by rank; own included).
  virtual void connect(const std::vector<std::string>& addresses) = 0;
  // Post a send/receive of `length` bytes (0 allowed) to/from `peer` with
  // `tag`. If the provider refuses for now, drives progress and retries
  // until `deadline` (then throws Timeout). Fabric errors: throws Transport.
  virtual void isend(Request& req, int peer, const void* buf, size_t length, uint64_t tag,
                     Deadline deadline) = 0;
  virtual void irecv(Request& req, int peer, void* buf, size_t length, uint64_t tag,
                     Deadline deadline) = 0;
  // Reads the completion queue once; marks finished requests Done/Failed.
  // Returns the number of completions seen.
  virtual int progress() = 0;
  // Cancels every posted operation and waits (bounded) until the provider
  // confirms, so no buffer is touched afterwards. Used on errors/abort.
  // Every pending request ends Failed (FI_ECANCELED unless it already had an
  // error). A receive the provider does not confirm within the bound is
  // logged; only destroying the transport (closing the endpoint) then
  // guarantees its buffer is no longer written.
  virtual void cancel_all() = 0;
  // Forgets cached memory registrations overlapping [buf, buf+length). Call
  // before freeing memory that was passed to isend/irecv (Note [registration
  // cache invalidation] in transport/ofi/memory.h). No-op where nothing is
  // cached.
  virtual void invalidate(const void* buf, size_t length) {}
};

}  // namespace gradwire::transport
