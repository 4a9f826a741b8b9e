// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [heartbeats between hosts]: how a rank learns, within
// GRADWIRE_HOST_LOST_S (1 s by default), that a rank on another host is gone,
// when nothing else would tell it: a host that loses power or its link sends
// no FIN, its pid cannot be watched (Note [a dead peer on this host]), and
// the will in rank 0's store (Note [a lost rank on another host]) needs the
// kernel to give up on a connection first (GRADWIRE_LIVENESS_S, 10 s; it
// must outlast the network's worst stall). Each world rank with a store
// sends a 48-byte UDP datagram every tenth of the timeout to every rank of
// the world on another machine, from a thread of its own, on the address
// its fabric endpoint uses; it publishes that address, with a random nonce
// every datagram to it must carry, in the store ("gradwire/heartbeat/<rank>").
// A peer heard from once and then silent for the timeout is reported by
// silent(); the watchdog fails a collective that still waits
// kDeadPeerGrace later with PeerLost naming every silent rank and its host.
// A rank that closes its communicator says goodbye and is never reported.
//
// Why not heartbeats on the fabric itself: the transport belongs to the
// engine thread, which is inside the very collective that waits; it cannot
// answer in time without interrupting it. Why not the etcd lease: etcd
// counts TTLs in whole seconds with a floor of 2 s at its default election
// timeout, checks expiries every 500 ms, and only etcd jobs have one; the
// lease is what drops a dead member out of the membership (Note [etcd
// leases]), not what fails a collective within 2 s. Measured on emulated
// hosts (network namespaces, every process of one host killed and its link
// cut, BENCHMARKS.md): see `ctest -R etcd_hosts`.
//
// Cost: (ranks on other hosts) datagrams per rank per tenth of the
// timeout; 256 remote ranks at the default: 2560 datagrams a second of 48
// bytes. A rank whose datagrams never arrive (a firewall drops UDP) is never
// armed, so it is never reported: it falls back to the will and the
// deadline, with a log line saying so.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/fd.h"

namespace gradwire {

class Heartbeats {
 public:
  // A peer as published in the store: "<ip>|<port>|<nonce>|<pid>|<host>".
  struct Peer {
    std::string ip;
    uint16_t port = 0;
    uint64_t nonce = 0;
    int pid = 0;
    std::string host;
  };
  static std::string encode(const Peer& p);
  static std::optional<Peer> decode(std::string_view text);  // pure; nullopt if malformed

  // The address of `fabric_address` (libfabric's name of this rank's
  // endpoint: a sockaddr for the socket providers) or of interface `iface`
  // (GRADWIRE_OFI_IFACE; wins when set): where peers on other hosts reach
  // this rank. Empty when neither gives an IP (EFA, shm): no heartbeats.
  static std::string local_ip(const std::string& fabric_address, const std::string& iface);

  // Binds a UDP socket on `ip` and starts the thread. `watched[r]`: rank r
  // is on another machine. Throws Error when the socket cannot be made.
  Heartbeats(int rank, std::vector<bool> watched, std::chrono::milliseconds timeout,
             const std::string& ip);
  ~Heartbeats();  // says goodbye to every known peer, stops the thread
  Heartbeats(const Heartbeats&) = delete;
  Heartbeats& operator=(const Heartbeats&) = delete;

  const Peer& self() const { return self_; }
  // Watched ranks whose address is not known yet.
  std::vector<int> unknown() const;
  void set_peer(int rank, const Peer& peer);
  // Watched ranks heard from and then silent for the timeout (never one
  // that said goodbye), with what they published.
  std::vector<std::pair<int, Peer>> silent() const;
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  void loop();
  void send_all(bool goodbye);

  const int rank_;
  const std::vector<bool> watched_;
  const std::chrono::milliseconds timeout_;
  UniqueFd fd_;
  Peer self_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  struct State {
    std::optional<Peer> peer;
    bool armed = false, left = false;
    std::chrono::steady_clock::time_point last{};
  };
  std::vector<State> peers_;
  std::thread thread_;
};

}  // namespace gradwire
