// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [point-to-point] in p2p.h: posting, and headers through the
// transport. The mailboxes of one host are in p2p_mail.cpp.
#include "runtime/p2p.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "base/raise.h"
#include "base/logging.h"
#include "collectives/context.h"
#include "device/location.h"
#include "runtime/communicator_impl.h"
#include "runtime/watchdog.h"

namespace gradwire {

PointToPoint::PointToPoint(CommunicatorImpl& comm) : comm_(comm) {
  mail_->owner = this;
  transport_side_.owner = this;
}

PointToPoint::~PointToPoint() {
  std::lock_guard<std::mutex> lk(mail_->mu);
  mail_->owner = nullptr;  // a Work that outlives us polls nothing
}

bool PointToPoint::Mail::poll() {
  std::unique_lock<std::mutex> lk(mu, std::try_to_lock);
  if (!lk.owns_lock() || !owner) return false;
  Finished fin;
  const bool moved = owner->advance_mail(fin);
  lk.unlock();
  fin.deliver();
  return moved;
}

Work PointToPoint::send(const void* buf, size_t count, DataType dtype, int peer, uint32_t tag) {
  return post(true, const_cast<void*>(buf), count, dtype, peer, tag, nullptr);
}

Work PointToPoint::recv(void* buf, size_t count, DataType dtype, int peer, uint32_t tag,
                        int* source) {
  return post(false, buf, count, dtype, peer, tag, source);
}

PointToPoint::Mode PointToPoint::mode() {
  if (mode_ != Mode::Unknown) return mode_;
  shm::Windows* windows = comm_.active_windows();
  mode_ = windows ? Mode::Mailbox : Mode::Transport;
  // Note [any-source receives]: on shm the provider matches the source
  // itself (FI_DIRECTED_RECV) and the tag leaves the source out, so a
  // receive from any peer is a plain undirected receive with no ignore
  // mask: libfabric 1.17's shm did not find the second of two unexpected
  // messages for an any-source receive that ignored the source bits.
  // Everywhere else the tag carries the source (Note [tags carry the source
  // rank]) and an any-source receive ignores those bits. tcp;ofi_rxm
  // reports FI_DIRECTED_RECV too, but a directed receive there did not take
  // a message that arrived on a connection the receiver had not opened
  // (ReceiveFromAnySource at 3 ranks timed out), so it keeps the source in
  // the tag, as the collectives do; there an any-source receive of a
  // payload (more than kInlineBytes) also timed out, directed or not, so
  // those are refused (post()). Payloads under mailboxes are always
  // received from their known sender.
  clearance_ = comm_.transport->properties().stalls_on_unexpected;
  directed_ = comm_.transport->properties().directed_recv &&
              comm_.transport->properties().provider == "shm";
  if (mode_ == Mode::Mailbox) {
    const int n = comm_.size;
    out_.resize(n);
    in_.resize(n);
    bulk_out_.resize(n);
    bulk_in_.resize(n);
    outbox_.resize(n);
    next_id_.assign(n, 0);
    awaiting_cts_.resize(n);
    streaming_out_.resize(n);
    streaming_in_.resize(n);
    for (int r = 0; r < n; ++r) {  // r == rank too: a message to oneself
      out_[r] = shm::MailboxWriter(windows->mailbox(comm_.rank, r));
      in_[r] = shm::MailboxReader(windows->mailbox(r, comm_.rank));
      bulk_out_[r] = shm::BulkWriter(windows->mailbox(comm_.rank, r));
      bulk_in_[r] = shm::BulkReader(windows->mailbox(r, comm_.rank));
    }
    // Note [the spin budget] in collectives/context.cpp: 0 yields at once.
    const auto& budget = comm_.options.collectives.spin_budget;
    mail_->spin = budget && budget->count() == 0 ? 0 : collectives::flag_spin();
    single_copy_ = comm_.options.collectives.p2p_single_copy;
    canary_ = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}() ^
              uint64_t(reinterpret_cast<uintptr_t>(this));
  }
  mode_known_.store(mode_, std::memory_order_release);
  return mode_;
}

Work PointToPoint::post(bool is_send, void* buf, size_t count, DataType dtype, int peer,
                        uint32_t tag, int* source) {
  const int rank = comm_.rank;
  const char* op = is_send ? "send" : "recv";
  if (static_cast<size_t>(dtype) >= std::size(kAllDataTypes)) {
    raise(ErrorCode::InvalidArgument, "rank {}: {} got DataType({}), which is not a data type",
          rank, op, int(dtype));
  }
  const bool any_source = !is_send && peer == kAnySource;
  if (!any_source && (peer < 0 || peer >= comm_.size)) {
    raise(ErrorCode::InvalidArgument, "rank {}: {} {} rank {}, which is not a rank of this "
          "communicator (size {})", rank, op, is_send ? "to" : "from", peer, comm_.size);
  }
  size_t bytes = 0;
  if (__builtin_mul_overflow(count, element_size(dtype), &bytes)) {
    raise(ErrorCode::InvalidArgument, "rank {}: {} of {} elements of {} overflows the address "
          "space", rank, op, count, to_string(dtype));
  }
  if (bytes > 0 && buf == nullptr) {
    raise(ErrorCode::InvalidArgument, "rank {}: {} got a null buffer for {} bytes", rank, op,
          bytes);
  }
  if (bytes > 0 && device::cuda_driver_loaded() && device::locate(buf).is_device()) {
    raise(ErrorCode::InvalidArgument, "rank {}: {} of CUDA device memory is not supported yet; "
          "copy the data to host memory first", rank, op);
  }
  Mode m = mode_known_.load(std::memory_order_acquire);
  if (m == Mode::Unknown) {
    std::lock_guard<std::mutex> lk(mail_->mu);
    m = mode();
  }
  // (mode() never changes once decided.)
  if (any_source && m == Mode::Transport && bytes > kInlineBytes &&
      comm_.transport->properties().provider != "shm") {
    // Note [any-source receives]: measured on tcp;ofi_rxm, the payload of
    // such a message was never matched (the receive timed out); refused
    // clearly until that is fixed, rather than left to time out.
    raise(ErrorCode::InvalidArgument, "rank {}: recv from any rank of {} bytes: on provider {} "
          "across hosts a receive from any rank takes at most {} bytes for now (between ranks "
          "of one host, any size); name the source rank, or send the size first", rank, bytes,
          comm_.transport->properties().provider, kInlineBytes);
  }
  comm_.check_usable(op);
  // Note [descriptions on demand] in base/work_state.h: the words are made
  // only if something reads them.
  detail::CallText text;
  text.rank = rank;
  if (comm_.name != "world") text.comm = comm_.name;
  text.kind = is_send ? detail::CallText::Kind::Send : detail::CallText::Kind::Recv;
  text.seq = tag;
  text.call.root = any_source ? -1 : peer;
  text.call.count = count;
  text.call.dtype = dtype;
  std::unique_lock<std::mutex> lk(mail_->mu);
  OpPtr item = op_for(text);
  // By reference: `item` keeps it alive, and a copy here was two more atomic
  // read-modify-writes per message.
  detail::WorkState& state = *item->state;
  item->is_send = is_send;
  item->buf = buf;
  item->bytes = bytes;
  item->peer = peer;
  item->user_tag = tag;
  item->source = source;
  // An any-source receive's header tag has source 0; the source bits are
  // ignored when matching (start_transport()).
  item->tag = collectives::make_p2p_tag(tag, directed_ ? 0 : is_send ? rank : std::max(peer, 0));
  // Note [point-to-point on one host]: posted here when the engine is idle
  // (Note [messages need no claim]).
  if (m == Mode::Mailbox && comm_.engine().idle_hint()) {
    state.phase = detail::WorkState::Phase::Running;
    state.started = coarse_now();
    Finished fin;
    item->deadline = Deadline(state.started + comm_.options.timeout);  // Note [coarse clock]
    start(item, fin);
    const bool outstanding = !item->finished;
    lk.unlock();
    fin.deliver();
    if (outstanding) comm_.engine().want_poll();
    return Work(item->state);
  }
  lk.unlock();
  comm_.submit_to_engine(item->state, [this, item](detail::WorkState& work) {
    comm_.check_usable(item->is_send ? "send" : "recv");
    Finished fin;
    std::exception_ptr failed;
    {
      std::lock_guard<std::mutex> lk(mail_->mu);
      item->deadline = Deadline::after(comm_.options.timeout);
      try {
        start(item, fin);
      } catch (const Error& e) {
        const std::string reason = fmt::format("{}: {}", work.description(), e.message());
        comm_.fail(reason, e.code());
        failed = std::make_exception_ptr(Error(e.code(), reason));
      }
    }
    work.finishes_later = !failed;  // fin may hold this very Work: it finishes it below
    fin.deliver();
    if (failed) std::rethrow_exception(failed);
  });
  return Work(item->state);
}

PointToPoint::OpPtr PointToPoint::op_for(const detail::CallText& text) {
  // Note [the lean inline path] in runtime/communicator.cpp, for messages:
  // an operation (and its WorkState) that nothing but this pool holds any
  // more is reset and used again, so that a ping-pong allocates nothing.
  // Only under mailboxes: transport requests are not reset.
  if (mode_ == Mode::Mailbox) {
    for (OpPtr& spare : spares_) {
      if (spare && spare.use_count() == 1 && spare->state.use_count() == 1) {
        // The last other holder let go with an acq_rel decrement.
        std::atomic_thread_fence(std::memory_order_acquire);
        std::shared_ptr<detail::WorkState> state = std::move(spare->state);
        state->reuse(text);
        spare->reset_for_mail();
        spare->state = std::move(state);
        return spare;
      }
    }
  }
  auto item = std::make_shared<Op>();
  item->state = std::make_shared<detail::WorkState>(text, comm_.options.timeout);
  if (mode_ == Mode::Mailbox) {
    item->state->progress = mail_;
    spares_[next_spare_++ % spares_.size()] = item;
  }
  return item;
}

void PointToPoint::start(const OpPtr& op, Finished& fin) {
  if (mode_ == Mode::Mailbox) {
    start_mail(op, fin);
  } else {
    start_transport(op);
  }
}

void PointToPoint::fail(Op& op, ErrorCode code, const std::string& reason, Finished& fin) {
  comm_.fail(reason, code);
  fin.add(op, std::make_exception_ptr(Error(code, reason)));
}

std::string PointToPoint::timeout_reason(const Op& op, const char* stage) const {
  // " Timed out " as torch's tests and Gloo's messages say it.
  const std::string head =
      fmt::format("{}: Timed out after {:.1f} s, not complete", op.state->description(),
                  std::chrono::duration<double>(comm_.options.timeout).count());
  if (stage) return fmt::format("{}: {}", head, stage);
  return fmt::format("{}; likely cause: {} posted the matching {} (or posted it with another "
                     "tag), or it is stalled or dead", head,
                     op.peer == kAnySource ? std::string("no rank")
                                           : fmt::format("rank {} never", op.peer),
                     op.is_send ? "recv" : "send");
}

Engine::Poll PointToPoint::poll() {
  Finished fin;
  Engine::Poll result;
  {
    std::lock_guard<std::mutex> lk(mail_->mu);
    result = mode_ == Mode::Mailbox ? poll_mail(fin) : poll_transport(fin);
  }
  fin.deliver();
  return result;
}

void PointToPoint::drop() {
  Finished fin;
  {
    std::lock_guard<std::mutex> lk(mail_->mu);
    const size_t outstanding = pending_.size() + mail_outstanding();
    if (outstanding == 0) return;
    log().warn("rank {}: communicator {} is destroyed with {} sends/receives outstanding; they "
               "are cancelled", comm_.rank, comm_.name, outstanding);
    if (!pending_.empty()) comm_.transport->cancel_all();
    const std::string why = "the communicator was destroyed first";
    for (auto& op : pending_) {
      fin.add(*op, std::make_exception_ptr(Error(
          ErrorCode::Aborted, fmt::format("{} did not complete: {}", op->state->description(),
                                          why))));
      if (op->in_flight()) {
        abandoned_.push_back(op);
      }
    }
    pending_.clear();
    fail_all_mail(ErrorCode::Aborted, why, fin);
  }
  fin.deliver();
}

// ---- headers through the transport -------------------------------------

namespace {
// A clear-to-send's tag (Note [point-to-point]): the header's, with
// kClearBit and the receiver's rank as its source, so that a sender of one
// tag to several ranks tells their clearances apart on any provider.
uint64_t clear_tag(uint64_t header_tag, int receiver) {
  constexpr uint64_t kSource = (uint64_t{1} << collectives::kRankBits) - 1;
  return (header_tag & ~kSource) | collectives::kClearBit | uint64_t(uint32_t(receiver));
}
}  // namespace

void PointToPoint::start_transport(const OpPtr& item) {
  Op& op = *item;
  transport::Transport& t = *comm_.transport;
  if (!op.is_send) {
    if (op.peer == kAnySource) {
      t.irecv_any(op.header_req, op.header, sizeof(op.header), op.tag,
                  directed_ ? 0 : (uint64_t{1} << collectives::kRankBits) - 1, op.deadline);
    } else {
      t.irecv(op.header_req, op.peer, op.header, sizeof(op.header), op.tag, op.deadline);
    }
  } else {
    const uint64_t length = op.bytes;
    const int32_t me = comm_.rank;
    std::memset(op.header, 0, kHeaderBytes);
    std::memcpy(op.header, &length, 8);
    std::memcpy(op.header + 8, &me, 4);
    const bool inline_data = op.bytes <= kInlineBytes;
    if (inline_data && op.bytes > 0) std::memcpy(op.header + kHeaderBytes, op.buf, op.bytes);
    if (!inline_data && clearance_) {
      // Posted before the header, so the clearance never arrives unexpected.
      t.irecv(op.clear_req, op.peer, nullptr, 0, clear_tag(op.tag, op.peer), op.deadline);
    }
    t.isend(op.header_req, op.peer, op.header, kHeaderBytes + (inline_data ? op.bytes : 0),
            op.tag, op.deadline);
    if (!inline_data && !clearance_) {
      t.isend(op.payload_req, op.peer, op.buf, op.bytes, op.tag | collectives::kPayloadBit,
              op.deadline);
      op.payload_posted = true;
    }
  }
  pending_.push_back(item);
}

void PointToPoint::failed_request(Op& op, const transport::Request& req, Finished& fin) {
  const std::string& what = op.state->description();
  if (comm_.aborted()) {
    // Cancelled because the communicator failed (this or another operation).
    fail(op, ErrorCode::Aborted, fmt::format("{} did not complete: {}", what, comm_.abort_reason()),
         fin);
  } else if (req.status == transport::RequestStatus::PeerLost) {
    fail(op, ErrorCode::PeerLost,
         fmt::format("{}: the connection to rank {} broke ({}); likely cause: that rank exited or "
                     "its host is unreachable", what, op.peer, req.error), fin);
  } else {
    fail(op, ErrorCode::Transport, fmt::format("{}: {}", what, req.error), fin);
  }
}

bool PointToPoint::advance(Op& op, bool may_post_payload, Finished& fin) {
  using State = transport::Request::State;
  if (op.header_req.state == State::Failed) {
    failed_request(op, op.header_req, fin);
    return true;
  }
  if (op.payload_req.state == State::Failed) {
    failed_request(op, op.payload_req, fin);
    return true;
  }
  if (op.clear_req.state == State::Failed) {
    failed_request(op, op.clear_req, fin);
    return true;
  }
  if (op.header_req.state != State::Done) return false;
  if (op.is_send && op.clear_req.state == State::Done && !op.payload_posted) {
    // The receiver is ready (Note [point-to-point]): the payload goes now.
    try {
      comm_.transport->isend(op.payload_req, op.peer, op.buf, op.bytes,
                             op.tag | collectives::kPayloadBit, op.deadline);
    } catch (const Error& e) {
      fail(op, e.code(), fmt::format("{}: {}", op.state->description(), e.message()), fin);
      return true;
    }
    op.payload_posted = true;
  }
  if (op.is_send && op.clear_req.state == State::Pending) return false;
  if (!op.is_send && !op.payload_posted) {
    uint64_t length = 0;
    int32_t sender = -1;
    const bool whole = op.header_req.received >= kHeaderBytes;
    if (whole) {
      std::memcpy(&length, op.header, 8);
      std::memcpy(&sender, op.header + 8, 4);
    }
    if (whole && op.peer == kAnySource && sender >= 0 && sender < comm_.size) {
      // From now on a receive from that rank: its payload carries its tag.
      op.peer = sender;
      if (!directed_) {
        op.tag = (op.tag & ~((uint64_t{1} << collectives::kRankBits) - 1)) | uint64_t(sender);
      }
      if (op.source) *op.source = sender;
    }
    const bool inline_data = length <= kInlineBytes;
    if (!whole || sender != op.peer || length != op.bytes ||
        op.header_req.received != kHeaderBytes + (inline_data ? length : 0)) {
      fail(op, ErrorCode::Mismatch,
           fmt::format("{}: the message has {} bytes, but {} were expected; likely cause: the "
                       "ranks disagree on the message's size", op.state->description(), length,
                       op.bytes), fin);
      return true;
    }
    if (inline_data) {
      if (length > 0) std::memcpy(op.buf, op.header + kHeaderBytes, length);
      fin.add(op, nullptr);
      return true;
    }
    // Payload receives are posted in the order of their headers, so each
    // takes its own message (Note [point-to-point]).
    if (!may_post_payload) return false;
    try {
      comm_.transport->irecv(op.payload_req, op.peer, op.buf, op.bytes,
                             op.tag | collectives::kPayloadBit, op.deadline);
      if (clearance_) {
        comm_.transport->isend(op.clear_req, op.peer, nullptr, 0, clear_tag(op.tag, comm_.rank),
                               op.deadline);
      }
    } catch (const Error& e) {
      fail(op, e.code(), fmt::format("{}: {}", op.state->description(), e.message()), fin);
      return true;
    }
    op.payload_posted = true;
  }
  if (op.payload_posted && op.payload_req.state != State::Done) return false;
  fin.add(op, nullptr);
  return true;
}

Engine::Poll PointToPoint::poll_transport(Finished& fin) {
  if (pending_.empty()) return Engine::Poll::Idle;
  comm_.transport->progress();
  if (job::failed_flag().load(std::memory_order_acquire) && !comm_.aborted()) {
    // Note [interrupting a collective]: another rank failed.
    comm_.fail(job::failure_reason(), ErrorCode(job::failure_code().load()));
  }
  sweep(fin, false);
  return pending_.empty() ? Engine::Poll::Idle : Engine::Poll::Busy;
}

bool PointToPoint::TransportSide::poll() {
  std::unique_lock<std::mutex> lk(owner->mail_->mu, std::try_to_lock);
  if (!lk.owns_lock() || owner->mode_ != Mode::Transport || owner->pending_.empty()) return false;
  Finished fin;
  const bool moved = owner->sweep(fin, true);
  lk.unlock();
  fin.deliver();
  return moved;
}

bool PointToPoint::sweep(Finished& fin, bool side) {
  using State = transport::Request::State;
  bool moved = false;
  // Receives whose payload cannot be posted yet: an earlier receive from the
  // same peer with the same tag has not read its header.
  std::vector<uint64_t> waiting;
  size_t kept = 0;
  for (size_t i = 0; i < pending_.size(); ++i) {
    Op& op = *pending_[i];
    // Streams of receives: (tag, source), and (tag, any) for any-source
    // receives whose header has not come yet, which hold back every source.
    constexpr uint64_t kSourceBits = (uint64_t{1} << collectives::kRankBits) - 1;
    const uint64_t any_stream = (op.tag & ~kSourceBits) | kSourceBits;
    const uint64_t stream =
        op.peer == kAnySource ? any_stream : (op.tag & ~kSourceBits) | uint64_t(op.peer);
    const bool in_order =
        std::find(waiting.begin(), waiting.end(), stream) == waiting.end() &&
        std::find(waiting.begin(), waiting.end(), any_stream) == waiting.end();
    const bool failed = op.header_req.state == State::Failed ||
                        op.payload_req.state == State::Failed || op.clear_req.state == State::Failed;
    const bool posted_before = op.payload_posted;
    if ((side && (failed || op.deadline.expired())) || !advance(op, in_order, fin)) {
      moved |= op.payload_posted != posted_before;
      if (!side && op.deadline.expired()) {
        fail(op, ErrorCode::Timeout, timeout_reason(op), fin);
      } else {
        if (!op.is_send && !op.payload_posted) {
          waiting.push_back(stream);
        }
        pending_[kept++] = std::move(pending_[i]);
        continue;
      }
    }
    moved = true;
    // Finished. Kept while the transport may still point at its requests
    // (a cancellation the provider did not confirm).
    if (op.in_flight()) {
      abandoned_.push_back(std::move(pending_[i]));
    }
  }
  pending_.resize(kept);
  return moved;
}

}  // namespace gradwire
