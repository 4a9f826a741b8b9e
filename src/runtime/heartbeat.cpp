// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "runtime/heartbeat.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <random>

#include "base/logging.h"
#include "base/raise.h"

namespace gradwire {

namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr uint32_t kMagic = 0x47574842;  // "GWHB"
constexpr uint8_t kVersion = 1;

// One datagram: magic, version, flags (1: goodbye), the sender's rank, the
// receiver's nonce (so that datagrams of another world or job that reach
// this port are ignored), and the sender's nonce.
struct Datagram {
  uint32_t magic;
  uint8_t version;
  uint8_t flags;
  uint16_t reserved;
  int32_t rank;
  uint32_t pad;
  uint64_t to_nonce;
  uint64_t from_nonce;
  uint64_t spare[2];
};
static_assert(sizeof(Datagram) == 48);

std::string split_next(std::string_view& rest) {
  const size_t at = rest.find('|');
  std::string out(rest.substr(0, at));
  rest = at == std::string_view::npos ? std::string_view() : rest.substr(at + 1);
  return out;
}

template <typename T>
std::optional<T> number(const std::string& t) {
  T x{};
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), x);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size()) return std::nullopt;
  return x;
}

bool sockaddr_of(const std::string& ip, uint16_t port, sockaddr_storage* out, socklen_t* len) {
  std::memset(out, 0, sizeof *out);
  auto* v4 = reinterpret_cast<sockaddr_in*>(out);
  if (::inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    *len = sizeof(sockaddr_in);
    return true;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(out);
  if (::inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    *len = sizeof(sockaddr_in6);
    return true;
  }
  return false;
}

}  // namespace

std::string Heartbeats::encode(const Peer& p) {
  return fmt::format("{}|{}|{}|{}|{}", p.ip, p.port, p.nonce, p.pid, p.host);
}

std::optional<Heartbeats::Peer> Heartbeats::decode(std::string_view text) {
  if (text.size() > 512) return std::nullopt;
  Peer p;
  std::string_view rest = text;
  p.ip = split_next(rest);
  const auto port = number<uint16_t>(split_next(rest));
  const auto nonce = number<uint64_t>(split_next(rest));
  const auto pid = number<int>(split_next(rest));
  for (char c : rest) p.host += (c >= 0x20 && c <= 0x7e) ? c : '?';
  sockaddr_storage ss;
  socklen_t len = 0;
  if (!port || *port == 0 || !nonce || !pid || !sockaddr_of(p.ip, *port, &ss, &len)) {
    return std::nullopt;
  }
  p.port = *port;
  p.nonce = *nonce;
  p.pid = *pid;
  return p;
}

std::string Heartbeats::local_ip(const std::string& fabric_address, const std::string& iface) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (!iface.empty() && iface != "lo") {
    ifaddrs* list = nullptr;
    std::string found;
    if (::getifaddrs(&list) == 0) {
      for (ifaddrs* a = list; a; a = a->ifa_next) {
        if (!a->ifa_addr || iface != a->ifa_name) continue;
        if (a->ifa_addr->sa_family == AF_INET) {
          ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
          found = buf;
          break;
        }
        if (a->ifa_addr->sa_family == AF_INET6 && found.empty()) {
          ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr, buf, sizeof buf);
          found = buf;
        }
      }
      ::freeifaddrs(list);
    }
    return found;
  }
  // The socket providers name an endpoint by its sockaddr (one per lane on
  // `net`, all alike): sockaddr_in (16 bytes) or sockaddr_in6 (28).
  sa_family_t family = 0;
  if (fabric_address.size() >= sizeof family) std::memcpy(&family, fabric_address.data(), sizeof family);
  if (family == AF_INET && fabric_address.size() >= sizeof(sockaddr_in) &&
      fabric_address.size() % sizeof(sockaddr_in) == 0) {
    sockaddr_in a;
    std::memcpy(&a, fabric_address.data(), sizeof a);
    if (a.sin_addr.s_addr == htonl(INADDR_LOOPBACK) || a.sin_addr.s_addr == 0) return {};
    ::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
    return buf;
  }
  if (family == AF_INET6 && fabric_address.size() >= sizeof(sockaddr_in6) &&
      fabric_address.size() % sizeof(sockaddr_in6) == 0) {
    sockaddr_in6 a;
    std::memcpy(&a, fabric_address.data(), sizeof a);
    if (IN6_IS_ADDR_LOOPBACK(&a.sin6_addr) || IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr)) return {};
    ::inet_ntop(AF_INET6, &a.sin6_addr, buf, sizeof buf);
    return buf;
  }
  return {};
}

Heartbeats::Heartbeats(int rank, std::vector<bool> watched, milliseconds timeout,
                       const std::string& ip)
    : rank_(rank), watched_(std::move(watched)), timeout_(timeout), peers_(watched_.size()) {
  sockaddr_storage ss;
  socklen_t len = 0;
  if (!sockaddr_of(ip, 0, &ss, &len)) {
    raise(ErrorCode::InvalidArgument, "rank {}: heartbeats: '{}' is not an IP address", rank, ip);
  }
  fd_.reset(::socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd_ || ::bind(fd_.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0 ||
      ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    raise(ErrorCode::Transport, "rank {}: heartbeats: cannot bind a UDP socket on {}: {}", rank,
          ip, errno_text(errno));
  }
  self_.ip = ip;
  self_.port = ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                             : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  self_.nonce = (uint64_t(std::random_device{}()) << 32) | std::random_device{}();
  if (self_.nonce == 0) self_.nonce = 1;
  self_.pid = int(::getpid());
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "?");
  self_.host = host;
  thread_ = std::thread([this] { loop(); });
}

Heartbeats::~Heartbeats() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  send_all(/*goodbye=*/true);
}

std::vector<int> Heartbeats::unknown() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<int> out;
  for (size_t r = 0; r < peers_.size(); ++r) {
    if (watched_[r] && int(r) != rank_ && !peers_[r].peer) out.push_back(int(r));
  }
  return out;
}

void Heartbeats::set_peer(int rank, const Peer& peer) {
  std::lock_guard<std::mutex> lk(mu_);
  if (rank < 0 || size_t(rank) >= peers_.size() || !watched_[size_t(rank)]) return;
  peers_[size_t(rank)].peer = peer;
}

std::vector<std::pair<int, Heartbeats::Peer>> Heartbeats::silent() const {
  const auto now = steady_clock::now();
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::pair<int, Peer>> out;
  for (size_t r = 0; r < peers_.size(); ++r) {
    const State& s = peers_[r];
    if (s.armed && !s.left && s.peer && now - s.last >= timeout_) out.emplace_back(int(r), *s.peer);
  }
  return out;
}

void Heartbeats::send_all(bool goodbye) {
  std::vector<Peer> to;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const State& s : peers_) {
      if (s.peer && !s.left) to.push_back(*s.peer);
    }
  }
  for (const Peer& p : to) {
    Datagram d{};
    d.magic = kMagic;
    d.version = kVersion;
    d.flags = goodbye ? 1 : 0;
    d.rank = rank_;
    d.to_nonce = p.nonce;
    d.from_nonce = self_.nonce;
    sockaddr_storage ss;
    socklen_t len = 0;
    if (!sockaddr_of(p.ip, p.port, &ss, &len)) continue;
    // Best effort: a full socket buffer or an unreachable peer is what the
    // silence is there to find.
    (void)::sendto(fd_.get(), &d, sizeof d, MSG_DONTWAIT | MSG_NOSIGNAL,
                   reinterpret_cast<sockaddr*>(&ss), len);
  }
}

void Heartbeats::loop() {
  const milliseconds period = std::max(milliseconds(20), timeout_ / 10);
  auto next_send = steady_clock::now();
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      if (stop_) return;
    }
    const auto now = steady_clock::now();
    if (now >= next_send) {
      send_all(false);
      next_send = now + period;
    }
    pollfd p{fd_.get(), POLLIN, 0};
    const int wait = int(std::chrono::duration_cast<milliseconds>(next_send - steady_clock::now()).count());
    if (::poll(&p, 1, std::max(1, wait)) <= 0) continue;
    for (;;) {
      Datagram d{};
      const ssize_t n = ::recv(fd_.get(), &d, sizeof d, MSG_DONTWAIT);
      if (n < 0) break;
      if (n != ssize_t(sizeof d) || d.magic != kMagic || d.version != kVersion ||
          d.to_nonce != self_.nonce || d.rank < 0 || size_t(d.rank) >= peers_.size()) {
        continue;
      }
      std::lock_guard<std::mutex> lk(mu_);
      State& s = peers_[size_t(d.rank)];
      // Only the peer the store named (its nonce), never a stale process
      // that reused its rank in an earlier world.
      if (!s.peer || s.peer->nonce != d.from_nonce) continue;
      if (d.flags & 1) {
        s.left = true;
      } else {
        s.armed = true;
        s.last = steady_clock::now();
      }
    }
  }
}

}  // namespace gradwire
