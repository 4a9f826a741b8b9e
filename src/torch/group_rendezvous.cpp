// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "group_rendezvous.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>

#include "gradwire/error.h"
#include "gradwire/torch/process_group.h"

namespace gradwire::torch {
namespace detail {

namespace {

struct Fd {
  int fd;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

[[noreturn]] void fail(const std::string& what) {
  throw Error(ErrorCode::Transport, what + ": " + std::strerror(errno));
}

std::optional<sockaddr_in> resolve_ipv4(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res) return std::nullopt;
  sockaddr_in a;
  std::memcpy(&a, res->ai_addr, sizeof a);
  freeaddrinfo(res);
  return a;
}

}  // namespace

std::string reachable_address(const std::string& peer_host) {
  if (peer_host.empty()) return "127.0.0.1";
  auto peer = resolve_ipv4(peer_host);
  if (!peer) return "127.0.0.1";
  if ((ntohl(peer->sin_addr.s_addr) >> 24) == 127) return "127.0.0.1";
  // connect() on a UDP socket only picks the route and the local address.
  Fd s(::socket(AF_INET, SOCK_DGRAM, 0));
  if (s.fd < 0) fail("socket");
  peer->sin_port = htons(9);
  if (::connect(s.fd, reinterpret_cast<sockaddr*>(&*peer), sizeof *peer) != 0) {
    fail("finding the local address that routes to " + peer_host);
  }
  sockaddr_in local{};
  socklen_t len = sizeof local;
  if (::getsockname(s.fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) fail("getsockname");
  char buf[INET_ADDRSTRLEN];
  return inet_ntop(AF_INET, &local.sin_addr, buf, sizeof buf);
}

int free_port(const std::string& host) {
  auto addr = resolve_ipv4(host);
  if (!addr) throw Error(ErrorCode::InvalidArgument, "cannot resolve '" + host + "' to IPv4");
  addr->sin_port = 0;
  Fd s(::socket(AF_INET, SOCK_STREAM, 0));
  if (s.fd < 0) fail("socket");
  if (::bind(s.fd, reinterpret_cast<sockaddr*>(&*addr), sizeof *addr) != 0) {
    fail("binding a free port on " + host);
  }
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  if (::getsockname(s.fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) fail("getsockname");
  return ntohs(bound.sin_port);
}

std::string random_secret() {
  unsigned char raw[32];
  size_t got = 0;
  while (got < sizeof raw) {
    const ssize_t n = ::getrandom(raw + got, sizeof raw - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("getrandom (generating the group's job secret)");
    got += size_t(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (unsigned char b : raw) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  return s;
}

GroupRendezvous parse_rendezvous(const std::string& text) {
  auto bad = [&]() -> GroupRendezvous {
    throw Error(ErrorCode::Protocol,
                "malformed gradwire rendezvous in torch's store (" + std::to_string(text.size()) +
                    " bytes; expected 'host port [secret]'); do all ranks run the same gradwire?");
  };
  if (text.size() > 2048) return bad();
  const auto sp1 = text.find(' ');
  if (sp1 == 0 || sp1 == std::string::npos) return bad();
  const auto sp2 = text.find(' ', sp1 + 1);
  GroupRendezvous r;
  r.host = text.substr(0, sp1);
  const std::string port = text.substr(sp1 + 1, sp2 == std::string::npos ? sp2 : sp2 - sp1 - 1);
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), r.port);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || r.port < 1 ||
      r.port > 65535) {
    return bad();
  }
  if (sp2 != std::string::npos) {
    r.secret = text.substr(sp2 + 1);
    if (r.secret.empty() || r.secret.find(' ') != std::string::npos) return bad();
  }
  return r;
}

std::unique_ptr<Communicator> create_at(const Options& options, int rank, int size,
                                        const std::string& host, int port,
                                        const std::string& secret) {
  // Note [explicit rendezvous] (src/bootstrap/environment.cpp): the group's
  // store, given as a value; no process-wide environment to set. Without a
  // secret published in torch's store the user's GRADWIRE_JOB_SECRET is
  // the group's (Note [group bootstrap]).
  std::string job_secret = secret;
  if (job_secret.empty()) {
    if (const char* env = std::getenv("GRADWIRE_JOB_SECRET")) job_secret = env;
  }
  return Communicator::create(
      options, Rendezvous::tcp(host, uint16_t(port), rank, size, std::move(job_secret)));
}

}  // namespace detail

std::pair<std::string, int> mpi_master_address(const std::string& master_addr, bool single_host) {
  using namespace detail;
  auto world = Communicator::create();
  char blob[256] = {};
  if (world->rank() == 0) {
    std::string host = master_addr;
    if (host.empty()) host = single_host ? "127.0.0.1" : reachable_address("8.8.8.8");
    const std::string text = host + " " + std::to_string(free_port(host));
    text.copy(blob, sizeof blob - 1);
  }
  world->broadcast(blob, blob, sizeof blob, DataType::UInt8, 0).wait();
  const std::string text(blob);
  const auto space = text.find(' ');
  return {text.substr(0, space), std::stoi(text.substr(space + 1))};
}

}  // namespace gradwire::torch
