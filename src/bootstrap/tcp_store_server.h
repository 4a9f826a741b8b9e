// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The TCP store's wire format and its server. Internal to src/bootstrap;
// Store users go through make_tcp_store() in store.h.
//
// Note [tcp store protocol]
// Every request is one frame:
//     u8 command | u32 key length | u32 value length | key bytes | value bytes
// and every response is
//     u8 status  | u32 value length | value bytes
// with lengths big-endian. Keys are 1..4 KiB, values at most 16 MiB; the
// server checks the 9-byte header before reading the body, so an oversized
// or unknown frame costs nothing: the client is dropped with a warning.
//   SET   key value -> OK            (overwrites)
//   GET   key       -> FOUND value | NOT_FOUND       (answers at once)
//   WAIT  key ms    -> FOUND value | NOT_FOUND
//                      (value = u32 timeout in ms; parked until the key is
//                      set or the timeout passes; 0xFFFFFFFF = no timeout)
//   WILL  key value -> OK            (this connection's last will; an empty
//                      value withdraws it: Note [a connection's last will])
// Why WAIT parks on the server instead of the client polling GET: with N
// ranks polling rank 0 with backoff, the server handles O(N * polls)
// requests and every get pays up to one backoff period of extra latency
// (up to 1 s at the cap); a parked request costs one map entry and answers
// the moment the SET lands.
// Why the server, not only the client, enforces the WAIT timeout: the
// connection stays in step (one request, one answer), so after a timeout the
// client keeps using it, e.g. to check the other ranks' keys for its error
// message, even when rank 0 is already shutting down and no longer accepts
// connections. The client still stops reading at its deadline plus a grace
// period and then drops the connection, so a stuck server cannot hang it.
// Each connection has at most one request in flight: the server does not
// read the next frame until the previous answer is fully written, which
// also bounds the memory a misbehaving client can make it hold.
// Before its first frame every connection passes the store handshake
// (version check and, with a job secret, HMAC challenge-response: Note
// [store handshake] in store_wire.h); the frame parsers are the pure
// functions of store_wire.h.
//
// Note [a connection's last will]
// A rank on another host that dies was found only by the collective
// deadline: its peers' sockets to it may stay silent (a host that loses
// power or its link sends nothing), and nothing else watches it. Every rank
// keeps a connection to the store on rank 0, so the store watches it: a
// connection may leave a will (WILL key value), and when that connection
// ends without withdrawing it (the process died, so the kernel closed its
// socket, or its host or the link went silent, which TCP keepalive on the
// server's side turns into an error within liveness_timeout()) the server
// writes value to key, unless key already exists (the first loss stays).
// A client that closes cleanly withdraws its will first (WILL key ""). The
// server stopping (rank 0 leaving) fires no will. What a will says and who
// reads it is the runtime's business (Note [a lost rank on another host] in
// src/runtime/watchdog.cpp); the store only keeps the promise.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/socket.h"
#include "bootstrap/store_wire.h"

namespace gradwire::bootstrap::tcp_store {

// Listens on every address `host` resolves to (never a wildcard unless host
// is one) and serves the store on a background thread until destroyed.
class Server {
 public:
  // Throws InvalidArgument naming host:port and the errno text when no
  // address can be bound (e.g. the port is in use). port 0 picks a free one.
  // `secret` empty: clients are not authenticated (the version is still
  // checked).
  Server(const std::string& host, uint16_t port, std::chrono::milliseconds linger,
         std::string secret = {});
  // Stops accepting, then keeps serving the connected clients until they
  // have all disconnected or `linger` has passed, so that rank 0 leaving
  // first does not pull the store from under ranks still reading its keys.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  uint16_t port() const { return port_; }

 private:
  void run() noexcept;

  std::string host_;
  uint16_t port_;
  std::chrono::milliseconds linger_;
  std::string secret_;
  // Note [store liveness]: read on the thread that creates the server, so
  // that a bad GRADWIRE_LIVENESS_S is raised there, not in the loop.
  std::chrono::milliseconds liveness_;
  std::vector<UniqueFd> listeners_;
  UniqueFd wake_;  // eventfd: the destructor writes to it to end poll()
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace gradwire::bootstrap::tcp_store
