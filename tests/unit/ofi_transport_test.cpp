// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Two libfabric transports (ranks 0 and 1) inside one process, on every
// provider we ship tests for. The test thread drives both sides' progress
// (shm, tcp;ofi_rxm and net use manual data progress). tcp and net run on
// "lo" only.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <rdma/fabric.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "base/raise.h"
#include "transport/ofi/transport.h"

namespace gradwire::transport::ofi {
namespace {

using namespace std::chrono_literals;

struct ProviderCase {
  const char* provider;
  const char* iface;
};

std::string case_name(const testing::TestParamInfo<ProviderCase>& info) {
  std::string name = info.param.provider;
  std::replace_if(name.begin(), name.end(), [](char c) { return !isalnum(c); }, '_');
  return name;
}

class OfiTransportTest : public testing::TestWithParam<ProviderCase> {
 protected:
  void open_pair(Config base = {}) {
    base.provider = GetParam().provider;
    base.iface = GetParam().iface;
    for (int r = 0; r < 2; ++r) {
      base.rank = r;
      // One thread holds both ranks: a refused post must progress the peer.
      base.while_refused = [this, peer = 1 - r] { t_[peer]->progress(); };
      t_[r] = open(base);
    }
    std::vector<std::string> addresses = {t_[0]->address(), t_[1]->address()};
    t_[0]->connect(addresses);
    t_[1]->connect(addresses);
  }

  // Drives both ends until every request is done; fails after `limit`.
  void wait(std::initializer_list<Request*> reqs, std::chrono::milliseconds limit = 2000ms) {
    Deadline deadline = Deadline::after(limit);
    auto all_done = [&] {
      return std::all_of(reqs.begin(), reqs.end(), [](Request* r) { return r->done(); });
    };
    while (!all_done()) {
      ASSERT_FALSE(deadline.expired()) << "requests not done in time";
      t_[0]->progress();
      t_[1]->progress();
    }
  }

  static std::vector<char> pattern(size_t n, int seed) {
    std::vector<char> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>((i * 131 + seed * 7 + (i >> 12)) & 0xff);
    return v;
  }

  // Sends `n` bytes 0 -> 1 and checks them; receive first or send first.
  void exchange(size_t n, bool recv_first) {
    SCOPED_TRACE(testing::Message() << n << " bytes, recv_first=" << recv_first);
    auto src = pattern(n, static_cast<int>(n % 251));
    std::vector<char> dst(n + 1, '\x5a');  // one guard byte past the end
    Request send, recv;
    Deadline d = Deadline::after(2s);
    if (recv_first) t_[1]->irecv(recv, 0, dst.data(), n, 42, d);
    t_[0]->isend(send, 1, src.data(), n, 42, d);
    if (!recv_first) t_[1]->irecv(recv, 0, dst.data(), n, 42, d);
    wait({&send, &recv}, 3000ms);
    ASSERT_EQ(send.state, Request::State::Done) << send.error;
    ASSERT_EQ(recv.state, Request::State::Done) << recv.error;
    EXPECT_EQ(recv.received, n);
    EXPECT_EQ(recv.transport_private, 0);
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin())) << "content differs";
    EXPECT_EQ(dst[n], '\x5a') << "wrote past the posted length";
  }

  std::unique_ptr<Transport> t_[2];
};

TEST_P(OfiTransportTest, ReportsProperties) {
  open_pair();
  const Properties& p = t_[0]->properties();
  EXPECT_EQ(p.provider, GetParam().provider);
  EXPECT_GT(p.max_msg_size, 0u);
  EXPECT_LE(p.inject_size, p.max_msg_size);
  EXPECT_FALSE(p.registration_required);  // shm and tcp;ofi_rxm: no FI_MR_LOCAL
  EXPECT_FALSE(t_[0]->address().empty());
  EXPECT_NE(t_[0]->address(), t_[1]->address());
}

TEST_P(OfiTransportTest, SizesAroundThresholds) {
  open_pair();
  size_t inject = t_[0]->properties().inject_size;
  for (size_t n : {size_t{0}, size_t{1}, inject, inject + 1, size_t{1} << 20}) {
    exchange(n, true);
    exchange(n, false);
  }
}

TEST_P(OfiTransportTest, SixtyFourMiB) {
  open_pair();
  exchange(size_t{64} << 20, true);
}

TEST_P(OfiTransportTest, TagsMatchRegardlessOfPostingOrder) {
  open_pair();
  constexpr int kCount = 64;
  constexpr size_t kLen = 10000;  // above inject: these stay outstanding
  std::vector<std::vector<char>> src, dst(kCount, std::vector<char>(kLen, 0));
  std::vector<Request> sends(kCount), recvs(kCount);
  Deadline d = Deadline::after(2s);
  for (int i = 0; i < kCount; ++i) {
    src.push_back(pattern(kLen, i));
    t_[0]->isend(sends[i], 1, src[i].data(), kLen, 1000 + i, d);
  }
  // Receives posted in reverse, with some sends already arrived.
  for (int i = kCount - 1; i >= 0; --i) {
    t_[1]->irecv(recvs[i], 0, dst[i].data(), kLen, 1000 + i, d);
    if (i % 8 == 0) {
      t_[0]->progress();
      t_[1]->progress();
    }
  }
  Deadline limit = Deadline::after(3s);
  auto done = [&] {
    for (int i = 0; i < kCount; ++i)
      if (!sends[i].done() || !recvs[i].done()) return false;
    return true;
  };
  while (!done()) {
    ASSERT_FALSE(limit.expired());
    t_[0]->progress();
    t_[1]->progress();
  }
  for (int i = 0; i < kCount; ++i) {
    ASSERT_EQ(recvs[i].state, Request::State::Done) << recvs[i].error;
    EXPECT_EQ(dst[i], src[i]) << "tag " << 1000 + i << " received another message";
  }
}

TEST_P(OfiTransportTest, TruncationFailsTheReceive) {
  open_pair();
  auto src = pattern(100, 1);
  std::vector<char> dst(100, 0);
  Request send, recv;
  Deadline d = Deadline::after(2s);
  t_[1]->irecv(recv, 0, dst.data(), 50, 7, d);
  t_[0]->isend(send, 1, src.data(), 100, 7, d);
  wait({&send, &recv});
  EXPECT_EQ(recv.state, Request::State::Failed);
  EXPECT_EQ(recv.status, RequestStatus::Truncated);
  EXPECT_EQ(recv.error_code, FI_ETRUNC);
  EXPECT_NE(recv.error.find("sent more than the 50 bytes"), std::string::npos) << recv.error;
  EXPECT_TRUE(std::all_of(dst.begin() + 50, dst.end(), [](char c) { return c == 0; }));
}

TEST_P(OfiTransportTest, AlwaysRegister) {
  Config config;
  config.always_register = true;
  open_pair(config);
  for (size_t n : {size_t{0}, size_t{1}, size_t{5000}, size_t{1} << 20}) exchange(n, true);
  exchange(size_t{1} << 20, false);  // same buffers size: cache hits
}

// Note [registration handles]: nothing to register on shm and tcp unless
// asked; with always_register, ranges inside a handle go out with its
// registration, split messages included, and a handle that does not cover
// the buffer or belongs to another transport is refused.
TEST_P(OfiTransportTest, RegistrationHandles) {
  open_pair();
  std::vector<char> buf(4096);
  EXPECT_EQ(t_[0]->register_memory(buf.data(), buf.size()), nullptr);

  Config config;
  config.always_register = true;
  config.max_msg_size_override = 4096;
  open_pair(config);
  EXPECT_EQ(t_[0]->register_memory(buf.data(), 0), nullptr);
  const size_t n = (size_t{1} << 20) + 3;
  auto src = pattern(n, 5);
  std::vector<char> dst(n, 0);
  RegistrationPtr send_reg = t_[0]->register_memory(src.data(), src.size());
  RegistrationPtr recv_reg = t_[1]->register_memory(dst.data(), dst.size());
  ASSERT_NE(send_reg, nullptr);
  ASSERT_NE(recv_reg, nullptr);
  EXPECT_EQ(send_reg->base(), src.data());
  EXPECT_EQ(send_reg->length(), n);
  const bool split_ok = t_[0]->properties().ordered_sends;
  // The whole buffer (split into 4096-byte pieces where the provider keeps
  // them in order), then a range in the middle.
  for (auto [offset, len] : {std::pair<size_t, size_t>{0, split_ok ? n : 4096},
                             std::pair<size_t, size_t>{1000, 3000}}) {
    SCOPED_TRACE(testing::Message() << "offset " << offset << ", " << len << " bytes");
    std::fill(dst.begin(), dst.end(), 0);
    Request send, recv;
    Deadline d = Deadline::after(2s);
    t_[1]->irecv(recv, 0, dst.data() + offset, len, 11, d, recv_reg.get());
    t_[0]->isend(send, 1, src.data() + offset, len, 11, d, send_reg.get());
    wait({&send, &recv}, 3000ms);
    ASSERT_EQ(send.state, Request::State::Done) << send.error;
    ASSERT_EQ(recv.state, Request::State::Done) << recv.error;
    EXPECT_TRUE(std::equal(src.begin() + offset, src.begin() + offset + len, dst.begin() + offset));
  }
  Request bad;
  Deadline d = Deadline::after(2s);
  std::vector<char> other(64);
  try {
    t_[0]->isend(bad, 1, other.data(), other.size(), 12, d, send_reg.get());
    FAIL() << "a registration that does not cover the buffer was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(e.message().find("does not cover the buffer"), std::string::npos) << e.what();
  }
  try {
    t_[0]->isend(bad, 1, dst.data(), 64, 12, d, recv_reg.get());
    FAIL() << "another transport's registration was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(e.message().find("another transport made"), std::string::npos) << e.what();
  }
}

TEST_P(OfiTransportTest, SplitsMessagesLongerThanMaxMsgSize) {
  Config config;
  config.max_msg_size_override = 4096;
  config.always_register = true;
  open_pair(config);
  ASSERT_EQ(t_[0]->properties().max_msg_size, 4096u);
  ASSERT_LE(t_[0]->properties().inject_size, 4096u);
  if (!t_[0]->properties().ordered_sends) GTEST_SKIP() << "provider does not offer FI_ORDER_SAS";
  for (size_t n : {size_t{4096}, size_t{4097}, size_t{3 * 4096}, (size_t{1} << 20) + 3}) {
    exchange(n, true);
    exchange(n, false);
  }
  // Two split messages with the same tag in flight stay in order.
  auto a = pattern(10000, 1), b = pattern(10000, 2);
  std::vector<char> ra(10000), rb(10000);
  Request sa, sb, qa, qb;
  Deadline d = Deadline::after(2s);
  t_[0]->isend(sa, 1, a.data(), a.size(), 9, d);
  t_[0]->isend(sb, 1, b.data(), b.size(), 9, d);
  t_[1]->irecv(qa, 0, ra.data(), ra.size(), 9, d);
  t_[1]->irecv(qb, 0, rb.data(), rb.size(), 9, d);
  wait({&sa, &sb, &qa, &qb});
  EXPECT_EQ(ra, a);
  EXPECT_EQ(rb, b);
}

TEST_P(OfiTransportTest, CancelAllFailsUnmatchedReceiveAndLeavesBufferAlone) {
  open_pair();
  std::vector<char> dst(4096, '\x11');
  Request recv;
  t_[1]->irecv(recv, 0, dst.data(), dst.size(), 77, Deadline::after(2s));
  for (int i = 0; i < 10; ++i) t_[1]->progress();
  EXPECT_EQ(recv.state, Request::State::Pending);
  t_[1]->cancel_all();
  EXPECT_EQ(recv.state, Request::State::Failed);
  EXPECT_EQ(recv.status, RequestStatus::Cancelled);
  // A late message with that tag must not land in the cancelled buffer.
  auto src = pattern(4096, 3);
  Request send;
  t_[0]->isend(send, 1, src.data(), src.size(), 77, Deadline::after(2s));
  for (int i = 0; i < 200; ++i) {
    t_[0]->progress();
    t_[1]->progress();
  }
  EXPECT_TRUE(std::all_of(dst.begin(), dst.end(), [](char c) { return c == '\x11'; }));
  // The transport still works after cancelling. Where the late message
  // holds the connection until received (net: Note [connections that
  // stall]), it is received first.
  if (t_[1]->properties().stalls_on_unexpected) {
    std::vector<char> late(4096);
    Request drain;
    t_[1]->irecv(drain, 0, late.data(), late.size(), 77, Deadline::after(2s));
    wait({&send, &drain});
    EXPECT_EQ(late, src);
  }
  exchange(1000, true);
}

TEST_P(OfiTransportTest, RejectsBadArguments) {
  open_pair();
  char byte = 0;
  Request req;
  try {
    t_[0]->isend(req, 5, &byte, 1, 1, Deadline::after(1s));
    FAIL() << "peer 5 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
  }
  Request pending;
  std::vector<char> buf(100);
  t_[1]->irecv(pending, 0, buf.data(), buf.size(), 3, Deadline::after(1s));
  EXPECT_THROW(t_[1]->irecv(pending, 0, buf.data(), buf.size(), 3, Deadline::after(1s)), Error);
  t_[1]->cancel_all();
}

// Note [connections that stall] in transport/transport.h: an unexpected long
// message on the main lane must not hold back one on the side lane. On net
// (one TCP stream per endpoint pair, no buffering of long unexpected
// messages) this fails without the second endpoint; elsewhere the provider
// buffers the unexpected message.
TEST_P(OfiTransportTest, SideLaneIsNeverHeldBackByTheMainOne) {
  open_pair();
  EXPECT_EQ(t_[0]->properties().stalls_on_unexpected,
            std::string(GetParam().provider) == "net");
  if (std::string(GetParam().provider) == "shm") {
    // Measured: libfabric 1.17's shm holds a 16 KiB+ message behind an
    // unexpected one of another tag too, but gradwire never depends on
    // that: on one host point-to-point goes through its mailboxes (Note
    // [point-to-point on one host]).
    GTEST_SKIP() << "shm stalls as well; gradwire's messages on one host bypass it";
  }
  const size_t n = 256 << 10;
  auto a = pattern(n, 1), b = pattern(n, 2);
  std::vector<char> got_a(n), got_b(n);
  Request send_a, send_b, recv_a, recv_b;
  const Deadline d = Deadline::after(5s);
  t_[0]->isend(send_a, 1, a.data(), n, 7, d);                 // nobody receives it yet
  t_[0]->isend(send_b, 1, b.data(), n, 7 | kSideLaneBit, d);  // same tag, side lane
  t_[1]->irecv(recv_b, 0, got_b.data(), n, 7 | kSideLaneBit, d);
  wait({&send_b, &recv_b});
  ASSERT_EQ(recv_b.state, Request::State::Done) << recv_b.error;
  EXPECT_EQ(got_b, b);
  t_[1]->irecv(recv_a, 0, got_a.data(), n, 7, d);
  wait({&send_a, &recv_a});
  ASSERT_EQ(recv_a.state, Request::State::Done) << recv_a.error;
  EXPECT_EQ(got_a, a);
}

// net: libfabric's native RDM over TCP, the provider between hosts (Note
// [the provider across hosts] in runtime/setup.cpp).
INSTANTIATE_TEST_SUITE_P(Providers, OfiTransportTest,
                         testing::Values(ProviderCase{"shm", ""}, ProviderCase{"tcp;ofi_rxm", "lo"},
                                         ProviderCase{"net", "lo"}),
                         case_name);

TEST(OfiTransport, UnknownProviderIsInvalidArgument) {
  Config config;
  config.provider = "no_such_provider";
  try {
    open(config);
    FAIL() << "opened a provider that does not exist";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("no_such_provider"), std::string::npos) << e.what();
  }
}

TEST(OfiTransport, UnknownInterfaceNamesTheOfferedDomains) {
  Config config;
  config.provider = "tcp;ofi_rxm";
  config.iface = "no_such_iface0";
  try {
    open(config);
    FAIL() << "opened an interface that does not exist";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    std::string what = e.what();
    EXPECT_NE(what.find("no_such_iface0"), std::string::npos) << what;
    EXPECT_NE(what.find("lo"), std::string::npos) << what;
  }
}

TEST(OfiTransport, LoopbackInterfaceUsesLocalhost) {
  Config config;
  config.provider = "tcp;ofi_rxm";
  config.iface = "lo";
  auto t = open(config);
  std::string name = t->address();
  ASSERT_EQ(name.size(), sizeof(sockaddr_in)) << "expected an IPv4 address";
  sockaddr_in sin;
  std::memcpy(&sin, name.data(), sizeof(sin));
  EXPECT_EQ(sin.sin_family, AF_INET);
  EXPECT_EQ(ntohl(sin.sin_addr.s_addr), INADDR_LOOPBACK);
  EXPECT_NE(sin.sin_port, 0);
}

// Note [unique shm names] in transport/ofi/transport.cpp: a killed process
// leaves "/dev/shm/<pid>:<uid>:<index>" behind, and libfabric's default
// name for a later process with that pid collides with it (fi_enable:
// EBUSY). Plant such leftovers under this process's own pid, then open.
TEST(OfiTransport, ShmIgnoresRegionsLeftByAKilledProcessWithOurPid) {
  std::vector<std::string> planted;
  for (int index = 0; index < 8; ++index) {
    std::string name = fmt::format("/{}:{}:{}", ::getpid(), ::getuid(), index);
    int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd >= 0) {
      ::close(fd);
      planted.push_back(name);
    }
  }
  ASSERT_FALSE(planted.empty()) << "could not create a region in /dev/shm";
  Config config;
  config.provider = "shm";
  std::string error;
  try {
    auto a = open(config);
    config.rank = 1;
    auto b = open(config);
    EXPECT_EQ(a->address().rfind("gw_", 0), 0u) << a->address();
    EXPECT_NE(a->address(), b->address());
  } catch (const Error& e) {
    error = e.what();
  }
  for (const auto& name : planted) ::shm_unlink(name.c_str());
  EXPECT_EQ(error, "");
}

// A peer's fabric address is bytes from the network: a truncated or
// over-long one is refused before libfabric reads it.
TEST(OfiTransport, MalformedPeerAddressesAreProtocolErrors) {
  for (const char* provider : {"shm", "tcp;ofi_rxm"}) {
    SCOPED_TRACE(provider);
    Config config;
    config.provider = provider;
    if (std::string(provider) != "shm") config.iface = "lo";
    auto t = open(config);
    std::string good = t->address();
    std::string bad = std::string(provider) == "shm" ? std::string(good.size() + 10, 'x')
                                                     : good.substr(0, good.size() - 3);
    try {
      t->connect({good, bad});
      ADD_FAILURE() << "connected to a malformed address";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::Protocol) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank 1's fabric address is malformed"),
                std::string::npos) << e.what();
    }
  }
}

TEST(OfiTransport, AvailableProvidersIncludeShm) {
  auto names = available_providers();
  EXPECT_NE(std::find(names.begin(), names.end(), "shm"), names.end());
}

}  // namespace
}  // namespace gradwire::transport::ofi
