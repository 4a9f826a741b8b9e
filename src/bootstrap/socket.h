// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Small POSIX socket helpers for the bootstrap stores: an owning fd, name
// resolution, and send/recv loops that honour a Deadline
// (Note [nothing blocks forever]). Internal to src/bootstrap.
#pragma once

#include "base/fd.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/deadline.h"

namespace gradwire::bootstrap {


// One resolved socket address.
struct SockAddr {
  sockaddr_storage addr{};
  socklen_t len = 0;
  int family = 0;
  std::string to_string() const;  // "127.0.0.1:29500", "[::1]:29500"
};

// getaddrinfo(host, port) for TCP. `error` receives gai_strerror text on
// failure (and the result is empty). getaddrinfo itself cannot be given a
// deadline; with numeric addresses or /etc/hosts it does not block.
std::vector<SockAddr> resolve_tcp(const std::string& host, uint16_t port, std::string* error);

// True for 0.0.0.0 and ::, the addresses that listen on every interface.
bool is_unspecified(const SockAddr& a);

// "host:port", with brackets around IPv6 literals.
std::string host_port(const std::string& host, uint16_t port);

void set_nonblocking(int fd);

// Result of an I/O step that can wait.
enum class IoStatus { Ok, TimedOut, Closed, Error };

// Sends all of [data, data+len) before `deadline`. Never raises SIGPIPE.
// On Error, *err holds errno.
IoStatus send_all(int fd, const void* data, size_t len, Deadline deadline, int* err);
// Receives exactly `len` bytes before `deadline`. Closed: orderly EOF.
IoStatus recv_all(int fd, void* data, size_t len, Deadline deadline, int* err);

// One non-blocking connect attempt to `addr`, waiting at most until
// `deadline`. Returns a connected, blocking-mode-agnostic (non-blocking) fd,
// or an invalid fd with *err set (ETIMEDOUT when the deadline passed).
UniqueFd try_connect(const SockAddr& addr, Deadline deadline, int* err);

// Note [store liveness]: a store connection whose peer shows no sign of
// life (no data, no ACK, no answer to a keepalive probe) for
// liveness_timeout() is reported dead by the kernel (the next read or poll
// fails with ETIMEDOUT). Without it, a peer host that vanished (power, a
// dead link: nothing is sent, not even a FIN) left a waiting rank blocked
// for its whole deadline and rank 0 holding the dead rank's connection
// forever. Keepalive probes an idle connection; TCP_USER_TIMEOUT bounds
// unacknowledged data and, with keepalive, the probing itself. A live peer's
// kernel answers probes even while the process is stopped or busy, so a
// slow rank is never taken for a dead one.
// The timeout is GRADWIRE_LIVENESS_S (seconds, at least 1; default 10): the
// time a survivor needs to report a silent host as PeerLost (Note [a lost
// rank on another host] in runtime/watchdog.cpp). Shorter finds a dead
// host sooner; it must stay longer than the network's worst stall (a
// switch failover, a congested link that drops a probe or two), or live
// ranks are declared lost. A bad value is an InvalidArgument naming the
// variable, raised on the thread that connects or creates the server.
constexpr std::chrono::seconds kDefaultLivenessTimeout{10};
std::chrono::milliseconds liveness_timeout();
void watch_liveness(int fd, std::chrono::milliseconds timeout);

// Milliseconds to hand to poll() so that it returns by `deadline`
// (clamped to int; -1 never happens because deadlines are finite or capped).
int poll_timeout_ms(Deadline deadline);

// Big-endian u32 encode/decode for the wire format.
inline void put_u32(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v >> 24);
  p[1] = uint8_t(v >> 16);
  p[2] = uint8_t(v >> 8);
  p[3] = uint8_t(v);
}
inline uint32_t get_u32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

}  // namespace gradwire::bootstrap
