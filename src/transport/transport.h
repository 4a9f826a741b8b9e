// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The Transport boundary: non-blocking, tagged point-to-point messages
// between the ranks of one communicator. Modelled on NCCL's net plugin
// contract: posting may be refused for now (handled inside by driving
// progress), progress() drives completions, memory registration is
// explicit and cached inside the transport.
//
// Note [transport contract]: everything here is in gradwire's terms, so
// that a second transport (sockets of our own, UCX, a vendor library) can
// implement it: a finished request says what became of it as a
// RequestStatus, not as a provider's error number, and the collectives
// above decide what that means (a Truncated receive is a Mismatch between
// the ranks, PeerLost names the peer). Implementations live in a folder of
// their own (transport/ofi: libfabric) and are opened by name through
// transport::open; nothing outside that folder includes a provider's
// headers. How to add one: docs/architecture.md, "Where things go".
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/raise.h"

namespace gradwire::transport {

// Why a request Failed (Note [transport contract]).
enum class RequestStatus : uint8_t {
  Ok,         // not failed
  Truncated,  // a receive was sent more bytes than it posted
  Cancelled,  // cancel_all(), or a post that was refused part-way
  PeerLost,   // the connection to the peer broke (reset, refused, unreachable)
  Failed,     // anything else; `error` says what
};

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
  RequestStatus status = RequestStatus::Ok;  // why, when Failed
  int error_code = 0;    // the transport's own number for the failure, for messages only
  std::string error;     // the transport's description when Failed
  // Owned by the Transport implementation (the ofi transport counts the
  // fabric operations of a split message here); callers never read it.
  int64_t transport_private = 0;

  bool done() const { return state == State::Done || state == State::Failed; }
};

struct Properties {
  std::string provider;       // "shm", "tcp;ofi_rxm", "efa"
  std::string fabric;         // the fabric's name, for messages
  size_t max_msg_size = 0;    // larger messages are split by the transport
  size_t inject_size = 0;     // sends up to this size complete at once
  // Buffers must be registered before use (libfabric's FI_MR_LOCAL); the
  // transport registers and caches them itself (invalidate()).
  bool registration_required = false;
  // Receives can name their source (FI_DIRECTED_RECV). When false, a tag
  // alone decides which send a receive matches, so callers must encode the
  // source rank in the tag (Note [tags carry the source rank]).
  bool directed_recv = false;
  // Sends to one peer with one tag are matched in order (FI_ORDER_SAS);
  // required to split messages larger than max_msg_size.
  bool ordered_sends = false;
  uint64_t tag_mask = ~uint64_t{0};  // tag bits the provider can match on
  // Note [connections that stall]: an unexpected message longer than
  // inject_size holds back everything behind it from the same peer until a
  // receive for it is posted (the native `net` provider over TCP). Tags
  // with kSideLaneBit then travel on a connection of their own, and a
  // protocol whose receiver may post late must announce long messages and
  // send them only once the receiver is ready.
  bool stalls_on_unexpected = false;
};

// Note [connections that stall]: libfabric's `net` provider runs RDM over
// one TCP stream per pair of endpoints. It keeps an unexpected tagged
// message aside only when it is short (its inject size, 128 bytes) and
// fewer than FI_NET_MAX_SAVED (default 4; gradwire raises it, see
// library.cpp) are kept; any other unexpected message stops the stream
// until a matching receive is posted. Collectives tolerate that: each
// pair posts its receives in the order the peer sends. Point-to-point
// messages do not (a receiver may post tag B before tag A, and a rank
// blocked in a send may need a control message stuck behind a collective's
// segment), so on such providers the transport opens a second endpoint,
// and every message whose tag has kSideLaneBit travels there: the two
// lanes never hold each other back. Point-to-point sets the bit on all its
// messages (kP2pBit in collectives/context.h) and sends a long payload
// only after the receiver's clear-to-send (Note [point-to-point]).
inline constexpr uint64_t kSideLaneBit = uint64_t{1} << 62;

// Note [tags carry the source rank]: not every provider offers directed
// receives (tcp;ofi_rxm here does not), so a receive's tag alone must
// identify the sender. The collectives build tags as
// seq:24 | src rank:20 | slot:20, which makes the source part of the match
// on every provider; transports use the peer as an extra filter only where
// the fabric supports it.

// Note [registration handles]: providers with FI_MR_LOCAL (EFA) need every
// buffer registered, which pins pages and costs a system call. The transport
// registers what it is given and caches the registrations (invalidate()),
// which suits buffers it sees again and again but costs a lookup per message
// and may evict. A caller that owns a long-lived buffer (a Bucket, a shared
// window, a user buffer reused every step) can instead register it once:
// register_memory() returns a handle, and isend/irecv of any range inside it
// use the handle's registration without the cache. The handle deregisters
// when destroyed, so it must outlive every operation that uses it (and the
// buffer must outlive it). A transport that needs no registration returns
// nullptr, and isend/irecv accept nullptr everywhere. A handle must not
// outlive the transport that made it.
class Registration {
 public:
  Registration(const void* base, size_t length) : base_(base), length_(length) {}
  virtual ~Registration() = default;
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;
  const void* base() const { return base_; }
  size_t length() const { return length_; }
  // True if [buf, buf + length) lies inside the registered range.
  bool covers(const void* buf, size_t length) const {
    const auto b = reinterpret_cast<uintptr_t>(buf), mine = reinterpret_cast<uintptr_t>(base_);
    return b >= mine && length <= length_ && b - mine <= length_ - length;
  }

 private:
  const void* base_;
  size_t length_;
};
using RegistrationPtr = std::unique_ptr<Registration>;

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
  // `reg` (Note [registration handles]), if given, must cover the buffer
  // (else InvalidArgument) and come from this transport.
  virtual void isend(Request& req, int peer, const void* buf, size_t length, uint64_t tag,
                     Deadline deadline, const Registration* reg = nullptr) = 0;
  virtual void irecv(Request& req, int peer, void* buf, size_t length, uint64_t tag,
                     Deadline deadline, const Registration* reg = nullptr) = 0;
  // A receive from any peer: matches a message whose tag equals `tag` in
  // every bit not set in `ignore` (libfabric's fi_trecv ignore mask). The
  // request's `peer` stays -1: the caller learns the sender from the
  // message itself (the tag does not say which bits matched). At most one
  // message piece (max_msg_size). InvalidArgument where unsupported.
  virtual void irecv_any(Request& req, void* buf, size_t length, uint64_t tag, uint64_t ignore,
                         Deadline deadline) {
    (void)req, (void)buf, (void)length, (void)tag, (void)ignore, (void)deadline;
    raise(ErrorCode::InvalidArgument, "this transport has no receive from any peer");
  }
  // Registers [buf, buf + length) once for many operations (Note
  // [registration handles]); nullptr where this transport registers nothing
  // (Properties::registration_required false and no Config::always_register)
  // or for length 0. Throws Transport if the provider refuses.
  virtual RegistrationPtr register_memory(const void* buf, size_t length) { return nullptr; }
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
  // Called from another thread when the thread that owns this transport is
  // stuck in a provider call and is being leaked with it (Note [a published
  // failure ends a stuck wait] in runtime/watchdog.h): releases what would
  // outlive the process, such as a shared-memory region's name, without
  // touching the fabric.
  virtual void abandon() {}
};

// What opening a transport needs; every field is the transport's to
// interpret (the ofi transport: a libfabric provider and domain).
struct Config {
  std::string provider;        // "" is not allowed here: resolved by the caller
  std::string iface;           // tcp: interface/domain name, e.g. "lo"; "" = any
  bool always_register = false;
  int rank = 0;                // for messages only
  size_t mr_cache_entries = 64;  // registrations kept before LRU eviction
  // Longest wait for the provider to confirm cancellations in cancel_all().
  int cancel_timeout_ms = 2000;
  // Test hook: split messages larger than this even if the provider takes
  // more (0 = use the provider's max_msg_size).
  size_t max_msg_size_override = 0;
  // Called between retries of a post the provider refused for now, after
  // this transport's own progress(). A refusal can need the peer to make
  // progress (shm and tcp;ofi_rxm set up a connection on first send), so a
  // thread that drives several transports, e.g. a test holding both ranks,
  // passes a function that progresses the others.
  std::function<void()> while_refused;
};

// The transports this build has, by name ("ofi").
std::vector<std::string> transport_kinds();
// Opens transport `kind` with `config`. InvalidArgument for an unknown kind
// (naming the known ones) or a provider the transport does not have here;
// Transport when opening fails.
std::unique_ptr<Transport> open(const std::string& kind, const Config& config);
// The providers transport `kind` can open on this machine.
std::vector<std::string> available_providers(const std::string& kind);

}  // namespace gradwire::transport
