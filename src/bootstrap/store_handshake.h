// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Both halves of the store handshake (Note [store handshake] in
// store_wire.h): the server's as a state machine fed with received bytes
// (no socket, so the fuzzer drives it directly), the client's as one
// blocking call on a connected socket. Internal to src/bootstrap.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "bootstrap/store_wire.h"
#include "base/deadline.h"

namespace gradwire::bootstrap::tcp_store {

// How long the server gives a new connection to finish the handshake, and
// the longest a client waits for the server's part of it.
constexpr std::chrono::milliseconds kHandshakeTimeout{10000};

class ServerHandshake {
 public:
  // `secret` empty: no authentication (every client that speaks our
  // protocol version is let in). The secret must outlive this object.
  explicit ServerHandshake(const std::string& secret);

  enum class Outcome { Pending, Ready, Refused };
  struct Step {
    Outcome outcome = Outcome::Pending;
    size_t consumed = 0;  // bytes of `in` that belonged to the handshake
    std::string reply;    // to send to the client (a refusal too, when it has one)
    std::string why;      // Refused: the reason, for the server's log
  };
  // Feeds the bytes received and not yet consumed. Ready: the bytes after
  // `consumed` are the client's first command frames.
  Step feed(std::string_view in);

 private:
  enum class State { Hello, Proof, Done };
  const std::string& secret_;
  State state_ = State::Hello;
  Nonce client_nonce_{};
  Nonce server_nonce_{};
};

// The client's half on a connected socket `fd`, within `deadline`. Returns
// when the connection may carry commands; otherwise raises
//   Protocol         the peer is not a gradwire store, speaks another
//                    protocol version (both named) or sent malformed bytes;
//   Unauthenticated  a secret mismatch, this process has no secret and the
//                    store requires one, or the store does not authenticate
//                    although this process has a secret;
//   Timeout          no answer by `deadline`;
//   PeerLost         the connection closed (most likely: the store refused us).
// `where` is "host:port" for the messages.
void client_handshake(int fd, const std::string& where, const std::string& secret,
                      Deadline deadline);

}  // namespace gradwire::bootstrap::tcp_store
