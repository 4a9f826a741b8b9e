// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [point-to-point on one host] in p2p.h: messages between the ranks of
// one host, through mailboxes in their control segments.
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/raise.h"
#include "base/logging.h"
#include "kernels/cpu/copy.h"
#include "runtime/communicator_impl.h"
#include "runtime/p2p.h"
#include "runtime/job.h"

namespace gradwire {

bool PointToPoint::put_record(int peer, const Outgoing& o) {
  if (!o.op) return out_[peer].put(0, o.control, 0, o.cts, nullptr, 0);
  const Op& op = *o.op;
  if (op.bytes > shm::kEagerBytes) {
    // Note [single-copy reads]: where the receiver may read the data itself.
    const ApartInfo info{uint64_t(getpid()), uint64_t(reinterpret_cast<uintptr_t>(op.buf)),
                         uint64_t(reinterpret_cast<uintptr_t>(&canary_)), canary_};
    return out_[peer].put(op.user_tag, shm::kMailPayloadApart, op.bytes, op.id, &info,
                          sizeof(info));
  }
  return out_[peer].put(op.user_tag, 0, op.bytes, 0, op.buf, op.bytes);
}

void PointToPoint::enqueue(int peer, Outgoing o, Finished& fin) {
  // Behind any record still waiting for room, so the ring keeps send order.
  if (!outbox_[peer].empty() || !put_record(peer, o)) {
    outbox_[peer].push_back(std::move(o));
    return;
  }
  record_put(o, fin);
}

void PointToPoint::record_put(const Outgoing& o, Finished& fin) {
  // An eager send is complete once its data is in the ring.
  if (o.op && o.op->bytes <= shm::kEagerBytes) fin.add(*o.op, nullptr);
}

void PointToPoint::start_mail(const OpPtr& item, Finished& fin) {
  Op& op = *item;
  if (op.is_send) {
    if (op.bytes > shm::kEagerBytes) {
      op.id = next_id_[op.peer]++;
      awaiting_cts_[op.peer].push_back(item);
    }
    enqueue(op.peer, Outgoing{item}, fin);
    return;
  }
  for (auto it = arrived_.begin(); it != arrived_.end(); ++it) {
    if (it->tag != op.user_tag || (op.peer != kAnySource && it->source != op.peer)) continue;
    Arrived a = std::move(*it);
    arrived_.erase(it);
    deliver(item, a.source, a.length, a.flags, a.id,
            [&](void* dst) { std::memcpy(dst, a.data.data(), a.data.size()); }, fin);
    return;
  }
  posted_.push_back(item);
}

template <class Copy>
void PointToPoint::deliver(const OpPtr& item, int source, uint64_t length, uint32_t flags,
                           uint64_t id, Copy&& copy, Finished& fin) {
  Op& op = *item;
  if (op.peer == kAnySource) {
    op.peer = source;
    if (op.source) *op.source = source;
  }
  if (length != op.bytes) {
    const std::string reason = fmt::format(
        "{}: the message has {} bytes, but {} were expected; likely cause: the ranks disagree on "
        "the message's size", op.state->description(), length, op.bytes);
    // Failing the communicator cancels transfers: the engine's to do; the
    // receive finishes after that (failing_).
    failing_.emplace_back(item, std::make_exception_ptr(Error(ErrorCode::Mismatch, reason)));
    if (deferred_reason_.empty()) {
      deferred_reason_ = reason;
      deferred_code_ = ErrorCode::Mismatch;
    }
    comm_.engine().want_poll(true);
    return;
  }
  if ((flags & shm::kMailPayloadApart) == 0) {
    if (length > 0) copy(op.buf);
    fin.add(op, nullptr);
    return;
  }
  op.id = id;
  ApartInfo info;
  copy(&info);
  if (single_copy_ && read_single_copy(op, info)) {
    enqueue(source, Outgoing{nullptr, id, shm::kMailReadDone}, fin);
    fin.add(op, nullptr);
    return;
  }
  streaming_in_[source].push_back(item);
  enqueue(source, Outgoing{nullptr, id, shm::kMailClearToSend}, fin);
}

bool PointToPoint::read_single_copy(const Op& op, const ApartInfo& info) {
  const char* why = shm::read_from_peer(info, op.buf, op.bytes);
  if (why != nullptr) {
    single_copy_ = false;
    log().info("rank {}: point-to-point: reading rank {}'s message from its memory failed ({}); "
               "long messages stream through shared memory from now on", comm_.rank, op.peer,
               why);
  }
  return why == nullptr;
}

bool PointToPoint::stream_out(int peer, Finished& fin) {
  bool moved = false;
  auto& queue = streaming_out_[peer];
  while (!queue.empty()) {
    Op& op = *queue.front();
    while (op.moved < op.bytes) {
      const size_t chunk = std::min<uint64_t>(shm::kBulkChunk, op.bytes - op.moved);
      if (!bulk_out_[peer].write(static_cast<std::byte*>(op.buf) + op.moved, chunk)) return moved;
      op.moved += chunk;
      moved = true;
    }
    fin.add(op, nullptr);
    queue.pop_front();
  }
  return moved;
}

bool PointToPoint::stream_in(int source, Finished& fin) {
  bool moved = false;
  auto& queue = streaming_in_[source];
  while (!queue.empty()) {
    Op& op = *queue.front();
    while (op.moved < op.bytes) {
      const std::byte* chunk = bulk_in_[source].peek();
      if (!chunk) return moved;
      const size_t bytes = std::min<uint64_t>(shm::kBulkChunk, op.bytes - op.moved);
      kernels::copy(static_cast<std::byte*>(op.buf) + op.moved, chunk, bytes);
      bulk_in_[source].release();
      op.moved += bytes;
      moved = true;
    }
    fin.add(op, nullptr);
    queue.pop_front();
  }
  return moved;
}

bool PointToPoint::advance_mail(Finished& fin) {
  if (mode_ != Mode::Mailbox) return false;
  bool moved = false;
  const int n = comm_.size;
  for (int peer = 0; peer < n; ++peer) {
    auto& queue = outbox_[peer];
    while (!queue.empty() && put_record(peer, queue.front())) {
      record_put(queue.front(), fin);
      queue.pop_front();
      moved = true;
    }
  }
  for (int source = 0; source < n; ++source) {
    shm::MailboxReader& in = in_[source];
    while (const shm::MailRecord* rec = in.peek()) {
      const uint32_t flags = rec->flags, tag = rec->tag;
      const uint64_t length = rec->length, id = rec->aux;
      // Only eager records carry data, at most kEagerBytes (MailboxWriter::put).
      const size_t data_bytes =
          flags == 0 ? size_t(std::min<uint64_t>(length, shm::kEagerBytes))
          : (flags & shm::kMailPayloadApart) ? sizeof(ApartInfo) : 0;
      if (flags & (shm::kMailClearToSend | shm::kMailReadDone)) {
        // Our long message `id` may stream, or was read already.
        auto& waiting = awaiting_cts_[source];
        auto it = std::find_if(waiting.begin(), waiting.end(),
                               [&](const OpPtr& op) { return op->id == id; });
        if (it != waiting.end()) {
          if (flags & shm::kMailReadDone) {
            fin.add(**it, nullptr);
          } else {
            streaming_out_[source].push_back(std::move(*it));
          }
          waiting.erase(it);
        }
      } else {
        auto match = std::find_if(posted_.begin(), posted_.end(), [&](const OpPtr& op) {
          return op->user_tag == tag && (op->peer == kAnySource || op->peer == source);
        });
        if (match != posted_.end()) {
          OpPtr item = std::move(*match);
          posted_.erase(match);
          deliver(item, source, length, flags, id,
                  [&](void* dst) { in.copy_data(rec, dst, data_bytes); }, fin);
        } else {
          Arrived a{source, tag, length, flags, id, {}};
          a.data.resize(data_bytes);
          in.copy_data(rec, a.data.data(), data_bytes);
          arrived_.push_back(std::move(a));
        }
      }
      in.pop(data_bytes);
      moved = true;
    }
  }
  for (int peer = 0; peer < n; ++peer) {
    if (!streaming_out_[peer].empty()) moved |= stream_out(peer, fin);
    if (!streaming_in_[peer].empty()) moved |= stream_in(peer, fin);
  }
  return moved;
}

size_t PointToPoint::mail_outstanding() const {
  size_t n = posted_.size() + failing_.size();
  for (size_t p = 0; p < outbox_.size(); ++p) {
    n += outbox_[p].size() + awaiting_cts_[p].size() + streaming_out_[p].size() +
         streaming_in_[p].size();
  }
  return n;
}

void PointToPoint::fail_all_mail(ErrorCode code, const std::string& why, Finished& fin) {
  const auto fail_op = [&](const OpPtr& op) {
    if (!op) return;
    fin.add(*op, std::make_exception_ptr(Error(
        code, fmt::format("{} did not complete: {}", op->state->description(), why))));
  };
  for (auto& [op, err] : failing_) fin.add(*op, err);
  failing_.clear();
  for (auto& op : posted_) fail_op(op);
  posted_.clear();
  arrived_.clear();
  for (size_t p = 0; p < outbox_.size(); ++p) {
    for (auto& o : outbox_[p]) fail_op(o.op);
    for (auto* queue : {&awaiting_cts_[p], &streaming_out_[p], &streaming_in_[p]}) {
      for (auto& op : *queue) fail_op(op);
      queue->clear();
    }
    outbox_[p].clear();
  }
}

Engine::Poll PointToPoint::poll_mail(Finished& fin) {
  if (!deferred_reason_.empty()) {
    comm_.fail(deferred_reason_, deferred_code_);
    deferred_reason_.clear();
  }
  for (auto& [op, err] : failing_) fin.add(*op, err);
  failing_.clear();
  if (job::failed_flag().load(std::memory_order_acquire) && !comm_.aborted()) {
    // Note [interrupting a collective]: another rank failed.
    comm_.fail(job::failure_reason(), ErrorCode(job::failure_code().load()));
  }
  if (comm_.aborted()) fail_all_mail(ErrorCode::Aborted, comm_.abort_reason(), fin);
  // Note [waiters drive progress]: a polling waiter moves the data itself.
  if (mail_->drivers.load(std::memory_order_relaxed) == 0) advance_mail(fin);
  // Deadlines of whatever still waits. The first to expire fails the
  // communicator; the next poll fails the rest as Aborted (above).
  const auto expire = [&](std::deque<OpPtr>& queue, const char* stage) {
    for (auto it = queue.begin(); it != queue.end();) {
      if ((*it)->deadline.expired()) {
        fail(**it, ErrorCode::Timeout, timeout_reason(**it, stage), fin);
        it = queue.erase(it);
      } else {
        ++it;
      }
    }
  };
  expire(posted_, nullptr);
  for (size_t p = 0; p < outbox_.size(); ++p) {
    for (auto it = outbox_[p].begin(); it != outbox_[p].end(); ++it) {
      if (it->op && it->op->deadline.expired()) {
        fail(*it->op, ErrorCode::Timeout,
             timeout_reason(*it->op, "its mailbox to that rank stayed full; likely cause: the "
                                     "receiver does not receive (it posts no receives for earlier "
                                     "messages, or it is stalled or dead)"), fin);
      }
    }
    expire(awaiting_cts_[p], nullptr);
    expire(streaming_out_[p], "the receiver took part of it and then stopped; likely cause: the "
                              "receiving rank is stalled or dead");
    expire(streaming_in_[p], "the sender announced it but stopped sending its data; likely cause: "
                             "the sending rank is stalled or dead");
  }
  return mail_outstanding() > 0 ? Engine::Poll::Waiting : Engine::Poll::Idle;
}

}  // namespace gradwire
