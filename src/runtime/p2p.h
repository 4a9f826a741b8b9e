// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [point-to-point]: Communicator::send and recv, the messages of
// pipeline parallelism and of torch.distributed's send/recv/isend/irecv/
// batch_isend_irecv.
//
// - Order. A send or receive keeps its place among this rank's calls (as
//   NCCL's do on a stream): it is queued on the engine like a collective,
//   or posted on the caller's thread when nothing is queued or running
//   (Note [point-to-point on one host]). Posting does not wait for the
//   peer: the operation completes later, when its message has gone or
//   arrived. So a rank can post a send and a receive back to back (a ring
//   exchange of large messages) without the first blocking the second, and
//   a collective queued after a posted receive runs while the receive
//   waits for its sender.
// - Matching. Messages from one sender with one tag arrive in the order
//   they were sent, and a receive takes the first message of its (source,
//   tag) pair (or of its tag, from any source).
// - Messages. A message is a header (its length, the sender, and the data
//   itself up to an eager limit) and, for longer messages, a payload that
//   the transport carries. The receiver posts the payload's receive only
//   once the header said the length it expects: a message of another
//   length is a Mismatch naming both, and never a truncated receive
//   (libfabric 1.17's shm provider never completes a truncated large
//   receive: its engine thread hung until the deadline). Payload receives
//   are posted in the order of their headers, so each takes its own
//   message (the transport orders sends with one tag: FI_ORDER_SAS).
//   Headers travel two ways:
//   - Across hosts (and with GRADWIRE_SHM_COLLECTIVES=off) through the
//     transport, which matches them: its tag is kP2pBit | payload:1 |
//     tag:32 | source rank:20 (Note [tags] in collectives/context.h), so
//     messages never match a collective's. Data of up to kInlineBytes
//     rides in the header.
//   - Between ranks of one host, through mailboxes in shared memory (Note
//     [point-to-point on one host]), with data of up to shared::kEagerBytes.
// - Failure, as for collectives (Note [a failed collective aborts its
//   communicator]): a receive whose message has a different size (the
//   ranks disagree: Mismatch), a broken connection (PeerLost), an operation
//   still outstanding at its deadline (Timeout, naming the peer and tag),
//   or another rank's reported failure fails the communicator: every
//   outstanding transfer is cancelled, so no buffer is written afterwards,
//   and every pending send and receive ends with the error. A communicator
//   destroyed with messages outstanding cancels them (Aborted): like
//   MPI_Finalize, destroying it does not wait for peers that never post.
//
// Note [point-to-point on one host]: on a communicator whose ranks map each
// other's control segments (the small collectives' condition), each
// ordered pair of ranks has a mailbox (Note [mailboxes] in
// memory/mailbox.h) that carries the headers, and the data of messages up
// to kEagerBytes, in send order. The receiver matches them itself, MPI's
// way: a header that arrives before its receive is kept (data included) in
// `arrived_` until a receive takes it, and a receive posted first waits in
// `posted_`. No provider call is involved for eager messages, so:
// - a send or receive of up to kEagerBytes is posted on the caller's
//   thread when the engine is idle (as small collectives run: Note [inline
//   small collectives] in runtime/engine.h); a send whose record fits is
//   complete when posted (its buffer is free again), as an eager MPI send;
// - the thread that waits for a receive drains the mailboxes itself (Note
//   [waiters drive progress] in base/work_state.h), so a message is
//   received within a poll of its arrival, not at the engine's next poll
//   after a futex wake-up; the engine polls every millisecond meanwhile,
//   for deadlines and for Works nobody waits on (Note [lingering poller]
//   in engine.cpp);
// - longer messages send a header alone and their payload through the
//   transport, on the engine thread, which posts the payload receives in
//   the order the headers were matched (a waiter that matched one wakes
//   it);
// - everything here is under one lock (Mail::mu), which a waiter only ever
//   try-locks; WorkStates are finished after it is released (a callback
//   may post the next message);
// - a failure noticed by a waiter (a size mismatch) fails its operation at
//   once and is handed to the engine thread, which fails the communicator
//   (cancelling transfers is a provider call).
// A receiver that never polls holds its senders back once their rings are
// full (256 KiB each); their sends then complete when it reads, or fail at
// their deadline.
#pragma once

#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/work_state.h"
#include "gradwire/error.h"
#include "gradwire/types.h"
#include "gradwire/work.h"
#include "memory/mailbox.h"
#include "runtime/engine.h"
#include "transport/transport.h"

namespace gradwire {

class CommunicatorImpl;

class PointToPoint {
 public:
  explicit PointToPoint(CommunicatorImpl& comm);
  ~PointToPoint();
  PointToPoint(const PointToPoint&) = delete;
  PointToPoint& operator=(const PointToPoint&) = delete;

  // Caller's thread: validates (InvalidArgument at once) and posts or queues.
  Work send(const void* buf, size_t count, DataType dtype, int peer, uint32_t tag);
  // peer kAnySource: from whichever rank's message with `tag` comes first;
  // `*source` (if given) is set to the sender before the Work completes.
  Work recv(void* buf, size_t count, DataType dtype, int peer, uint32_t tag,
            int* source = nullptr);
  static constexpr int kAnySource = -1;

  // Engine thread (Engine::set_poller): advances and finishes what it can;
  // says what is still outstanding.
  Engine::Poll poll();
  // Engine thread, as it exits: cancels and fails what is outstanding.
  void drop();

 private:
  // A header on the transport: the length (8 bytes), the sender's rank (4),
  // 4 unused, then up to kInlineBytes of data (Note [point-to-point]).
  static constexpr size_t kHeaderBytes = 16, kInlineBytes = 48;
  struct Op {
    transport::Request header_req, payload_req;
    alignas(8) std::byte header[kHeaderBytes + kInlineBytes];
    int* source = nullptr;  // any-source receives: where to say who sent
    std::shared_ptr<detail::WorkState> state;
    Deadline deadline = Deadline::never();  // set when posted
    bool is_send = false, payload_posted = false;
    bool header_put = false;  // mailboxes: a send's header is in the ring
    void* buf = nullptr;
    size_t bytes = 0;
    int peer = -1;
    uint32_t user_tag = 0;
    uint64_t tag = 0;  // the header's wire tag; the payload's adds kPayloadBit
    bool finished = false;
  };
  using OpPtr = std::shared_ptr<Op>;
  // Outcomes to deliver once the lock is released.
  struct Finished {
    std::vector<std::pair<std::shared_ptr<detail::WorkState>, std::exception_ptr>> items;
    void add(Op& op, std::exception_ptr err) {
      if (op.finished) return;
      op.finished = true;
      items.emplace_back(op.state, std::move(err));
    }
    void deliver() {
      for (auto& [state, err] : items) state->finish(err);
      items.clear();
    }
  };
  // An eager message or header that arrived before its receive.
  struct Arrived {
    int source = 0;
    uint32_t tag = 0;
    uint64_t length = 0;
    bool apart = false;  // the payload comes through the transport
    std::vector<std::byte> data;
  };
  // The lock and the waiters' way in (Note [waiters drive progress]).
  struct Mail : detail::Progress {
    std::mutex mu;
    PointToPoint* owner = nullptr;  // under mu; null once the communicator is gone
    bool poll() override;
  };
  enum class Mode { Unknown, Transport, Mailbox };

  Work post(bool is_send, void* buf, size_t count, DataType dtype, int peer, uint32_t tag,
            int* source);
  // Under mu: decides the mode on the first post (the windows are set up
  // when the communicator is made, alike on every rank).
  Mode mode();
  // Under mu, engine thread (or a caller holding the engine's claim, for
  // eager mailbox messages): posts what `op` starts with.
  void start(const OpPtr& op, Finished& fin);
  void fail(Op& op, ErrorCode code, const std::string& reason, Finished& fin);
  std::string timeout_reason(const Op& op) const;

  // Transport headers (p2p.cpp).
  void start_transport(const OpPtr& op);
  bool advance(Op& op, bool may_post_payload, Finished& fin);
  void failed_request(Op& op, const transport::Request& req, Finished& fin);
  Engine::Poll poll_transport(Finished& fin);

  // Mailboxes (p2p_mail.cpp).
  void start_mail(const OpPtr& op, Finished& fin);
  // Any thread holding mu: moves headers out of full rings and into
  // matching receives; true if anything moved. No provider call.
  bool advance_mail(Finished& fin);
  // A header from `source` for `op`: checks the length, copies eager data
  // (`copy` writes `length` bytes to its argument), or queues the payload.
  template <class Copy>
  void deliver(Op& op, int source, uint64_t length, bool apart, Copy&& copy, Finished& fin);
  bool put_header(Op& op);
  Engine::Poll poll_mail(Finished& fin);
  // Fails every operation the mailboxes hold (not the transport's).
  void fail_all_mail(ErrorCode code, const std::string& why, Finished& fin);

  CommunicatorImpl& comm_;
  const std::shared_ptr<Mail> mail_ = std::make_shared<Mail>();
  Mode mode_ = Mode::Unknown;
  bool directed_ = false;  // the transport matches sources (Note [any-source receives])
  // Under mu. Owned by address: the transport points at their requests.
  std::vector<OpPtr> pending_;  // transport requests in flight
  // Cancelled operations whose cancellation the provider did not confirm
  // (transport::Transport::cancel_all): their requests live as long as the
  // transport may write them.
  std::vector<OpPtr> abandoned_;
  // Mailboxes, under mu.
  std::vector<shared::MailboxWriter> out_;   // by destination
  std::vector<shared::MailboxReader> in_;    // by source
  std::vector<std::deque<OpPtr>> outbox_;    // by destination: headers waiting for room
  std::deque<OpPtr> posted_;                 // receives waiting for a header, in post order
  std::deque<Arrived> arrived_;              // headers waiting for a receive, in arrival order
  std::deque<OpPtr> to_post_;                // matched receives whose payload the engine posts
  // A failure a waiter noticed, for the engine to fail the communicator with.
  std::string deferred_reason_;
  ErrorCode deferred_code_ = ErrorCode::Internal;
};

}  // namespace gradwire
