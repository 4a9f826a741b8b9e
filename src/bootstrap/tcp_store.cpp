// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The TCP store client, and make_tcp_store(). Wire format and the reason
// WAIT parks on the server: Note [tcp store protocol] in tcp_store_server.h.
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "bootstrap/socket.h"
#include "bootstrap/store.h"
#include "bootstrap/store_auth.h"
#include "bootstrap/store_handshake.h"
#include "bootstrap/tcp_store_server.h"
#include "base/raise.h"
#include "base/logging.h"

namespace gradwire::bootstrap {

namespace {

using std::chrono::milliseconds;
using namespace tcp_store;

// How long past its deadline a client keeps reading for the server's own
// NOT_FOUND before giving up on the connection.
constexpr milliseconds kWaitGrace{1000};

double jitter() {
  thread_local std::minstd_rand rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 0.5)(rng);
}

long long ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t0).count();
}

// Note [world generations]: a process may destroy its world communicator
// and create it again (torch's destroy_process_group + init_process_group,
// an elastic restart), every rank at nearly the same moment. Two things
// broke that when each world had its own store server on rank 0:
//  * a rank that came back first connected to rank 0's old server, still up,
//    and read the previous world's keys (its endpoint addresses), then
//    waited on endpoints that no longer exist;
//  * rank 0's old server, lingering for that rank's connection, kept rank 0
//    from serving the new world, and the others' connections were refused.
// So the server on host:port outlives its Store and serves every later
// world of this process at the same place (kept in a process-wide table,
// which is never destroyed: its threads end with the process), and each
// world uses its own keys: the n-th world over host:port prefixes them with
// "world<n>/" (next_world_generation; every rank counts alike because worlds
// are created collectively). A server nobody uses stays for the next world;
// beyond kIdleServers idle ones (a process that keeps creating stores on
// fresh ports, e.g. one per torch group), the oldest are closed.
constexpr size_t kIdleServers = 8;

struct ServedStore {
  std::shared_ptr<Server> server;
  std::string secret;
  uint64_t created = 0;  // order of creation, for closing the oldest idle ones
};

std::mutex& served_mu() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::map<std::string, ServedStore>& served() {
  static auto* table = new std::map<std::string, ServedStore>;  // Note [world generations]
  // At exit the servers close as a Store's did: each keeps serving ranks
  // still connected for its linger, so a rank 0 that leaves first does not
  // pull the store from under ranks still reading its keys. Constructed
  // after the logger, so destroyed before it.
  struct CloseAtExit {
    ~CloseAtExit() {
      std::map<std::string, ServedStore> closing;
      {
        std::lock_guard<std::mutex> lk(served_mu());
        closing.swap(*table);
      }
    }
  };
  static CloseAtExit close_at_exit;
  return *table;
}

std::shared_ptr<Server> shared_server(const std::string& bind, uint16_t port,
                                      milliseconds linger, const std::string& secret) {
  if (port == 0) return std::make_shared<Server>(bind, port, linger, secret);  // never reused
  std::vector<std::shared_ptr<Server>> closing;  // destroyed (lingering) outside the lock
  std::shared_ptr<Server> server;
  {
    std::lock_guard<std::mutex> lk(served_mu());
    auto& table = served();
    const std::string key = host_port(bind, port);
    auto it = table.find(key);
    if (it != table.end()) {
      if (it->second.secret != secret) {
        raise(ErrorCode::InvalidArgument,
              "tcp store {}: this process already serves the store of an earlier world there "
              "with another job secret; use the same GRADWIRE_JOB_SECRET for every world of a "
              "job, or another port", key);
      }
      return it->second.server;
    }
    static uint64_t created = 0;
    server = std::make_shared<Server>(bind, port, linger, secret);
    table[key] = ServedStore{server, secret, ++created};
    size_t idle = 0;
    for (auto& [k, v] : table) idle += v.server.use_count() == 1;
    while (idle > kIdleServers) {
      auto oldest = table.end();
      for (auto i = table.begin(); i != table.end(); ++i) {
        if (i->second.server.use_count() == 1 &&
            (oldest == table.end() || i->second.created < oldest->second.created)) {
          oldest = i;
        }
      }
      closing.push_back(std::move(oldest->second.server));
      table.erase(oldest);
      --idle;
    }
  }
  return server;
}

class TcpStore final : public Store {
 public:
  TcpStore(std::string host, uint16_t port, bool is_server, Deadline deadline,
           const TcpStoreOptions& options)
      : host_(std::move(host)), port_(port), secret_(options.secret) {
    // Requests that carry no deadline of their own get the window the
    // caller gave the first connection; never() stays never().
    if (deadline.at() != Clock::time_point::max()) {
      op_window_ = std::max(deadline.remaining(), milliseconds(1000));
    }
    if (is_server) {
      server_ = shared_server(options.bind_host.empty() ? host_ : options.bind_host, port_,
                              options.linger, options.secret);
      port_ = server_->port();
    }
    where_ = host_port(host_, port_);
    // Connect now, so that an unreachable rank 0 is reported here, at
    // start-up, rather than at the first allgather.
    idle_.push_back(connect(deadline));
  }

  ~TcpStore() override {
    // A clean end withdraws the will (Note [a connection's last will]).
    // Best effort and brief: a store that is already gone has no will to
    // carry out.
    if (will_fd_) {
      try {
        exchange(will_fd_, kWill, will_key_, {}, Deadline::after(milliseconds(1000)),
                 "the store to withdraw this rank's will");
      } catch (const Error& e) {
        log().debug("tcp store {}: could not withdraw the will: {}", where_, e.what());
      }
      will_fd_.reset();
    }
    // Our own connections go first, so a lingering server only waits for
    // the other ranks (Note [world generations]: a shared one stays up).
    idle_.clear();
    server_.reset();
  }

  void set(const std::string& key, const std::string& value) override {
    check_key(key);
    if (value.size() > kMaxValueBytes) {
      raise(ErrorCode::InvalidArgument,
            "tcp store {}: value for key '{}' is {} bytes; the store takes at most {} bytes",
            where_, key, value.size(), kMaxValueBytes);
    }
    auto [status, reply] = request(kSet, key, value, op_deadline(), "the store to acknowledge SET");
    expect(status == kOk, "SET", status);
  }

  std::string get(const std::string& key, Deadline deadline,
                  const std::string& waiting_for) override {
    check_key(key);
    auto t0 = Clock::now();
    // The server answers NOT_FOUND when the timeout passes (Note [tcp store
    // protocol]); we stop reading a little later, in case it cannot.
    uint32_t ms = kWaitForever;
    Deadline socket_deadline = Deadline::never();
    if (deadline.at() != Clock::time_point::max()) {
      ms = uint32_t(std::min<long long>(deadline.remaining().count(), kWaitForever - 1));
      socket_deadline = Deadline::after(deadline.remaining() + kWaitGrace);
    }
    std::string arg(4, '\0');
    put_u32(reinterpret_cast<uint8_t*>(arg.data()), ms);
    auto [status, value] = request(kWait, key, arg, socket_deadline, waiting_for);
    if (status == kNotFound) {
      raise(ErrorCode::Timeout,
            "tcp store {}: timed out after {} ms waiting for {} (key '{}'); has that rank "
            "started, and does it use the same MASTER_ADDR/MASTER_PORT?",
            where_, ms_since(t0), waiting_for, key);
    }
    expect(status == kFound, "WAIT", status);
    return value;
  }

  std::optional<std::string> try_get(const std::string& key) override {
    check_key(key);
    auto [status, value] = request(kGet, key, {}, op_deadline(), "the store to answer GET");
    if (status == kNotFound) return std::nullopt;
    expect(status == kFound, "GET", status);
    return value;
  }

  bool set_will(const std::string& key, const std::string& value) override {
    check_key(key);
    if (value.empty() || value.size() > kMaxKeyBytes) {
      raise(ErrorCode::InvalidArgument, "tcp store {}: a will of {} bytes (1..{})", where_,
            value.size(), kMaxKeyBytes);
    }
    // Its own connection, used for nothing else: the will lives as long as
    // this connection, which must not be dropped by an unrelated request's
    // timeout.
    std::lock_guard<std::mutex> lk(will_mu_);
    if (!will_fd_) will_fd_ = connect(op_deadline());
    auto [status, reply] =
        exchange(will_fd_, kWill, key, value, op_deadline(), "the store to take this rank's will");
    expect(status == kOk, "WILL", status);
    will_key_ = key;
    return true;
  }

  std::string describe() const override { return "torchrun store " + where_; }

 private:
  Deadline op_deadline() const {
    return op_window_ ? Deadline::after(*op_window_) : Deadline::never();
  }

  void check_key(const std::string& key) const {
    if (key.empty() || key.size() > kMaxKeyBytes) {
      raise(ErrorCode::InvalidArgument, "tcp store {}: key of {} bytes (keys are 1..{} bytes)",
            where_, key.size(), kMaxKeyBytes);
    }
  }

  void expect(bool ok, const char* what, uint8_t status) const {
    if (!ok) {
      raise(ErrorCode::Protocol, "tcp store {}: unexpected status {} in the answer to {}; is "
            "every rank running the same gradwire?", where_, int(status), what);
    }
  }

  // Exponential backoff (10 ms, x2, cap 1 s) plus up to 50% jitter, so that
  // a thousand ranks started together do not hit rank 0 in lock-step.
  UniqueFd connect(Deadline deadline) {
    auto t0 = Clock::now();
    auto backoff = milliseconds(10);
    std::string last_error = "no attempt made";
    int attempts = 0;
    for (;;) {
      ++attempts;
      std::string gai_error;
      auto addrs = resolve_tcp(host_, port_, &gai_error);
      if (addrs.empty()) last_error = "cannot resolve host: " + gai_error;
      for (const auto& a : addrs) {
        // One unanswered SYN must not use up the whole deadline.
        Deadline attempt(std::min(deadline.at(), Clock::now() + std::chrono::seconds(2)));
        int err = 0;
        UniqueFd fd = try_connect(a, attempt, &err);
        if (fd) {
          handshake(fd.get(), deadline);
          connected_once_ = true;
          return fd;
        }
        last_error = a.to_string() + ": " + errno_text(err);
        if (connected_once_ && err == ECONNREFUSED) {
          raise(ErrorCode::PeerLost,
                "tcp store {}: the store server is gone ({}); rank 0, which hosts it, "
                "probably exited or crashed",
                where_, last_error);
        }
      }
      if (deadline.expired()) break;
      auto sleep = std::chrono::duration_cast<milliseconds>(backoff * (1.0 + jitter()));
      std::this_thread::sleep_for(std::min(sleep, deadline.remaining()));
      backoff = std::min(backoff * 2, milliseconds(1000));
      if (deadline.expired()) break;
    }
    raise(ErrorCode::Timeout,
          "could not connect to the torchrun store at {} after {} ms ({} attempts, last "
          "error: {}); is rank 0 up? is MASTER_ADDR/MASTER_PORT right?",
          where_, ms_since(t0), attempts, last_error);
  }

  // The store handshake on a fresh connection. A refusal is final (no
  // retry: a wrong secret stays wrong); it gets at least 1 s and at most
  // kHandshakeTimeout, whatever is left of `deadline`.
  void handshake(int fd, Deadline deadline) {
    const auto left = std::clamp(deadline.remaining(), milliseconds(1000),
                                 milliseconds(kHandshakeTimeout));
    try {
      client_handshake(fd, where_, secret_, Deadline::after(left));
    } catch (const Error& e) {
      // A store that closes on us after earlier connections went through is
      // most likely going away (rank 0 exiting), not refusing us.
      if (e.code() == ErrorCode::PeerLost && !connected_once_) {
        throw Error(ErrorCode::Protocol, e.message());
      }
      throw;
    }
  }

  // A connection from the pool, or a new one: a thread blocked in get()
  // holds its own connection, so another thread's set() on this same Store
  // can still go through (and deliver the key the first is waiting for).
  UniqueFd acquire(Deadline deadline) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        UniqueFd fd = std::move(idle_.back());
        idle_.pop_back();
        return fd;
      }
    }
    return connect(deadline);
  }

  void release(UniqueFd fd) {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(std::move(fd));
  }

  std::pair<uint8_t, std::string> request(uint8_t cmd, const std::string& key,
                                          const std::string& value, Deadline deadline,
                                          const std::string& waiting_for) {
    count_store_request();
    UniqueFd fd = acquire(deadline);
    auto answer = exchange(fd, cmd, key, value, deadline, waiting_for);
    release(std::move(fd));
    return answer;
  }

  // One request and its answer on `fd`; on any error `fd` is closed (the
  // stream may be out of step) and the error raised.
  std::pair<uint8_t, std::string> exchange(UniqueFd& fd, uint8_t cmd, const std::string& key,
                                           const std::string& value, Deadline deadline,
                                           const std::string& waiting_for) {
    auto t0 = Clock::now();
    struct CloseUnlessDone {
      UniqueFd& fd;
      bool done = false;
      ~CloseUnlessDone() {
        if (!done) fd.reset();
      }
    } guard{fd};
    const std::string frame = encode_request(cmd, key, value);

    int err = 0;
    IoStatus st = send_all(fd.get(), frame.data(), frame.size(), deadline, &err);
    uint8_t rh[kResponseHeaderBytes];
    ResponseHeader answer;
    if (st == IoStatus::Ok) st = recv_all(fd.get(), rh, sizeof(rh), deadline, &err);
    std::string reply;
    if (st == IoStatus::Ok) {
      if (const char* bad = parse_response_header(rh, &answer)) {
        // fd is dropped with this error: the stream is out of step.
        raise(ErrorCode::Protocol,
              "tcp store {}: malformed answer to {} ({}: status {}, length {}); is {} really a "
              "gradwire store (MASTER_PORT may point at another service)?",
              where_, waiting_for, bad, int(answer.status), answer.length, where_);
      }
      reply.resize(answer.length);
      st = recv_all(fd.get(), reply.data(), answer.length, deadline, &err);
    }
    switch (st) {
      case IoStatus::Ok:
        guard.done = true;
        return {answer.status, std::move(reply)};
      case IoStatus::TimedOut:
        // fd is dropped: a late answer may still arrive on it.
        raise(ErrorCode::Timeout,
              "tcp store {}: no answer after {} ms while waiting for {} (key '{}'); the store "
              "server on rank 0 is not responding",
              where_, ms_since(t0), waiting_for, key);
      case IoStatus::Closed:
        raise(ErrorCode::PeerLost,
              "tcp store {}: connection lost while waiting for {} (key '{}'); rank 0, which "
              "hosts the store, probably exited or crashed",
              where_, waiting_for, key);
      case IoStatus::Error:
        break;
    }
    raise(ErrorCode::PeerLost, "tcp store {}: socket error while waiting for {} (key '{}'): {}",
          where_, waiting_for, key, errno_text(err));
  }

  std::string host_;
  uint16_t port_;
  std::string secret_;
  std::string where_;
  std::optional<milliseconds> op_window_;
  std::shared_ptr<Server> server_;
  std::mutex mu_;
  std::vector<UniqueFd> idle_;
  std::mutex will_mu_;
  UniqueFd will_fd_;  // Note [a connection's last will]: this connection carries it
  std::string will_key_;
  std::atomic<bool> connected_once_{false};
};

}  // namespace

std::unique_ptr<Store> make_tcp_store(const std::string& host, uint16_t port, bool is_server,
                                      Deadline deadline, const TcpStoreOptions& options) {
  if (host.empty()) {
    raise(ErrorCode::InvalidArgument, "tcp store: empty host (MASTER_ADDR must name rank 0)");
  }
  if (port == 0 && !is_server) {
    raise(ErrorCode::InvalidArgument, "tcp store {}: a client needs a port", host);
  }
  if (!options.secret.empty()) check_secret(options.secret, "the tcp store's job secret");
  return std::make_unique<TcpStore>(host, port, is_server, deadline, options);
}

uint64_t next_world_generation(const std::string& host, uint16_t port, int rank) {
  static auto* counts = new std::map<std::string, uint64_t>;  // Note [world generations]
  std::lock_guard<std::mutex> lk(served_mu());
  // Per rank too: ranks that are threads of one process count their own.
  return (*counts)[host_port(host, port) + "#" + std::to_string(rank)]++;
}

namespace {
class PrefixStore final : public Store {
 public:
  PrefixStore(std::unique_ptr<Store> inner, std::string prefix)
      : inner_(std::move(inner)), prefix_(std::move(prefix)) {}
  void set(const std::string& key, const std::string& value) override {
    inner_->set(prefix_ + key, value);
  }
  std::string get(const std::string& key, Deadline deadline,
                  const std::string& waiting_for) override {
    return inner_->get(prefix_ + key, deadline, waiting_for);
  }
  std::optional<std::string> try_get(const std::string& key) override {
    return inner_->try_get(prefix_ + key);
  }
  bool set_if_absent(const std::string& key, const std::string& value) override {
    return inner_->set_if_absent(prefix_ + key, value);
  }
  bool set_will(const std::string& key, const std::string& value) override {
    return inner_->set_will(prefix_ + key, value);
  }
  bool set_ephemeral(const std::string& key, const std::string& value) override {
    return inner_->set_ephemeral(prefix_ + key, value);
  }
  void wait_change(const std::string& prefix, uint64_t* cursor, Deadline until) override {
    inner_->wait_change(prefix_ + prefix, cursor, until);
  }
  std::string describe() const override {
    return inner_->describe() + " (keys " + prefix_ + "*)";
  }

 private:
  std::unique_ptr<Store> inner_;
  std::string prefix_;
};

class SharedStore final : public Store {
 public:
  explicit SharedStore(std::shared_ptr<Store> inner) : inner_(std::move(inner)) {}
  void set(const std::string& key, const std::string& value) override { inner_->set(key, value); }
  std::string get(const std::string& key, Deadline deadline,
                  const std::string& waiting_for) override {
    return inner_->get(key, deadline, waiting_for);
  }
  std::optional<std::string> try_get(const std::string& key) override {
    return inner_->try_get(key);
  }
  bool set_if_absent(const std::string& key, const std::string& value) override {
    return inner_->set_if_absent(key, value);
  }
  bool set_will(const std::string& key, const std::string& value) override {
    return inner_->set_will(key, value);
  }
  bool set_ephemeral(const std::string& key, const std::string& value) override {
    return inner_->set_ephemeral(key, value);
  }
  void wait_change(const std::string& prefix, uint64_t* cursor, Deadline until) override {
    inner_->wait_change(prefix, cursor, until);
  }
  std::string describe() const override { return inner_->describe(); }

 private:
  std::shared_ptr<Store> inner_;
};
}  // namespace

bool Store::set_if_absent(const std::string& key, const std::string&) {
  raise(ErrorCode::InvalidArgument,
        "{} cannot write key '{}' only if it is absent, which elastic membership needs; use an "
        "etcd store (GRADWIRE_ETCD_ENDPOINTS and GRADWIRE_ETCD_PREFIX), a file store "
        "(GRADWIRE_STORE_DIR, a directory every rank sees) or an in-process store",
        describe(), key);
}

bool Store::set_will(const std::string&, const std::string&) { return false; }

bool Store::set_ephemeral(const std::string&, const std::string&) { return false; }

void Store::wait_change(const std::string&, uint64_t* cursor, Deadline until) {
  if (*cursor == 0) {
    *cursor = 1;
    return;
  }
  std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
      std::chrono::milliseconds(10), until.remaining()));
}

std::unique_ptr<Store> shared_store(std::shared_ptr<Store> store) {
  return std::make_unique<SharedStore>(std::move(store));
}

std::unique_ptr<Store> prefix_store(std::unique_ptr<Store> store, std::string prefix) {
  return std::make_unique<PrefixStore>(std::move(store), std::move(prefix));
}

std::unique_ptr<Store> make_tcp_store(const std::string& host, uint16_t port, bool is_server,
                                      Deadline deadline) {
  return make_tcp_store(host, port, is_server, deadline, TcpStoreOptions{});
}

}  // namespace gradwire::bootstrap
