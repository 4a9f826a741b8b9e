// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The HTTP/1.1 client of the etcd store (Note [etcd over its JSON gateway]
// in etcd_store.cpp): POST requests with a JSON body over a kept-alive
// connection, and chunked streaming answers (etcd's watches) read one
// newline-delimited message at a time. Every read and write takes a
// Deadline (Note [nothing blocks forever]). The parsers of what the server
// sends (the response head, the chunked framing) are pure and fuzzed
// (tests/fuzz/http_response_fuzz.cpp). Internal to src/bootstrap.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/deadline.h"
#include "base/fd.h"

namespace gradwire::bootstrap::http {

// Caps on what a server may send: a response head, and a body or one
// streamed message (etcd itself caps a request at 1.5 MiB by default).
inline constexpr size_t kMaxHeadBytes = 64 * 1024;
inline constexpr size_t kMaxBodyBytes = 64u << 20;

struct ResponseHead {
  int status = 0;
  std::optional<uint64_t> content_length;
  bool chunked = false;
  bool close = false;  // "Connection: close", or an HTTP/1.0 answer
  size_t size = 0;     // bytes of the head, the blank line included
};
// The head at the start of `bytes`: nullopt with `*complete` false while
// "\r\n\r\n" has not arrived yet (and `bytes` is under kMaxHeadBytes);
// nullopt with `*complete` true and `*error` set for a malformed head.
std::optional<ResponseHead> parse_head(std::string_view bytes, bool* complete, std::string* error);

// Decodes a chunked body as it arrives (RFC 9112 7.1; extensions and
// trailers are skipped).
class ChunkedDecoder {
 public:
  enum class State { More, Done, Error };
  // Consumes a prefix of `in` (`*used` bytes), appending its data to `out`.
  State feed(std::string_view in, size_t* used, std::string* out);
  const std::string& error() const { return error_; }

 private:
  enum class Phase { Size, Data, DataEnd, Trailer, Done };
  State fail(const char* why);
  Phase phase_ = Phase::Size;
  uint64_t left_ = 0;  // of the current chunk
  std::string line_;   // a size or trailer line being read
  std::string error_;
};

// NotHttp: the peer answered, but with bytes that are no HTTP/1.x response
// (another protocol on that port): retrying it cannot help.
enum class Status { Ok, TimedOut, Failed, NotHttp };

// One client connection (kept alive between requests).
class Connection {
 public:
  explicit Connection(UniqueFd fd) : fd_(std::move(fd)) {}

  // Sends "POST path" with `body` (application/json). `host` is the Host
  // header ("10.0.0.5:2379").
  Status post(std::string_view host, std::string_view path, std::string_view body,
              Deadline deadline, std::string* error);
  // Reads the answer's head.
  Status read_head(ResponseHead* head, Deadline deadline, std::string* error);
  // Reads a whole (non-streamed) body after read_head().
  Status read_body(const ResponseHead& head, std::string* body, Deadline deadline,
                   std::string* error);
  // A chunked answer read as a stream of '\n'-terminated messages: the next
  // one, without its newline. TimedOut leaves the stream usable.
  Status next_message(std::string* message, Deadline deadline, std::string* error);
  // False once the server asked to close, or a request failed midway.
  bool reusable() const { return reusable_; }
  int fd() const { return fd_.get(); }

 private:
  Status fill(Deadline deadline, std::string* error);  // more raw bytes into buf_
  UniqueFd fd_;
  std::string buf_;      // raw bytes received and not yet consumed
  ChunkedDecoder chunks_;
  std::string decoded_;  // a stream's decoded bytes not yet handed out
  bool stream_done_ = false;
  bool reusable_ = true;
};

}  // namespace gradwire::bootstrap::http
