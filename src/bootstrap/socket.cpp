// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "bootstrap/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <climits>
#include <cstring>

#include <fmt/format.h>

#include "base/env_values.h"
#include "base/raise.h"

namespace gradwire::bootstrap {

std::string host_port(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return fmt::format("[{}]:{}", host, port);
  return fmt::format("{}:{}", host, port);
}

std::string SockAddr::to_string() const {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
    return host_port(buf, ntohs(a->sin_port));
  }
  if (family == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
    return host_port(buf, ntohs(a->sin6_port));
  }
  return "<unknown address family>";
}

bool is_unspecified(const SockAddr& a) {
  if (a.family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(&a.addr)->sin_addr.s_addr == htonl(INADDR_ANY);
  }
  if (a.family == AF_INET6) {
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&a.addr)->sin6_addr);
  }
  return false;
}

std::vector<SockAddr> resolve_tcp(const std::string& host, uint16_t port, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  // No AI_PASSIVE and no AI_ADDRCONFIG: we want exactly the addresses `host`
  // names (AI_ADDRCONFIG would hide 127.0.0.1 on a host without a
  // non-loopback IPv4 address).
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  std::vector<SockAddr> out;
  if (rc != 0) {
    if (error) *error = rc == EAI_SYSTEM ? errno_text(errno) : gai_strerror(rc);
    return out;
  }
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    if (ai->ai_addrlen > sizeof(sockaddr_storage)) continue;
    SockAddr a;
    std::memcpy(&a.addr, ai->ai_addr, ai->ai_addrlen);
    a.len = ai->ai_addrlen;
    a.family = ai->ai_family;
    bool dup = false;
    for (const auto& b : out) {
      dup = dup || (b.len == a.len && std::memcmp(&b.addr, &a.addr, a.len) == 0);
    }
    if (!dup) out.push_back(a);
  }
  ::freeaddrinfo(res);
  if (out.empty() && error) *error = "no TCP address";
  return out;
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

int poll_timeout_ms(Deadline deadline) {
  auto now = Clock::now();
  if (now >= deadline.at()) return 0;
  // Round up so that a poll never returns just before the deadline and
  // spins; cap so that Deadline::never() fits in an int.
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline.at() - now).count();
  return left > INT_MAX ? INT_MAX : int(left);
}

namespace {
// Waits for `events` on fd. Returns 1 ready, 0 timed out, -1 error (errno).
int wait_fd(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, poll_timeout_ms(deadline));
    if (rc > 0) return 1;
    if (rc == 0) {
      if (deadline.expired()) return 0;
      continue;  // INT_MAX cap reached on a never-deadline
    }
    if (errno == EINTR) continue;
    return -1;
  }
}
}  // namespace

IoStatus send_all(int fd, const void* data, size_t len, Deadline deadline, int* err) {
  auto* p = static_cast<const uint8_t*>(data);
  while (len > 0) {
    ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int w = wait_fd(fd, POLLOUT, deadline);
      if (w == 0) return IoStatus::TimedOut;
      if (w < 0) {
        *err = errno;
        return IoStatus::Error;
      }
      continue;
    }
    *err = n < 0 ? errno : EPIPE;
    return (*err == EPIPE || *err == ECONNRESET) ? IoStatus::Closed : IoStatus::Error;
  }
  return IoStatus::Ok;
}

IoStatus recv_all(int fd, void* data, size_t len, Deadline deadline, int* err) {
  auto* p = static_cast<uint8_t*>(data);
  while (len > 0) {
    ssize_t n = ::recv(fd, p, len, 0);
    if (n > 0) {
      p += n;
      len -= size_t(n);
      continue;
    }
    if (n == 0) return IoStatus::Closed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      int w = wait_fd(fd, POLLIN, deadline);
      if (w == 0) return IoStatus::TimedOut;
      if (w < 0) {
        *err = errno;
        return IoStatus::Error;
      }
      continue;
    }
    *err = errno;
    return errno == ECONNRESET ? IoStatus::Closed : IoStatus::Error;
  }
  return IoStatus::Ok;
}

std::chrono::milliseconds liveness_timeout() {
  // Read for every new connection and server (a few per rank and job:
  // not worth a cache).
  std::chrono::milliseconds t = kDefaultLivenessTimeout;
  if (const char* v = std::getenv("GRADWIRE_LIVENESS_S"); v && *v) {
    t = gradwire::env::parse_seconds("GRADWIRE_LIVENESS_S", v, /*zero_allowed=*/false);
    if (t < std::chrono::seconds(1)) {
      raise(ErrorCode::InvalidArgument, "GRADWIRE_LIVENESS_S='{}' is below 1 s: TCP keepalive "
            "probes at most once a second, so a shorter timeout would report live ranks lost", v);
    }
  }
  return t;
}

void watch_liveness(int fd, std::chrono::milliseconds timeout) {
  // Probe an idle connection from a fifth of the timeout on, every fifth
  // (at least once a second): TCP_USER_TIMEOUT, which with keepalive also
  // bounds the unanswered probes, ends it at the timeout.
  const int probe_s = int(std::max<int64_t>(1, timeout.count() / 5000));
  int one = 1, idle = probe_s, interval = probe_s, count = 4;
  unsigned user_timeout_ms = unsigned(std::min<int64_t>(timeout.count(), UINT_MAX));
  // Best effort: a socket that refuses these still works, it is only
  // watched less closely.
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof(user_timeout_ms));
}

UniqueFd try_connect(const SockAddr& addr, Deadline deadline, int* err) {
  UniqueFd fd(::socket(addr.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, IPPROTO_TCP));
  if (!fd) {
    *err = errno;
    return {};
  }
  int one = 1;
  // Store frames are tiny request/response pairs; Nagle would add 40 ms.
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  watch_liveness(fd.get(), liveness_timeout());  // Note [store liveness]
  int rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr.addr), addr.len);
  if (rc == 0) return fd;
  if (errno != EINPROGRESS && errno != EINTR) {
    *err = errno;
    return {};
  }
  int w = wait_fd(fd.get(), POLLOUT, deadline);
  if (w == 0) {
    *err = ETIMEDOUT;
    return {};
  }
  if (w < 0) {
    *err = errno;
    return {};
  }
  int so_error = 0;
  socklen_t sl = sizeof(so_error);
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &sl) != 0) so_error = errno;
  if (so_error != 0) {
    *err = so_error;
    return {};
  }
  return fd;
}

}  // namespace gradwire::bootstrap
