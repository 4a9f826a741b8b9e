// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "bootstrap/http.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>

#include "bootstrap/socket.h"

namespace gradwire::bootstrap::http {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<ResponseHead> parse_head(std::string_view bytes, bool* complete, std::string* error) {
  const size_t end = bytes.find("\r\n\r\n");
  *complete = end != std::string_view::npos || bytes.size() >= kMaxHeadBytes;
  if (end == std::string_view::npos || end + 4 > kMaxHeadBytes) {
    if (*complete) *error = fmt::format("a response head longer than {} bytes", kMaxHeadBytes);
    return std::nullopt;
  }
  ResponseHead head;
  head.size = end + 4;
  std::string_view rest = bytes.substr(0, end + 2);
  auto next_line = [&]() {
    const size_t at = rest.find("\r\n");
    std::string_view line = rest.substr(0, at);
    rest.remove_prefix(at + 2);
    return line;
  };
  const std::string_view status = next_line();
  // "HTTP/1.1 200 OK"
  if (status.size() < 12 || !status.starts_with("HTTP/1.") || status[8] != ' ') {
    *error = fmt::format("not an HTTP/1.x status line: '{}'", status.substr(0, 40));
    return std::nullopt;
  }
  const bool http10 = status[7] == '0';
  int code = 0;
  auto [p, ec] = std::from_chars(status.data() + 9, status.data() + 12, code);
  if (ec != std::errc() || p != status.data() + 12 || code < 100 || code > 599) {
    *error = fmt::format("malformed status code in '{}'", status.substr(0, 40));
    return std::nullopt;
  }
  head.status = code;
  head.close = http10;
  while (!rest.empty()) {
    const std::string_view line = next_line();
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      *error = fmt::format("malformed header line '{}'", line.substr(0, 40));
      return std::nullopt;
    }
    const std::string name = lower(trim(line.substr(0, colon)));
    const std::string value = lower(trim(line.substr(colon + 1)));
    if (name == "content-length") {
      uint64_t n = 0;
      auto [q, e] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (value.empty() || e != std::errc() || q != value.data() + value.size() ||
          (head.content_length && *head.content_length != n)) {
        *error = fmt::format("malformed Content-Length '{}'", value.substr(0, 40));
        return std::nullopt;
      }
      head.content_length = n;
    } else if (name == "transfer-encoding") {
      if (value != "chunked") {
        *error = fmt::format("unsupported Transfer-Encoding '{}'", value.substr(0, 40));
        return std::nullopt;
      }
      head.chunked = true;
    } else if (name == "connection") {
      if (value.find("close") != std::string::npos) head.close = true;
    }
  }
  if (head.chunked && head.content_length) {
    *error = "both Content-Length and chunked Transfer-Encoding";
    return std::nullopt;
  }
  return head;
}

ChunkedDecoder::State ChunkedDecoder::fail(const char* why) {
  error_ = why;
  return State::Error;
}

ChunkedDecoder::State ChunkedDecoder::feed(std::string_view in, size_t* used, std::string* out) {
  size_t at = 0;
  auto done = [&](State s) {
    *used = at;
    return s;
  };
  while (at < in.size()) {
    switch (phase_) {
      case Phase::Size:
      case Phase::Trailer: {
        const size_t nl = in.find('\n', at);
        const size_t take = (nl == std::string_view::npos ? in.size() : nl + 1) - at;
        if (line_.size() + take > 4096) return done(fail("a chunk size or trailer line over 4 KiB"));
        line_.append(in.substr(at, take));
        at += take;
        if (nl == std::string_view::npos) break;
        std::string_view line(line_);
        if (line.size() < 2 || line[line.size() - 2] != '\r') return done(fail("a line not ended by CRLF"));
        line.remove_suffix(2);
        if (phase_ == Phase::Trailer) {
          if (line.empty()) {
            phase_ = Phase::Done;
            line_.clear();
            return done(State::Done);
          }
          line_.clear();  // a trailer field: ignored
          break;
        }
        line = line.substr(0, line.find(';'));  // chunk extensions: ignored
        line = trim(line);
        uint64_t n = 0;
        auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), n, 16);
        if (line.empty() || ec != std::errc() || p != line.data() + line.size()) {
          return done(fail("a malformed chunk size"));
        }
        if (n > kMaxBodyBytes) return done(fail("a chunk over the body limit"));
        line_.clear();
        left_ = n;
        phase_ = n == 0 ? Phase::Trailer : Phase::Data;
        break;
      }
      case Phase::Data: {
        const size_t take = size_t(std::min<uint64_t>(left_, in.size() - at));
        if (out->size() + take > kMaxBodyBytes) return done(fail("data over the body limit"));
        out->append(in.substr(at, take));
        at += take;
        left_ -= take;
        if (left_ == 0) phase_ = Phase::DataEnd;
        break;
      }
      case Phase::DataEnd: {
        // "\r\n" after the data; it may arrive one byte at a time.
        line_ += in[at++];
        if (line_ == "\r") break;
        if (line_ != "\r\n") return done(fail("chunk data not followed by CRLF"));
        line_.clear();
        phase_ = Phase::Size;
        break;
      }
      case Phase::Done: return done(State::Done);
    }
  }
  return done(phase_ == Phase::Done ? State::Done : State::More);
}

Status Connection::post(std::string_view host, std::string_view path, std::string_view body,
                        Deadline deadline, std::string* error) {
  const std::string request = fmt::format(
      "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: "
      "{}\r\n\r\n{}",
      path, host, body.size(), body);
  int err = 0;
  switch (send_all(fd_.get(), request.data(), request.size(), deadline, &err)) {
    case IoStatus::Ok: return Status::Ok;
    case IoStatus::TimedOut:
      reusable_ = false;
      *error = "timed out sending the request";
      return Status::TimedOut;
    case IoStatus::Closed:
      reusable_ = false;
      *error = "the connection was closed";
      return Status::Failed;
    case IoStatus::Error: break;
  }
  reusable_ = false;
  *error = errno_text(err);
  return Status::Failed;
}

Status Connection::fill(Deadline deadline, std::string* error) {
  char chunk[16 * 1024];
  for (;;) {
    const ssize_t n = ::recv(fd_.get(), chunk, sizeof chunk, 0);
    if (n > 0) {
      buf_.append(chunk, size_t(n));
      return Status::Ok;
    }
    if (n == 0) {
      reusable_ = false;
      *error = "the server closed the connection";
      return Status::Failed;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      reusable_ = false;
      *error = errno_text(errno);
      return Status::Failed;
    }
    pollfd p{fd_.get(), POLLIN, 0};
    const int rc = ::poll(&p, 1, poll_timeout_ms(deadline));
    if (rc < 0 && errno != EINTR) {
      reusable_ = false;
      *error = errno_text(errno);
      return Status::Failed;
    }
    if (rc == 0 && deadline.expired()) {
      *error = "timed out waiting for the answer";
      return Status::TimedOut;
    }
  }
}

Status Connection::read_head(ResponseHead* head, Deadline deadline, std::string* error) {
  for (;;) {
    bool complete = false;
    if (auto h = parse_head(buf_, &complete, error)) {
      *head = *h;
      buf_.erase(0, h->size);
      if (h->close) reusable_ = false;
      chunks_ = ChunkedDecoder{};
      decoded_.clear();
      stream_done_ = false;
      return Status::Ok;
    }
    if (complete) {
      reusable_ = false;
      return Status::NotHttp;
    }
    if (Status s = fill(deadline, error); s != Status::Ok) {
      reusable_ = false;  // a half-read answer cannot be resumed
      return s;
    }
  }
}

Status Connection::read_body(const ResponseHead& head, std::string* body, Deadline deadline,
                             std::string* error) {
  body->clear();
  auto unusable = [&](Status s) {
    reusable_ = false;
    return s;
  };
  if (head.chunked) {
    for (;;) {
      size_t used = 0;
      const auto state = chunks_.feed(buf_, &used, body);
      buf_.erase(0, used);
      if (state == ChunkedDecoder::State::Done) return Status::Ok;
      if (state == ChunkedDecoder::State::Error) {
        *error = "malformed chunked body: " + chunks_.error();
        return unusable(Status::Failed);
      }
      if (Status s = fill(deadline, error); s != Status::Ok) return unusable(s);
    }
  }
  if (!head.content_length) {
    // The body runs to the end of the connection (allowed, rarely used).
    reusable_ = false;
    for (;;) {
      body->append(buf_);
      buf_.clear();
      if (body->size() > kMaxBodyBytes) {
        *error = "a body over the limit";
        return Status::Failed;
      }
      std::string why;
      const Status s = fill(deadline, &why);
      if (s == Status::Failed) return Status::Ok;  // closed: the end of the body
      if (s == Status::TimedOut) {
        *error = why;
        return s;
      }
    }
  }
  if (*head.content_length > kMaxBodyBytes) {
    *error = fmt::format("a body of {} bytes (at most {})", *head.content_length, kMaxBodyBytes);
    return unusable(Status::Failed);
  }
  const size_t want = size_t(*head.content_length);
  while (buf_.size() < want) {
    if (Status s = fill(deadline, error); s != Status::Ok) return unusable(s);
  }
  body->assign(buf_, 0, want);
  buf_.erase(0, want);
  return Status::Ok;
}

Status Connection::next_message(std::string* message, Deadline deadline, std::string* error) {
  for (;;) {
    if (const size_t nl = decoded_.find('\n'); nl != std::string::npos) {
      message->assign(decoded_, 0, nl);
      decoded_.erase(0, nl + 1);
      return Status::Ok;
    }
    if (decoded_.size() > kMaxBodyBytes) {
      reusable_ = false;
      *error = "a streamed message over the limit";
      return Status::Failed;
    }
    if (stream_done_) {
      reusable_ = false;
      *error = "the server ended the stream";
      return Status::Failed;
    }
    if (!buf_.empty()) {
      size_t used = 0;
      const auto state = chunks_.feed(buf_, &used, &decoded_);
      buf_.erase(0, used);
      if (state == ChunkedDecoder::State::Error) {
        reusable_ = false;
        *error = "malformed chunked stream: " + chunks_.error();
        return Status::Failed;
      }
      if (state == ChunkedDecoder::State::Done) stream_done_ = true;
      if (used > 0 || stream_done_) continue;
    }
    if (Status s = fill(deadline, error); s != Status::Ok) return s;
  }
}

}  // namespace gradwire::bootstrap::http
