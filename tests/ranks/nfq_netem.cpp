// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// nfq_netem: tc netem's delay, jitter, reordering and loss in user space,
// for kernels without sch_netem (tests/ranks/netem.sh). An iptables rule
// sends packets to NFQUEUE queue N (best on INPUT: Note [queue on the way
// in] in netem.sh); this program holds each one and gives its verdict later:
//   - dropped (NF_DROP at once) with probability --loss-pct;
//   - else released at once (NF_ACCEPT) with probability --reorder-pct,
//     overtaking the packets still held, as netem's "reorder" does;
//   - else released after --delay-ms plus a uniform jitter in
//     [-jitter, +jitter] ms (never negative): packets whose due times cross
//     leave out of order, as under netem's jitter.
// Counters say what was done, so a test can prove the fault happened:
// "delayed" (held for a positive time), "reordered" (released while a
// packet that arrived earlier was still held), "dropped". They are printed
// to stderr on SIGTERM / SIGINT, after every held packet has been released.
//
//   nfq_netem --queue N [--delay-ms D] [--jitter-ms J] [--reorder-pct P]
//             [--loss-pct L] [--seed S]
//
// Stderr gets "nfq_netem: queue N bound" once packets can be queued: add
// the iptables rule only after it (without --queue-bypass a queue with no
// listener drops everything), and remove the rule before stopping this.
#include <arpa/inet.h>  // ntohl
#include <linux/netfilter.h>  // NF_ACCEPT, NF_DROP
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <queue>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

extern "C" {
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <libnfnetlink/libnfnetlink.h>
}

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

struct Config {
  int queue = -1;
  double delay_ms = 0, jitter_ms = 0, reorder_pct = 0, loss_pct = 0;
  uint64_t seed = std::random_device{}();
};

struct Held {
  int64_t due_ns;
  uint64_t seq;  // arrival order
  uint32_t id;   // the kernel's packet id, for the verdict
  bool operator>(const Held& o) const {
    return due_ns != o.due_ns ? due_ns > o.due_ns : seq > o.seq;
  }
};

struct Netem {
  Config cfg;
  std::mt19937_64 rng;
  nfq_q_handle* queue = nullptr;
  std::priority_queue<Held, std::vector<Held>, std::greater<Held>> timers;
  std::set<uint64_t> held;  // arrival numbers of the packets not yet released
  uint64_t arrived = 0, delayed = 0, reordered = 0, dropped = 0, verdict_errors = 0;

  void verdict(uint32_t id, uint32_t v) {
    if (nfq_set_verdict(queue, id, v, 0, nullptr) < 0) ++verdict_errors;
  }
  void release(uint64_t seq, uint32_t id) {
    held.erase(seq);
    if (!held.empty() && *held.begin() < seq) ++reordered;
    verdict(id, NF_ACCEPT);
  }
  void on_packet(uint32_t id) {
    const uint64_t seq = arrived++;
    std::uniform_real_distribution<double> pct(0.0, 100.0);
    if (cfg.loss_pct > 0 && pct(rng) < cfg.loss_pct) {
      ++dropped;
      verdict(id, NF_DROP);
      return;
    }
    double hold_ms = cfg.delay_ms;
    if (cfg.reorder_pct > 0 && pct(rng) < cfg.reorder_pct) {
      hold_ms = 0;
    } else if (cfg.jitter_ms > 0) {
      hold_ms += std::uniform_real_distribution<double>(-cfg.jitter_ms, cfg.jitter_ms)(rng);
    }
    held.insert(seq);
    if (hold_ms <= 0) {
      release(seq, id);
      return;
    }
    ++delayed;
    timers.push({now_ns() + int64_t(hold_ms * 1e6), seq, id});
  }
  // Releases every packet due by `until`; returns the next due time or -1.
  int64_t release_due(int64_t until) {
    while (!timers.empty() && timers.top().due_ns <= until) {
      Held h = timers.top();
      timers.pop();
      release(h.seq, h.id);
    }
    return timers.empty() ? -1 : timers.top().due_ns;
  }
};

int on_queued(nfq_q_handle*, nfgenmsg*, nfq_data* nfa, void* data) {
  if (nfqnl_msg_packet_hdr* ph = nfq_get_msg_packet_hdr(nfa))
    static_cast<Netem*>(data)->on_packet(ntohl(ph->packet_id));
  return 0;
}

// The kernel's own counters for queue `num` (/proc/net/netfilter/
// nfnetlink_queue of this network namespace): packets it dropped because
// the queue was full, or because a message to us could not be delivered.
// Those are losses the test did not ask for; reporting them tells a
// surprising slowdown apart from a bug.
std::string kernel_counters(int num) {
  std::ifstream in("/proc/net/netfilter/nfnetlink_queue");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    unsigned long long q, portid, total, mode, range, queue_dropped, user_dropped;
    if (f >> q >> portid >> total >> mode >> range >> queue_dropped >> user_dropped &&
        int(q) == num) {
      return "kernel_queue_dropped=" + std::to_string(queue_dropped) +
             " kernel_user_dropped=" + std::to_string(user_dropped);
    }
  }
  return "kernel counters unavailable";
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "nfq_netem: %s\nusage: nfq_netem --queue N [--delay-ms D] [--jitter-ms J] "
               "[--reorder-pct P] [--loss-pct L] [--seed S]\n",
               why);
  std::exit(2);
}

Config parse(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(("missing value after " + a).c_str());
    char* end = nullptr;
    const char* v = argv[++i];
    const double x = std::strtod(v, &end);
    if (end == v || *end != '\0' || !std::isfinite(x) || x < 0)
      usage((a + " needs a non-negative number, not '" + v + "'").c_str());
    if (a == "--queue") c.queue = int(x);
    else if (a == "--delay-ms") c.delay_ms = x;
    else if (a == "--jitter-ms") c.jitter_ms = x;
    else if (a == "--reorder-pct") c.reorder_pct = x;
    else if (a == "--loss-pct") c.loss_pct = x;
    else if (a == "--seed") c.seed = uint64_t(x);
    else usage(("unknown option " + a).c_str());
  }
  if (c.queue < 0 || c.queue > 65535) usage("--queue 0..65535 is required");
  if (c.reorder_pct > 100 || c.loss_pct > 100) usage("percentages are 0..100");
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  Netem netem;
  netem.cfg = parse(argc, argv);
  netem.rng.seed(netem.cfg.seed);

  // No SA_RESTART: the signal must interrupt ppoll so the loop sees g_stop.
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  std::unique_ptr<nfq_handle, int (*)(nfq_handle*)> handle(nfq_open(), nfq_close);
  if (!handle) {
    std::fprintf(stderr, "nfq_netem: nfq_open: %s (nfnetlink_queue missing, or not root?)\n",
                 std::strerror(errno));
    return 3;
  }
  std::unique_ptr<nfq_q_handle, int (*)(nfq_q_handle*)> queue(
      nfq_create_queue(handle.get(), uint16_t(netem.cfg.queue), on_queued, &netem),
      nfq_destroy_queue);
  if (!queue) {
    std::fprintf(stderr, "nfq_netem: cannot bind queue %d: %s\n", netem.cfg.queue,
                 std::strerror(errno));
    return 3;
  }
  netem.queue = queue.get();
  // Metadata only: the verdict needs the packet id, not the payload. GSO
  // lets the kernel queue TCP's large segments whole instead of cutting
  // them to the MTU first (fewer, cheaper messages; the same TCP stream).
  if (nfq_set_mode(queue.get(), NFQNL_COPY_META, 0) < 0) {
    std::fprintf(stderr, "nfq_netem: nfq_set_mode: %s\n", std::strerror(errno));
    return 3;
  }
  nfq_set_queue_flags(queue.get(), NFQA_CFG_F_GSO, NFQA_CFG_F_GSO);
  // A delay holds a whole window of packets per connection; the default
  // 1024 would make the kernel drop what the test did not ask to drop.
  nfq_set_queue_maxlen(queue.get(), 65536);
  // An overrun socket loses queue messages, and a packet whose message is
  // lost is never given a verdict: ask for a big buffer and no ENOBUFS.
  nfnl_rcvbufsiz(nfq_nfnlh(handle.get()), 16u << 20);
  const int fd = nfq_fd(handle.get());
  int one = 1;
  setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof(one));
  std::fprintf(stderr, "nfq_netem: queue %d bound (delay %.3g ms, jitter %.3g ms, reorder %.3g %%, "
               "loss %.3g %%, seed %llu)\n",
               netem.cfg.queue, netem.cfg.delay_ms, netem.cfg.jitter_ms, netem.cfg.reorder_pct,
               netem.cfg.loss_pct, static_cast<unsigned long long>(netem.cfg.seed));

  std::vector<char> buf(1 << 16);
  auto drain = [&] {  // every queue message waiting in the socket
    for (;;) {
      const ssize_t n = recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
      if (n < 0) break;  // EAGAIN, or an overrun NETLINK_NO_ENOBUFS did not stop
      nfq_handle_packet(handle.get(), buf.data(), int(n));
    }
  };
  int64_t next_due = -1;
  while (!g_stop) {
    timespec wait{}, *timeout = nullptr;
    if (next_due >= 0) {
      const int64_t ns = std::max<int64_t>(0, next_due - now_ns());
      wait = {time_t(ns / 1000000000), long(ns % 1000000000)};
      timeout = &wait;
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = ppoll(&p, 1, timeout, nullptr);
    if (ready < 0 && errno != EINTR) {
      std::fprintf(stderr, "nfq_netem: ppoll: %s\n", std::strerror(errno));
      break;
    }
    if (ready > 0) drain();
    next_due = netem.release_due(now_ns());
  }
  // Destroying the queue drops what it still holds: take in what is still
  // in the socket and release it all first.
  drain();
  netem.release_due(INT64_MAX);
  std::fprintf(stderr,
               "nfq_netem: queue %d: packets=%llu delayed=%llu reordered=%llu dropped=%llu "
               "verdict_errors=%llu %s\n",
               netem.cfg.queue, static_cast<unsigned long long>(netem.arrived),
               static_cast<unsigned long long>(netem.delayed),
               static_cast<unsigned long long>(netem.reordered),
               static_cast<unsigned long long>(netem.dropped),
               static_cast<unsigned long long>(netem.verdict_errors),
               kernel_counters(netem.cfg.queue).c_str());
  return 0;
}
