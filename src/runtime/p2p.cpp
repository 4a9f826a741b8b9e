// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [point-to-point] in p2p.h.
#include "runtime/p2p.h"

#include <fmt/format.h>

#include "base/errors.h"
#include "base/logging.h"
#include "collectives/context.h"
#include "device/memory.h"
#include "runtime/communicator_impl.h"
#include "runtime/watchdog.h"

namespace gradwire {

PointToPoint::PointToPoint(CommunicatorImpl& comm) : comm_(comm) {}

Work PointToPoint::send(const void* buf, size_t count, DataType dtype, int peer, uint32_t tag) {
  return post(true, const_cast<void*>(buf), count, dtype, peer, tag);
}

Work PointToPoint::recv(void* buf, size_t count, DataType dtype, int peer, uint32_t tag) {
  return post(false, buf, count, dtype, peer, tag);
}

Work PointToPoint::post(bool is_send, void* buf, size_t count, DataType dtype, int peer,
                        uint32_t tag) {
  const int rank = comm_.rank;
  const char* op = is_send ? "send" : "recv";
  if (static_cast<size_t>(dtype) >= std::size(kAllDataTypes)) {
    raise(ErrorCode::InvalidArgument, "rank {}: {} got DataType({}), which is not a data type",
          rank, op, int(dtype));
  }
  if (peer < 0 || peer >= comm_.size) {
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
  comm_.check_usable(op);
  auto item = std::make_shared<Op>();
  // Formatted now, unlike a collective's (Note [descriptions on demand]):
  // there is no sequence number to format it from later.
  auto state = std::make_shared<detail::WorkState>(
      fmt::format("rank {}{}: {} {} rank {} (tag {}, {} x {})", rank,
                  comm_.name == "world" ? "" : fmt::format(" of {}", comm_.name), op,
                  is_send ? "to" : "from", peer, tag, count, to_string(dtype)),
      comm_.options.timeout);
  item->state = state;
  const int src = is_send ? rank : peer;
  const uint64_t wire_tag = collectives::make_p2p_tag(tag, src);
  comm_.engine().submit(state, [this, item, is_send, buf, bytes, peer, wire_tag](
                                   detail::WorkState& work) {
    comm_.check_usable(is_send ? "send" : "recv");
    item->deadline = Deadline::after(comm_.options.timeout);
    transport::Transport& t = *comm_.transport;
    try {
      if (is_send) {
        t.isend(item->req, peer, buf, bytes, wire_tag, item->deadline);
      } else {
        t.irecv(item->req, peer, buf, bytes, wire_tag, item->deadline);
      }
    } catch (const Error& e) {
      const std::string reason = fmt::format("{}: {}", work.description(), e.message());
      comm_.fail(reason, e.code());
      throw Error(e.code(), reason);
    }
    work.finishes_later = true;
    pending_.push_back(item);
  });
  return Work(state);
}

bool PointToPoint::complete(Op& op) {
  const transport::Request& req = op.req;
  detail::WorkState& state = *op.state;
  if (req.state == transport::Request::State::Done &&
      (req.is_send || req.received == req.length)) {
    state.finish(nullptr);
    return true;
  }
  ErrorCode code = ErrorCode::Transport;
  std::string reason;
  if (req.state == transport::Request::State::Done) {
    code = ErrorCode::Mismatch;
    reason = fmt::format("{}: the message has {} bytes, but {} were expected; likely cause: the "
                         "ranks disagree on the message's size", state.description(),
                         req.received, req.length);
  } else if (req.status == transport::RequestStatus::Truncated) {
    code = ErrorCode::Mismatch;
    reason = fmt::format("{}: the message is longer than the {} bytes expected; likely cause: "
                         "the ranks disagree on the message's size", state.description(),
                         req.length);
  } else if (comm_.aborted()) {
    // Cancelled because the communicator failed (this or another operation).
    code = ErrorCode::Aborted;
    reason = fmt::format("{} did not complete: {}", state.description(), comm_.abort_reason());
  } else if (req.status == transport::RequestStatus::PeerLost) {
    code = ErrorCode::PeerLost;
    reason = fmt::format("{}: the connection to rank {} broke ({}); likely cause: that rank "
                         "exited or its host is unreachable", state.description(), req.peer,
                         req.error);
  } else {
    reason = fmt::format("{}: {}", state.description(), req.error);
  }
  comm_.fail(reason, code);
  state.finish(std::make_exception_ptr(Error(code, reason)));
  return false;
}

bool PointToPoint::poll() {
  if (pending_.empty()) return false;
  comm_.transport->progress();
  if (job::failed_flag().load(std::memory_order_acquire) && !comm_.aborted()) {
    // Note [interrupting a collective]: another rank failed.
    comm_.fail(job::failure_reason(), ErrorCode(job::failure_code().load()));
  }
  size_t kept = 0;
  for (size_t i = 0; i < pending_.size(); ++i) {
    Op& op = *pending_[i];
    if (!op.req.done() && op.deadline.expired()) {
      const std::string reason = fmt::format(
          "Timed out: {} did not complete within {:.1f} s; likely cause: rank {} did not post "
          "the matching {} (or posted it with another tag), or it is stalled or dead",
          op.state->description(), std::chrono::duration<double>(comm_.options.timeout).count(),
          op.req.peer, op.req.is_send ? "recv" : "send");
      comm_.fail(reason, ErrorCode::Timeout);  // cancels every outstanding transfer
      op.state->finish(std::make_exception_ptr(Error(ErrorCode::Timeout, reason)));
      // Kept while the transport may still point at the request.
      if (!op.req.done()) abandoned_.push_back(std::move(pending_[i]));
      continue;
    }
    if (op.req.done()) {
      complete(op);
      continue;
    }
    pending_[kept++] = std::move(pending_[i]);
  }
  pending_.resize(kept);
  return !pending_.empty();
}

void PointToPoint::drop() {
  if (pending_.empty()) return;
  log().warn("rank {}: communicator {} is destroyed with {} sends/receives outstanding; they are "
             "cancelled", comm_.rank, comm_.name, pending_.size());
  comm_.transport->cancel_all();
  for (auto& op : pending_) {
    op->state->finish(std::make_exception_ptr(Error(
        ErrorCode::Aborted, fmt::format("{} did not complete: the communicator was destroyed "
                                        "first", op->state->description()))));
    if (!op->req.done()) abandoned_.push_back(std::move(op));
  }
  pending_.clear();
}

}  // namespace gradwire
