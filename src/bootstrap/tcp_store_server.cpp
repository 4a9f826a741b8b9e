// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The TCP store server (Note [tcp store protocol] in tcp_store_server.h):
// one thread, one poll() over the listeners, the wake eventfd and every
// client. It never throws out of its thread and never trusts a length:
// every byte a client sends goes through the pure parsers of store_wire.h,
// and no command is parsed before the client passed the store handshake.
#include "bootstrap/tcp_store_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <memory>
#include <set>
#include <unordered_map>

#include "bootstrap/store_handshake.h"
#include "base/raise.h"
#include "base/logging.h"

namespace gradwire::bootstrap::tcp_store {

namespace {

UniqueFd bind_listener(const SockAddr& addr, int* err) {
  UniqueFd fd(::socket(addr.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, IPPROTO_TCP));
  if (!fd) {
    *err = errno;
    return {};
  }
  int one = 1;
  // A restarted job can rebind MASTER_PORT while the last run's sockets
  // sit in TIME_WAIT.
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (addr.family == AF_INET6) {
    // A specific IPv6 address gets exactly that address; "::" keeps the
    // kernel's dual-stack default, as a wildcard host asks for.
    auto* a6 = reinterpret_cast<const sockaddr_in6*>(&addr.addr);
    if (!IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr)) {
      ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    }
  }
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr.addr), addr.len) != 0 ||
      ::listen(fd.get(), SOMAXCONN) != 0) {
    *err = errno;
    return {};
  }
  return fd;
}

uint16_t bound_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

void set_port(SockAddr& a, uint16_t port) {
  if (a.family == AF_INET) reinterpret_cast<sockaddr_in*>(&a.addr)->sin_port = htons(port);
  if (a.family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&a.addr)->sin6_port = htons(port);
}

struct Client {
  UniqueFd fd;
  std::string peer;
  std::string source;  // the peer's address without its port
  // Note [store connection caps]: when accepted, and whether it ever sent
  // a byte (a silent connection may be evicted).
  Clock::time_point accepted_at{};
  bool spoke = false;
  // Until the handshake is over: its state, and when the client is dropped
  // if it has not finished it (a client that connects and says nothing
  // must not hold a descriptor forever).
  std::unique_ptr<ServerHandshake> handshake;
  Clock::time_point handshake_until{};
  std::string in;     // bytes received, not yet parsed
  std::string out;    // response bytes not yet written
  size_t out_off = 0;
  bool parked = false;  // a WAIT is pending; no further frames are read
  std::string parked_key;
  Clock::time_point wait_until{};
  // Note [a connection's last will]: empty when none was left.
  std::string will_key, will_value;
  // Read the next frame only when the previous answer is out (see Note).
  bool can_read() const { return !parked && out.size() == out_off; }
};

std::string peer_name(const sockaddr_storage& ss) {
  SockAddr a;
  a.addr = ss;
  a.family = ss.ss_family;
  return a.to_string();
}

std::string source_name(const sockaddr_storage& ss) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, text,
                sizeof(text));
  } else if (ss.ss_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, text,
                sizeof(text));
  }
  return text;
}

// Note [store connection caps]
// A connection that has not finished the store handshake is nobody yet: it
// costs a descriptor and proves nothing. Without a cap, 1,100 idle
// connections filled rank 0's descriptor table (ulimit -n 1024) until the
// handshake timeout dropped them, and a real rank waited 6.9 s in the
// listen backlog (issue 17). So:
//   * the server holds at most max_pending() connections in the handshake,
//     a quarter of the descriptor limit (64..kMaxPending), leaving three
//     quarters of the table to the ranks; at that cap it evicts one, or,
//     if none may be evicted, stops accepting for 10 ms (the rest wait in
//     the listen backlog, which costs no descriptor);
//   * only a silent connection may be evicted: one that has sent nothing
//     (nothing read, nothing waiting) for kQuietGrace. A real rank sends
//     its hello right after connecting, so a start-up burst of real ranks,
//     however large, is only ever made to wait, never dropped (dropping
//     one fails its start-up);
//   * a new connection from a source address with kPendingPerSource in the
//     handshake evicts that source's oldest silent one first, so a flood
//     from one address displaces itself before anybody else.
// Evictions and accept failures are logged like refusals: at most 10 lines
// per 10 s. Clients past the handshake are not capped: with a job secret
// they proved it; without one the store trusts its network anyway (Note
// [store handshake]).
constexpr size_t kPendingPerSource = 64;
constexpr size_t kMaxPending = 512;
constexpr std::chrono::milliseconds kQuietGrace{50};

size_t max_pending() {
  rlimit l{};
  if (::getrlimit(RLIMIT_NOFILE, &l) != 0 || l.rlim_cur == RLIM_INFINITY) return kMaxPending;
  return std::clamp<size_t>(size_t(l.rlim_cur) / 4, kPendingPerSource, kMaxPending);
}

// All mutable state of the server thread.
class Loop {
 public:
  Loop(std::string where, const std::string& secret, std::chrono::milliseconds liveness)
      : where_(std::move(where)), secret_(secret), liveness_(liveness) {}

  void accept_from(int listener) {
    for (;;) {
      // Note [store connection caps]: the limit may change at run time.
      if (pending_total_ >= max_pending() && !evict_silent(nullptr)) {
        accept_paused_until_ = Clock::now() + std::chrono::milliseconds(10);
        return;
      }
      sockaddr_storage ss{};
      socklen_t len = sizeof(ss);
      int fd = ::accept4(listener, reinterpret_cast<sockaddr*>(&ss), &len,
                         SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors (taken by something else in this process:
          // the store's own use is capped): back off instead of spinning
          // on a listener that stays readable.
          warn_limited(fmt::format("accept failed: {}; pausing accepts for 100 ms",
                                   errno_text(errno)));
          accept_paused_until_ = Clock::now() + std::chrono::milliseconds(100);
        }
        return;  // EAGAIN: drained
      }
      Client c;
      c.fd.reset(fd);
      watch_liveness(fd, liveness_);  // Note [store liveness]
      c.peer = peer_name(ss);
      c.source = source_name(ss);
      c.handshake = std::make_unique<ServerHandshake>(secret_);
      c.handshake_until = Clock::now() + kHandshakeTimeout;
      c.accepted_at = Clock::now();
      log().debug("tcp store {}: client {} connected", where_, c.peer);
      if (auto mine = pending_.find(c.source);
          mine != pending_.end() && mine->second.size() >= kPendingPerSource) {
        evict_silent(&mine->second);
      }
      const uint64_t id = next_id_++;
      pending_[c.source].insert(id);
      ++pending_total_;
      clients_.emplace(id, std::move(c));
    }
  }

  bool accepts_paused() const { return Clock::now() < accept_paused_until_; }

  // Handles poll() results for one client; false means drop it.
  bool service(uint64_t id, Client& c, short revents) {
    if (revents & POLLNVAL) return false;
    if ((revents & POLLOUT) && !flush(c)) return false;
    if (revents & POLLIN) {
      if (!c.can_read()) return !(revents & (POLLHUP | POLLERR));
      char buf[64 * 1024];
      ssize_t n = ::recv(c.fd.get(), buf, sizeof(buf), 0);
      if (n == 0) return false;
      if (n < 0) return errno == EAGAIN || errno == EINTR;
      c.spoke = true;
      c.in.append(buf, size_t(n));
      return process(id, c);
    }
    // Hang-up with nothing left to read, or a parked client going away.
    if (revents & (POLLHUP | POLLERR | POLLRDHUP)) return false;
    return true;
  }

  // Parses frames that arrived behind an answer that has since gone out
  // (only a client that pipelines requests has any). False: drop it.
  bool pump(uint64_t id, Client& c) {
    if (!c.can_read() || c.in.empty()) return true;
    return process(id, c);
  }

  // A connection ends: its will, if it left one, is carried out (Note [a
  // connection's last will]; the first value written to a key stays).
  void drop(uint64_t id) {
    auto it = clients_.find(id);
    if (it == clients_.end()) return;
    if (it->second.parked) unpark(id, it->second);
    if (it->second.handshake) settle(id, it->second);
    std::string key = std::move(it->second.will_key), value = std::move(it->second.will_value);
    const std::string peer = it->second.peer;
    clients_.erase(it);
    if (!key.empty() && data_.find(key) == data_.end()) {
      log().warn("tcp store {}: client {} went away without withdrawing its will; writing "
                 "key '{}'", where_, peer, key);
      set(key, std::move(value));
    }
  }

  size_t pending() const { return pending_total_; }

  // Answers NOT_FOUND to every WAIT whose timeout has passed and lists in
  // `dead` the clients whose handshake time is up; returns when the next
  // of either falls due (time_point::max() if none).
  Clock::time_point expire(std::vector<uint64_t>* dead) {
    auto now = Clock::now();
    auto next = Clock::time_point::max();
    for (auto& [id, c] : clients_) {
      if (c.handshake) {
        if (c.handshake_until <= now) {
          refused(c, "no complete store handshake within 10 s");
          dead->push_back(id);
        } else {
          next = std::min(next, c.handshake_until);
        }
        continue;
      }
      if (!c.parked) continue;
      if (c.wait_until <= now) {
        unpark(id, c);
        respond(c, kNotFound, {});
        flush(c);
      } else {
        next = std::min(next, c.wait_until);
      }
    }
    return next;
  }

  std::unordered_map<uint64_t, Client>& clients() { return clients_; }

 private:
  // Runs the handshake, then parses and answers complete frames while the
  // client may be read.
  bool process(uint64_t id, Client& c) {
    size_t off = 0;
    if (c.handshake) {
      ServerHandshake::Step step = c.handshake->feed(c.in);
      c.out += step.reply;
      off = step.consumed;
      if (step.outcome == ServerHandshake::Outcome::Refused) {
        refused(c, step.why);
        flush(c);  // the refusal tells the client why; best effort
        return false;
      }
      if (step.outcome == ServerHandshake::Outcome::Pending) {
        c.in.erase(0, off);
        return flush(c);
      }
      settle(id, c);
      c.handshake.reset();
      log().debug("tcp store {}: client {} passed the handshake{}", where_, c.peer,
                  secret_.empty() ? "" : " (proved the job secret)");
    }
    while (c.can_read()) {
      const RequestParse r = parse_request(std::string_view(c.in).substr(off));
      if (r.status == Parse::NeedMore) break;
      if (r.status == Parse::Bad) {
        log().warn("tcp store {}: dropping client {}: malformed frame ({}); is it running the "
                   "same gradwire?",
                   where_, c.peer, r.error);
        return false;
      }
      const Request& q = r.request;
      std::string key(q.key);
      if (q.command == kSet) {
        respond(c, kOk, {});
        set(key, std::string(q.value));
      } else if (q.command == kWill) {
        respond(c, kOk, {});
        c.will_key = q.value.empty() ? std::string() : key;
        c.will_value = std::string(q.value);
      } else {
        auto it = data_.find(key);
        if (it != data_.end()) {
          respond(c, kFound, it->second);
        } else if (q.command == kGet) {
          respond(c, kNotFound, {});
        } else {
          const uint32_t ms = q.wait_ms;
          if (ms == 0) {
            respond(c, kNotFound, {});
          } else {
            c.parked = true;
            c.parked_key = key;
            c.wait_until = ms == kWaitForever ? Clock::time_point::max()
                                              : Clock::now() + std::chrono::milliseconds(ms);
            waiters_[key].push_back(id);
          }
        }
      }
      off += r.consumed;
    }
    c.in.erase(0, off);
    return flush(c);
  }

  // Evicts the oldest silent connection in the handshake (Note [store
  // connection caps]) among `among` (one source's), or among all; false
  // if there is none.
  bool evict_silent(const std::set<uint64_t>* among) {
    const auto now = Clock::now();
    auto silent = [&](uint64_t id) {
      auto it = clients_.find(id);
      if (it == clients_.end()) return false;
      const Client& c = it->second;
      int waiting = 0;
      return c.handshake && !c.spoke && now - c.accepted_at >= kQuietGrace &&
             ::ioctl(c.fd.get(), FIONREAD, &waiting) == 0 && waiting == 0;
    };
    uint64_t oldest = 0;
    auto consider = [&](const std::set<uint64_t>& ids) {
      for (uint64_t id : ids) {  // oldest first
        if (oldest != 0 && id > oldest) return;
        if (silent(id)) {
          oldest = id;
          return;
        }
      }
    };
    if (among) {
      consider(*among);
    } else {
      for (const auto& [source, ids] : pending_) consider(ids);
    }
    if (oldest == 0) return false;
    evict(oldest, among ? "it is the oldest silent one of " +
                              std::to_string(kPendingPerSource) +
                              " connections from its address still in the handshake"
                        : "the store holds " + std::to_string(pending_total_) +
                              " connections in the handshake; it was the oldest silent one");
    return true;
  }

  void evict(uint64_t id, const std::string& why) {
    auto it = clients_.find(id);
    if (it == clients_.end()) return;
    refused(it->second, "evicted: " + why);
    drop(id);
  }

  // A client's handshake is over (passed, refused or dropped).
  void settle(uint64_t id, const Client& c) {
    auto it = pending_.find(c.source);
    if (it == pending_.end() || it->second.erase(id) == 0) return;
    --pending_total_;
    if (it->second.empty()) pending_.erase(it);
  }

  void refused(const Client& c, const std::string& why) {
    warn_limited(fmt::format("refused client {}: {}", c.peer, why));
  }

  // At most 10 warnings per 10 s, so that a port scanner or a flood cannot
  // flood rank 0's log; the rest are counted and summed up later.
  void warn_limited(const std::string& what) {
    const auto now = Clock::now();
    if (now - warn_window_ > std::chrono::seconds(10)) {
      if (warnings_unlogged_ > 0) {
        log().warn("tcp store {}: {} more refusals or accept failures (not logged)", where_,
                   warnings_unlogged_);
      }
      warn_window_ = now;
      warnings_logged_ = warnings_unlogged_ = 0;
    }
    if (warnings_logged_ < 10) {
      ++warnings_logged_;
      log().warn("tcp store {}: {}", where_, what);
    } else {
      ++warnings_unlogged_;
    }
  }

  void set(const std::string& key, std::string value) {
    auto& slot = data_[key];
    slot = std::move(value);
    auto w = waiters_.find(key);
    if (w == waiters_.end()) return;
    std::vector<uint64_t> ids = std::move(w->second);
    waiters_.erase(w);
    for (uint64_t id : ids) {
      auto it = clients_.find(id);
      if (it == clients_.end()) continue;
      Client& c = it->second;
      c.parked = false;
      c.parked_key.clear();
      respond(c, kFound, slot);
      // A failed write shows up as POLLERR/POLLHUP on the next poll().
      flush(c);
    }
  }

  void unpark(uint64_t id, Client& c) {
    auto w = waiters_.find(c.parked_key);
    if (w != waiters_.end()) {
      std::erase(w->second, id);
      if (w->second.empty()) waiters_.erase(w);
    }
    c.parked = false;
    c.parked_key.clear();
  }

  static void respond(Client& c, uint8_t status, const std::string& value) {
    append_response(c.out, status, value);
  }

  // Writes what the socket takes now; the rest goes out on POLLOUT.
  bool flush(Client& c) {
    while (c.out_off < c.out.size()) {
      ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off,
                         MSG_NOSIGNAL);
      if (n > 0) {
        c.out_off += size_t(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      return false;
    }
    c.out.clear();
    c.out_off = 0;
    return true;
  }

  std::string where_;
  const std::string& secret_;
  const std::chrono::milliseconds liveness_;
  Clock::time_point warn_window_{};
  int warnings_logged_ = 0, warnings_unlogged_ = 0;
  // Clients still in the handshake, by source address; ids grow with
  // time, so begin() is a source's oldest.
  std::unordered_map<std::string, std::set<uint64_t>> pending_;
  size_t pending_total_ = 0;
  std::unordered_map<uint64_t, Client> clients_;
  std::unordered_map<std::string, std::string> data_;
  std::unordered_map<std::string, std::vector<uint64_t>> waiters_;
  uint64_t next_id_ = 1;
  Clock::time_point accept_paused_until_{};
};

}  // namespace

namespace {
// Note [a failed job does not linger]: -1 = no cap.
std::atomic<int64_t> g_linger_cap_ms{-1};
}  // namespace

Server::Server(const std::string& host, uint16_t port, std::chrono::milliseconds linger,
               std::string secret)
    : host_(host), port_(port), linger_(linger), secret_(std::move(secret)),
      liveness_(liveness_timeout()) {
  std::string where = host_port(host, port);
  std::string gai_error;
  auto addrs = resolve_tcp(host, port, &gai_error);
  if (addrs.empty()) {
    raise(ErrorCode::InvalidArgument,
          "tcp store: cannot resolve {} to bind the store server: {} (MASTER_ADDR must name "
          "this host, the one running rank 0)",
          where, gai_error);
  }
  int last_err = 0;
  for (auto& a : addrs) {
    if (port_ != 0) set_port(a, port_);
    int err = 0;
    UniqueFd fd = bind_listener(a, &err);
    if (!fd) {
      // A name like "localhost" may resolve to ::1 on a host without IPv6;
      // skip such addresses, but a port in use is always fatal.
      if (err == EADDRINUSE) {
        raise(ErrorCode::InvalidArgument,
              "tcp store: cannot bind {} ({}): {}; another process (an earlier job, or a "
              "launcher's own store) holds the port, pick another MASTER_PORT",
              where, a.to_string(), errno_text(err));
      }
      log().debug("tcp store: cannot bind {}: {}", a.to_string(), errno_text(err));
      last_err = err;
      continue;
    }
    if (port_ == 0) port_ = bound_port(fd.get());
    if (is_unspecified(a)) {
      log().warn("tcp store: listening on every interface ({}), as the bind address asks; "
                 "any host that can reach this port can connect{}",
                 a.to_string(),
                 secret_.empty() ? " and, without GRADWIRE_JOB_SECRET, use the store" : "");
    }
    listeners_.push_back(std::move(fd));
  }
  if (listeners_.empty()) {
    raise(ErrorCode::InvalidArgument,
          "tcp store: cannot bind {}: {} (MASTER_ADDR must be an address of this host, the "
          "one running rank 0)",
          where, errno_text(last_err));
  }
  wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_) raise(ErrorCode::Internal, "tcp store: eventfd failed: {}", errno_text(errno));
  thread_ = std::thread([this] { run(); });
}

Server::~Server() {
  stopping_.store(true);
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_.get(), &one, sizeof(one));
  (void)ignored;
  if (thread_.joinable()) thread_.join();
}

void Server::run() noexcept {
  std::string where = host_port(host_, port_);
  try {
    Loop loop(where, secret_, liveness_);
    std::vector<pollfd> fds;
    std::vector<uint64_t> ids;
    bool lingering = false;
    Clock::time_point linger_end{};
    for (;;) {
      if (stopping_.load() && !lingering) {
        lingering = true;
        auto linger = linger_;
        if (const int64_t cap = g_linger_cap_ms.load(); cap >= 0) {
          linger = std::min(linger, std::chrono::milliseconds(cap));
        }
        linger_end = Clock::now() + linger;
        listeners_.clear();  // no new clients from here on
        if (!loop.clients().empty()) {
          log().debug("tcp store {}: waiting up to {} ms for {} client(s) to disconnect", where,
                      linger.count(), loop.clients().size());
        }
      }
      if (lingering && loop.clients().empty()) return;
      if (lingering && Clock::now() >= linger_end) {
        log().warn("tcp store {}: shutting down with {} client(s) still connected; a rank "
                   "still reading from the store will see the connection drop",
                   where, loop.clients().size());
        return;
      }

      std::vector<uint64_t> dead;
      auto next_expiry = loop.expire(&dead);
      for (auto& [id, c] : loop.clients()) {
        if (!loop.pump(id, c)) dead.push_back(id);
      }
      for (uint64_t id : dead) loop.drop(id);

      fds.clear();
      ids.clear();
      fds.push_back({wake_.get(), POLLIN, 0});
      size_t first_listener = fds.size();
      if (!loop.accepts_paused()) {
        for (auto& l : listeners_) fds.push_back({l.get(), POLLIN, 0});
      }
      size_t first_client = fds.size();
      for (auto& [id, c] : loop.clients()) {
        short ev = POLLRDHUP;
        if (c.can_read()) ev |= POLLIN;
        if (c.out_off < c.out.size()) ev |= POLLOUT;
        fds.push_back({c.fd.get(), ev, 0});
        ids.push_back(id);
      }
      // Bounded wait: paused accepts and the linger deadline need a tick,
      // a parked WAIT its own timeout.
      int timeout = (lingering || loop.accepts_paused()) ? 50 : 1000;
      if (next_expiry != Clock::time_point::max()) {
        timeout = std::min(timeout, poll_timeout_ms(Deadline(next_expiry)));
      }
      int rc = ::poll(fds.data(), fds.size(), timeout);
      if (rc < 0) {
        if (errno == EINTR) continue;
        log().error("tcp store {}: poll failed: {}; store server stopping", where,
                    errno_text(errno));
        return;
      }
      if (fds[0].revents) {
        uint64_t v;
        ssize_t ignored = ::read(wake_.get(), &v, sizeof(v));
        (void)ignored;
      }
      for (size_t i = first_listener; i < first_client; ++i) {
        if (fds[i].revents & POLLIN) loop.accept_from(fds[i].fd);
      }
      for (size_t i = first_client; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        uint64_t id = ids[i - first_client];
        auto it = loop.clients().find(id);
        if (it == loop.clients().end()) continue;
        if (!loop.service(id, it->second, fds[i].revents)) {
          log().debug("tcp store {}: client {} disconnected", where, it->second.peer);
          loop.drop(id);
        }
      }
    }
  } catch (const std::exception& e) {
    // Out of memory is the only realistic way here; clients then see their
    // connections close and report PeerLost.
    log().error("tcp store {}: server stopped: {}", where, e.what());
  }
}

}  // namespace gradwire::bootstrap::tcp_store

namespace gradwire::bootstrap {

// Note [a failed job does not linger]: a failed job's rank 0 waited the
// full linger (5 s) at exit whenever a peer kept its connection without
// reading (a stopped rank, a hung one), so the job's processes outlived its
// error by 5 s (issue 17). Once the job has failed, the linger only needs
// to let live ranks read the failure key, which their watchdogs poll once
// a second.
void cap_store_linger(std::chrono::milliseconds cap) {
  int64_t want = cap.count(), cur = tcp_store::g_linger_cap_ms.load();
  while ((cur < 0 || want < cur) && !tcp_store::g_linger_cap_ms.compare_exchange_weak(cur, want)) {
  }
}

}  // namespace gradwire::bootstrap
