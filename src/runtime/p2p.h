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
// - Messages. Between ranks of one host, through mailboxes in shared
//   memory (Note [point-to-point on one host]). Otherwise (across hosts,
//   and with GRADWIRE_SHM_COLLECTIVES=off) through the transport: a header
//   (its length, the sender, and data of up to kInlineBytes) and, for
//   longer messages, a payload. The header's tag is kP2pBit | payload:1 |
//   tag:32 | source rank:20 (Note [tags] in collectives/context.h), so
//   messages never match a collective's. The receiver posts the payload's
//   receive only once the header said the length it expects, in the order
//   of the headers, so each takes its own message (the transport orders
//   sends with one tag: FI_ORDER_SAS). On a provider whose connections
//   stall on an unexpected long message (`net`, Note [connections that
//   stall] in transport/transport.h) the payload is not sent eagerly: the
//   receiver, having posted the payload's receive, sends a clear-to-send
//   (0 bytes, the header's tag with kClearBit and the receiver's rank as
//   source), which the sender awaits with a receive posted before its
//   header. So only headers (at most 64 bytes, which the provider keeps
//   aside) can arrive unexpected, and messages with different tags never
//   hold each other up, as MPI requires.
// - Sizes. Either way a message of another length than its receive
//   expects is a Mismatch naming both, and never a truncated receive
//   (libfabric 1.17's shm provider never completes a truncated large
//   receive: its engine thread hung until the deadline).
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
// shm/mailbox.h), and messages never touch the transport:
// - A message of up to kEagerBytes is one record in the ring, data
//   included; a send whose record fits is complete when posted (its buffer
//   is free again), as an eager MPI send.
// - A longer one announces itself with a record naming its id (and where
//   its data lies: Note [single-copy reads]); once the receiver matched it,
//   it reads the data from the sender's memory itself and says so with a
//   read-done record, or, where the kernel refuses that, writes a
//   clear-to-send record (the id) into its own ring to the sender, and the
//   sender streams the data through
//   the pair's bulk channel, 256 KiB chunks in two halves, which the
//   receiver copies into the user's buffer as they come. Messages stream
//   in clearance order, which both sides know, so chunks need no header;
//   clearance may follow another order than sending (receives with other
//   tags posted first), which a shared FIFO of data could not.
// - The receiver matches records itself, MPI's way: a record that arrives
//   before its receive is kept (eager data included) in `arrived_` until a
//   receive takes it; a receive posted first waits in `posted_`.
// - No provider call is involved, so every send and receive is posted on
//   the caller's thread when the engine is idle (Note [messages need no
//   claim]), and every thread
//   that waits drives progress for all of them under one lock (Mail::mu):
//   a Work's waiter (Note [waiters drive progress] in base/work_state.h),
//   and the flag and transport waits of collectives (Context's side
//   progress), so a rank inside a collective still reads its mailboxes and
//   streams what its peers cleared (a peer may wait on that message before
//   it joins the collective: the deadlock MPI avoids the same way). The
//   engine polls every millisecond meanwhile, for deadlines and for Works
//   nobody waits on (Note [lingering poller] in engine.cpp).
// - WorkStates are finished after the lock is released (a callback may post
//   the next message). A failure noticed off the engine thread (a size
//   mismatch) is handed to the engine, which fails the communicator
//   (cancelling transfers is a provider call) and then the operation, so
//   the job knows before the caller does.
// - A receiver that never polls holds its senders back once their rings
//   are full (256 KiB each) or their long messages wait for clearance; the
//   sends then complete when it reads, or fail at their deadline.
// - Memory: 768 KiB per ordered pair, in the sender's control segment
//   (6 MiB per rank of an 8-rank host).
//
// Note [single-copy reads]: a long message's data is read by the receiver
// straight from the sender's buffer with process_vm_readv (one copy, as
// Open MPI's shared-memory transport does with CMA), not copied into the
// bulk channel and out again. Measured on the 2-core VM: 128 KiB through
// the channel took 17-19 us against Open MPI's 11-12, and in the phases
// where the VM's two cores sit far apart (Open MPI's 8-byte latency
// doubles) 70 us against 12: every line of the channel is dirty in the
// other core's cache, while the sender's own buffer is mostly clean. The
// announcement carries the sender's pid, the data's address, and the
// address and value of a random canary in the sender's PointToPoint; the
// receiver reads the canary in the same call and checks it, so a pid that
// now belongs to another process can never pass for the sender. If the
// kernel refuses (ptrace restrictions, another pid namespace) or the canary
// differs, the receiver falls back to clear-to-send streaming, for good.
// GRADWIRE_P2P_SINGLE_COPY=off turns the reads off.
//
// Note [messages need no claim]: a small collective on the caller's thread
// claims the engine (Engine::claim_inline) so that nothing else runs the
// collective context meanwhile. A message needs less: its state lives under
// Mail::mu, so posting it only has to come after what this thread queued
// before (an earlier send to the same peer must enter the ring first).
// Engine::idle_hint(), two atomic loads, says nothing is queued or running;
// this thread's own submissions are visible to it, and the engine clears
// the hint only after a task (an earlier post) has finished. Posts from
// different threads have no order to keep (as in MPI). The claim and its
// release were two mutex round trips of the ~0.4 us a ping-pong message
// cost here.
#pragma once

#include <array>
#include <atomic>
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
#include "shm/shm.h"
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
  // What a collective's idle waits advance (Context::set_side_progress):
  // the mailboxes, or, on the transport, the steps of Note
  // [point-to-point]'s clear-to-send. Those are transport calls, so only the
  // thread that drives the collective (and with it the transport) may poll
  // it, never a Work's waiter.
  detail::Progress& side_progress() {
    if (mode_known_.load(std::memory_order_acquire) == Mode::Transport && clearance_) {
      return transport_side_;
    }
    return *mail_;
  }

 private:
  // A header on the transport: the length (8 bytes), the sender's rank (4),
  // 4 unused, then up to kInlineBytes of data (Note [point-to-point]).
  static constexpr size_t kHeaderBytes = 16, kInlineBytes = 48;
  struct Op {
    // clear_req: the clear-to-send of Note [point-to-point] (stalling
    // providers): the sender's receive of it, or the receiver's send.
    transport::Request header_req, payload_req, clear_req;
    alignas(8) std::byte header[kHeaderBytes + kInlineBytes];
    int* source = nullptr;  // any-source receives: where to say who sent
    std::shared_ptr<detail::WorkState> state;
    Deadline deadline = Deadline::never();  // set when posted
    bool is_send = false, payload_posted = false;
    uint64_t id = 0;     // mailboxes: a long message's number on its pair
    uint64_t moved = 0;  // mailboxes: bytes of a long message streamed so far
    void* buf = nullptr;
    size_t bytes = 0;
    int peer = -1;
    uint32_t user_tag = 0;
    uint64_t tag = 0;  // the header's wire tag; the payload's adds kPayloadBit
    bool finished = false;
    // The transport may still point at one of its requests.
    bool in_flight() const {
      using transport::Request;
      return header_req.state == Request::State::Pending ||
             payload_req.state == Request::State::Pending ||
             clear_req.state == Request::State::Pending;
    }
    // For reuse under mailboxes (op_for): every field but the transport's
    // (unused there; resetting the header bytes one by one was a tenth of a
    // ping-pong message).
    void reset_for_mail() {
      source = nullptr;
      deadline = Deadline::never();
      is_send = payload_posted = finished = false;
      id = moved = 0;
      buf = nullptr;
      bytes = 0;
      peer = -1;
      user_tag = 0;
      tag = 0;
    }
  };
  using OpPtr = std::shared_ptr<Op>;
  // Outcomes to deliver once the lock is released.
  // A few in place: a heap allocation per message was measurable in a
  // ping-pong.
  struct Finished {
    using Item = std::pair<std::shared_ptr<detail::WorkState>, std::exception_ptr>;
    std::array<Item, 4> first;
    size_t n = 0;
    std::vector<Item> more;
    void add(Op& op, std::exception_ptr err) {
      if (op.finished) return;
      op.finished = true;
      if (n < first.size()) {
        first[n++] = Item(op.state, std::move(err));
      } else {
        more.emplace_back(op.state, std::move(err));
      }
    }
    void deliver() {
      for (size_t i = 0; i < n; ++i) {
        first[i].first->finish(first[i].second);
        first[i] = Item();
      }
      n = 0;
      for (auto& [state, err] : more) state->finish(err);
      more.clear();
    }
  };
  // An eager message or header that arrived before its receive.
  struct Arrived {
    int source = 0;
    uint32_t tag = 0;
    uint64_t length = 0;
    uint32_t flags = 0;  // kMailPayloadApart: a long message, `id` on its pair
    uint64_t id = 0;
    std::vector<std::byte> data;
  };
  // The lock and the waiters' way in (Note [waiters drive progress]).
  struct Mail : detail::Progress {
    std::mutex mu;
    PointToPoint* owner = nullptr;  // under mu; null once the communicator is gone
    bool poll() override;
  };
  enum class Mode { Unknown, Transport, Mailbox };
  struct TransportSide : detail::Progress {
    PointToPoint* owner = nullptr;
    bool poll() override;
  };

  Work post(bool is_send, void* buf, size_t count, DataType dtype, int peer, uint32_t tag,
            int* source);
  // Under mu: a fresh or reused operation whose WorkState describes `text`.
  OpPtr op_for(const detail::CallText& text);
  // Under mu: decides the mode on the first post (the windows are set up
  // when the communicator is made, alike on every rank).
  Mode mode();
  // Under mu, engine thread (or a caller holding the engine's claim, for
  // eager mailbox messages): posts what `op` starts with.
  void start(const OpPtr& op, Finished& fin);
  void fail(Op& op, ErrorCode code, const std::string& reason, Finished& fin);
  // `stage`: how far the message got, when the default words (the peer
  // never posted the matching operation) would be wrong.
  std::string timeout_reason(const Op& op, const char* stage = nullptr) const;

  // Transport headers (p2p.cpp).
  void start_transport(const OpPtr& op);
  bool advance(Op& op, bool may_post_payload, Finished& fin);
  // Under mu: advances every pending transport operation in order. `side`:
  // called from inside a collective (TransportSide), which drives the
  // transport itself; operations that failed or expired are left for the
  // engine's poll, which fails them.
  bool sweep(Finished& fin, bool side);
  void failed_request(Op& op, const transport::Request& req, Finished& fin);
  Engine::Poll poll_transport(Finished& fin);

  // Mailboxes (p2p_mail.cpp).
  // A record waiting for room in its ring: an operation's (eager data or
  // an announcement), or, with op null, a clear-to-send for message `cts`.
  // A message's record, or (op null) a control record for message `cts`:
  // clear-to-send or read-done (`control`).
  struct Outgoing {
    OpPtr op;
    uint64_t cts = 0;
    uint32_t control = 0;
  };
  // Note [single-copy reads]: what a long message's announcement carries
  // (the canary is this PointToPoint's canary_).
  using ApartInfo = shm::PeerRegion;
  // Reads a long message straight from the sender's memory; false if the
  // kernel refused (the caller then clears it for streaming).
  bool read_single_copy(const Op& op, const ApartInfo& info);
  void start_mail(const OpPtr& op, Finished& fin);
  // Puts `o` into the ring to `peer` behind whatever waits there.
  void enqueue(int peer, Outgoing o, Finished& fin);
  bool put_record(int peer, const Outgoing& o);
  // After put_record() succeeded: finishes what that completed.
  void record_put(const Outgoing& o, Finished& fin);
  // Any thread holding mu: moves records and chunks; true if anything
  // moved. No provider call.
  bool advance_mail(Finished& fin);
  // A record from `source` for receive `op`: checks the length, copies
  // eager data (`copy` writes it to its argument), or clears a long one.
  template <class Copy>
  void deliver(const OpPtr& op, int source, uint64_t length, uint32_t flags, uint64_t id,
               Copy&& copy, Finished& fin);
  bool stream_out(int peer, Finished& fin);
  bool stream_in(int source, Finished& fin);
  Engine::Poll poll_mail(Finished& fin);
  // Fails every operation the mailboxes hold.
  void fail_all_mail(ErrorCode code, const std::string& why, Finished& fin);
  size_t mail_outstanding() const;

  CommunicatorImpl& comm_;
  const std::shared_ptr<Mail> mail_ = std::make_shared<Mail>();
  Mode mode_ = Mode::Unknown;
  std::atomic<Mode> mode_known_{Mode::Unknown};  // mode_ once decided: read without mu
  bool directed_ = false;  // the transport matches sources (Note [any-source receives])
  // Long payloads wait for a clear-to-send (Note [connections that stall]).
  bool clearance_ = false;
  TransportSide transport_side_;
  // Under mu. Owned by address: the transport points at their requests.
  std::vector<OpPtr> pending_;  // transport requests in flight
  // Cancelled operations whose cancellation the provider did not confirm
  // (transport::Transport::cancel_all): their requests live as long as the
  // transport may write them.
  std::vector<OpPtr> abandoned_;
  // Recent operations, reused once nothing else holds them (op_for).
  std::array<OpPtr, 8> spares_;
  size_t next_spare_ = 0;
  // Mailboxes, under mu; by peer.
  std::vector<shm::MailboxWriter> out_;
  std::vector<shm::MailboxReader> in_;
  std::vector<shm::BulkWriter> bulk_out_;
  std::vector<shm::BulkReader> bulk_in_;
  std::vector<std::deque<Outgoing>> outbox_;     // records waiting for room
  std::vector<uint64_t> next_id_;                // long messages announced to each peer
  std::vector<std::deque<OpPtr>> awaiting_cts_;  // long sends not cleared yet
  std::vector<std::deque<OpPtr>> streaming_out_;  // cleared long sends, in clearance order
  std::vector<std::deque<OpPtr>> streaming_in_;   // cleared long receives, in that order
  std::deque<OpPtr> posted_;     // receives waiting for a record, in post order
  std::deque<Arrived> arrived_;  // records waiting for a receive, in arrival order
  // A failure a waiter noticed, for the engine to fail the communicator with,
  // and the operations it failed: they finish only after the engine has
  // reported the failure to the job, so a rank that returns from the failed
  // wait and exits has already told its peers (their next collective fails
  // instead of timing out).
  std::string deferred_reason_;
  ErrorCode deferred_code_ = ErrorCode::Internal;
  std::vector<std::pair<OpPtr, std::exception_ptr>> failing_;
  // Note [single-copy reads]: on until a read is refused (or
  // GRADWIRE_P2P_SINGLE_COPY=off); the random value peers check.
  bool single_copy_ = true;
  uint64_t canary_ = 0;
};

}  // namespace gradwire
