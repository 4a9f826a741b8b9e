// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [point-to-point]: Communicator::send and recv, the messages of
// pipeline parallelism and of torch.distributed's send/recv/isend/irecv/
// batch_isend_irecv.
//
// - Order. A send or receive is queued on the engine like a collective, so
//   it keeps its place among this rank's calls (as NCCL's do on a stream);
//   but its task only posts the message and returns, and the operation
//   completes later, when the transport says so. So a rank can post a send
//   and a receive back to back (a ring exchange of large messages) without
//   the first blocking the second, and a collective queued after a posted
//   receive runs while the receive waits for its sender.
// - Matching. Messages from one sender with one tag arrive in the order
//   they were sent (the transport orders sends with one tag: FI_ORDER_SAS),
//   and a receive takes the first message of its (source, tag) pair. The
//   transport tag is kP2pBit | payload:1 | tag:32 | source rank:20 (Note
//   [tags] in collectives/context.h), so messages never match a
//   collective's; headers and payloads are two streams, each in order.
// - Completion. The engine's poller (Engine::set_poller) finishes each
//   Work when its request is done, after every task and, while anything is
//   outstanding, in the idle loop.
// - Sizes. A message is a header (its length, and the data itself up to
//   kInlineBytes) and, for longer messages, the payload. The receiver posts
//   the payload's receive only once the header said the length it expects:
//   a message of another length is a Mismatch naming both, and never a
//   truncated receive (libfabric 1.17's shm provider never completes a
//   truncated large receive: its engine thread hung until the deadline).
//   Small messages, the latency-bound ones, stay one message. The header
//   also names the sender, so a receive from any source (torch's recv with
//   src=None) matches headers whatever their source bits and then takes
//   the payload from the rank that sent the header.
// - Failure, as for collectives (Note [a failed collective aborts its
//   communicator]): a receive whose message has a different size (the
//   ranks disagree: Mismatch), a broken connection (PeerLost), an operation
//   still outstanding at its deadline (Timeout, naming the peer and tag),
//   or another rank's reported failure fails the communicator: every
//   outstanding transfer is cancelled, so no buffer is written afterwards,
//   and every pending send and receive ends with the error. A communicator
//   destroyed with messages outstanding cancels them (Aborted): like
//   MPI_Finalize, destroying it does not wait for peers that never post.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/deadline.h"
#include "base/work_state.h"
#include "gradwire/error.h"
#include "gradwire/types.h"
#include "gradwire/work.h"
#include "transport/transport.h"

namespace gradwire {

class CommunicatorImpl;

class PointToPoint {
 public:
  explicit PointToPoint(CommunicatorImpl& comm);
  PointToPoint(const PointToPoint&) = delete;
  PointToPoint& operator=(const PointToPoint&) = delete;

  // Caller's thread: validates (InvalidArgument at once) and queues.
  Work send(const void* buf, size_t count, DataType dtype, int peer, uint32_t tag);
  // peer kAnySource: from whichever rank's message with `tag` comes first;
  // `*source` (if given) is set to the sender before the Work completes.
  Work recv(void* buf, size_t count, DataType dtype, int peer, uint32_t tag,
            int* source = nullptr);
  static constexpr int kAnySource = -1;

  // Engine thread (Engine::set_poller): finishes what completed; true while
  // anything is still outstanding.
  bool poll();
  // Engine thread, as it exits: cancels and fails what is outstanding.
  void drop();

 private:
  // A header: the length (8 bytes), the sender's rank (4), 4 unused, then
  // up to kInlineBytes of data (Note [point-to-point]).
  static constexpr size_t kHeaderBytes = 16, kInlineBytes = 48;
  struct Op {
    transport::Request header_req, payload_req;
    alignas(8) std::byte header[kHeaderBytes + kInlineBytes];
    int* source = nullptr;  // any-source receives: where to say who sent
    std::shared_ptr<detail::WorkState> state;
    Deadline deadline = Deadline::never();  // set when posted
    bool is_send = false, payload_posted = false;
    void* buf = nullptr;
    size_t bytes = 0;
    int peer = -1;
    uint64_t tag = 0;  // the header's wire tag; the payload's adds kPayloadBit
  };
  Work post(bool is_send, void* buf, size_t count, DataType dtype, int peer, uint32_t tag,
            int* source);
  // Engine thread: posts the header (and a send's payload).
  void start(Op& op);
  // Advances `op`; true once it is finished (its Work is complete).
  bool advance(Op& op, bool may_post_payload);
  // Fails the communicator and `op` with `reason`.
  void fail(Op& op, ErrorCode code, const std::string& reason);
  // An error for a failed request of `op`.
  void failed_request(Op& op, const transport::Request& req);

  CommunicatorImpl& comm_;
  bool directed_ = false;  // the transport matches sources (Note [any-source receives])
  // Engine thread only. Owned by address: the transport points at `req`.
  std::vector<std::shared_ptr<Op>> pending_;
  // Cancelled operations whose cancellation the provider did not confirm
  // (transport::Transport::cancel_all): their requests live as long as the
  // transport may write them.
  std::vector<std::shared_ptr<Op>> abandoned_;
};

}  // namespace gradwire
