// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [point-to-point on one host] in p2p.h: messages between the ranks of
// one host, through mailboxes in their control segments.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "base/errors.h"
#include "base/logging.h"
#include "collectives/context.h"
#include "runtime/communicator_impl.h"
#include "runtime/p2p.h"
#include "runtime/watchdog.h"

namespace gradwire {

bool PointToPoint::put_header(Op& op) {
  const bool apart = op.bytes > shared::kEagerBytes;
  return out_[op.peer].put(op.user_tag, apart ? shared::kMailPayloadApart : 0, op.bytes,
                           apart ? nullptr : op.buf, apart ? 0 : op.bytes);
}

void PointToPoint::start_mail(const OpPtr& item, Finished& fin) {
  Op& op = *item;
  if (op.is_send) {
    // Behind any header still waiting for room, so the ring keeps send order.
    if (outbox_[op.peer].empty() && put_header(op)) {
      op.header_put = true;
    } else {
      outbox_[op.peer].push_back(item);
    }
    if (op.bytes > shared::kEagerBytes) {
      // Engine thread: long messages never post on a caller's (post()).
      comm_.transport->isend(op.payload_req, op.peer, op.buf, op.bytes,
                             op.tag | collectives::kPayloadBit, op.deadline);
      op.payload_posted = true;
      pending_.push_back(item);
    } else if (op.header_put) {
      fin.add(op, nullptr);  // eager: the data is in the ring
    }
    return;
  }
  for (auto it = arrived_.begin(); it != arrived_.end(); ++it) {
    if (it->tag != op.user_tag || (op.peer != kAnySource && it->source != op.peer)) continue;
    Arrived a = std::move(*it);
    arrived_.erase(it);
    deliver(op, a.source, a.length, a.apart,
            [&](void* dst) { std::memcpy(dst, a.data.data(), a.length); }, fin);
    if (a.apart && !op.finished) to_post_.push_back(item);
    return;
  }
  posted_.push_back(item);
}

template <class Copy>
void PointToPoint::deliver(Op& op, int source, uint64_t length, bool apart, Copy&& copy,
                           Finished& fin) {
  if (op.peer == kAnySource) {
    op.peer = source;
    if (op.source) *op.source = source;
  }
  // The payload's tag names its sender unless the provider matches sources.
  op.tag = collectives::make_p2p_tag(op.user_tag, directed_ ? 0 : source);
  if (length != op.bytes) {
    const std::string reason = fmt::format(
        "{}: the message has {} bytes, but {} were expected; likely cause: the ranks disagree on "
        "the message's size", op.state->description(), length, op.bytes);
    fin.add(op, std::make_exception_ptr(Error(ErrorCode::Mismatch, reason)));
    // Failing the communicator cancels transfers: the engine's to do.
    if (deferred_reason_.empty()) {
      deferred_reason_ = reason;
      deferred_code_ = ErrorCode::Mismatch;
    }
    comm_.engine().want_poll(true);
    return;
  }
  if (!apart) {
    if (length > 0) copy(op.buf);
    fin.add(op, nullptr);
    return;
  }
  comm_.engine().want_poll(true);  // the payload's receive is the engine's to post
}

bool PointToPoint::advance_mail(Finished& fin) {
  if (mode_ != Mode::Mailbox) return false;
  bool moved = false;
  for (auto& queue : outbox_) {
    while (!queue.empty()) {
      Op& op = *queue.front();
      if (!put_header(op)) break;
      op.header_put = true;
      if (op.bytes <= shared::kEagerBytes) fin.add(op, nullptr);
      queue.pop_front();
      moved = true;
    }
  }
  for (int source = 0; source < comm_.size; ++source) {
    shared::MailboxReader& in = in_[source];
    while (const shared::MailRecord* rec = in.peek()) {
      const bool apart = (rec->flags & shared::kMailPayloadApart) != 0;
      const uint64_t length = rec->length;
      const uint32_t tag = rec->tag;
      // A record's data is at most kEagerBytes (MailboxWriter::put).
      const size_t data_bytes = apart ? 0 : size_t(std::min<uint64_t>(length, shared::kEagerBytes));
      auto match = std::find_if(posted_.begin(), posted_.end(), [&](const OpPtr& op) {
        return op->user_tag == tag && (op->peer == kAnySource || op->peer == source);
      });
      if (match != posted_.end()) {
        OpPtr item = std::move(*match);
        posted_.erase(match);
        deliver(*item, source, length, apart,
                [&](void* dst) { in.copy_data(rec, dst, data_bytes); }, fin);
        if (apart && !item->finished) to_post_.push_back(std::move(item));
      } else {
        Arrived a{source, tag, length, apart, {}};
        a.data.resize(data_bytes);
        in.copy_data(rec, a.data.data(), data_bytes);
        arrived_.push_back(std::move(a));
      }
      in.pop(data_bytes);
      moved = true;
    }
  }
  return moved;
}

void PointToPoint::fail_all_mail(ErrorCode code, const std::string& why, Finished& fin) {
  const auto fail_op = [&](Op& op) {
    fin.add(op, std::make_exception_ptr(Error(
        code, fmt::format("{} did not complete: {}", op.state->description(), why))));
  };
  for (auto& op : posted_) fail_op(*op);
  for (auto& op : to_post_) fail_op(*op);
  for (auto& queue : outbox_) {
    for (auto& op : queue) fail_op(*op);
    queue.clear();
  }
  posted_.clear();
  to_post_.clear();
  arrived_.clear();
}

Engine::Poll PointToPoint::poll_mail(Finished& fin) {
  using State = transport::Request::State;
  if (!deferred_reason_.empty()) {
    comm_.fail(deferred_reason_, deferred_code_);
    deferred_reason_.clear();
  }
  if (job::failed_flag().load(std::memory_order_acquire) && !comm_.aborted()) {
    // Note [interrupting a collective]: another rank failed.
    comm_.fail(job::failure_reason(), ErrorCode(job::failure_code().load()));
  }
  if (comm_.aborted()) fail_all_mail(ErrorCode::Aborted, comm_.abort_reason(), fin);
  advance_mail(fin);
  // Payload receives, in the order their headers were matched.
  while (!to_post_.empty()) {
    OpPtr item = std::move(to_post_.front());
    to_post_.pop_front();
    Op& op = *item;
    try {
      comm_.transport->irecv(op.payload_req, op.peer, op.buf, op.bytes,
                             op.tag | collectives::kPayloadBit, op.deadline);
    } catch (const Error& e) {
      fail(op, e.code(), fmt::format("{}: {}", op.state->description(), e.message()), fin);
      continue;
    }
    op.payload_posted = true;
    pending_.push_back(std::move(item));
  }
  if (!pending_.empty()) {
    comm_.transport->progress();
    size_t kept = 0;
    for (size_t i = 0; i < pending_.size(); ++i) {
      Op& op = *pending_[i];
      if (op.payload_req.state == State::Failed) {
        failed_request(op, op.payload_req, fin);
      } else if (op.payload_req.state == State::Done) {
        // A send whose header still waits for room is finished: its buffer
        // is free; the outbox keeps the header.
        fin.add(op, nullptr);
      } else if (op.deadline.expired()) {
        fail(op, ErrorCode::Timeout, timeout_reason(op), fin);
        if (op.payload_req.state == State::Pending) abandoned_.push_back(pending_[i]);
      } else {
        pending_[kept++] = std::move(pending_[i]);
        continue;
      }
    }
    pending_.resize(kept);
  }
  // Deadlines of what waits in the mailboxes.
  const auto expire = [&](std::deque<OpPtr>& queue) {
    for (auto it = queue.begin(); it != queue.end();) {
      if ((*it)->deadline.expired()) {
        fail(**it, ErrorCode::Timeout, timeout_reason(**it), fin);
        it = queue.erase(it);
      } else {
        ++it;
      }
    }
  };
  expire(posted_);
  for (auto& queue : outbox_) expire(queue);
  if (!pending_.empty() || !to_post_.empty()) return Engine::Poll::Busy;
  const bool waiting = !posted_.empty() ||
                       std::any_of(outbox_.begin(), outbox_.end(),
                                   [](const std::deque<OpPtr>& q) { return !q.empty(); });
  return waiting ? Engine::Poll::Waiting : Engine::Poll::Idle;
}

}  // namespace gradwire
