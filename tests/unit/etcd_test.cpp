// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The pure parts of the etcd store (Note [etcd over its JSON gateway] in
// src/bootstrap/etcd_store.cpp): its JSON reader, base64, the HTTP response
// parsers, the endpoint list; the etcd rendezvous read from the environment;
// the elastic close rules that leases and heartbeats added; and heartbeats
// between two sockets of this process (Note [heartbeats between hosts]).
// Against a real etcd: tests/etcd/store_test.cpp (ctest -L etcd).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include "bootstrap/etcd_store.h"
#include "bootstrap/http.h"
#include "bootstrap/json.h"
#include "elastic/membership.h"
#include "gradwire/error.h"
#include "gradwire/rendezvous.h"
#include "runtime/heartbeat.h"

namespace gradwire {
namespace {

using namespace bootstrap;
using std::chrono::milliseconds;

TEST(EtcdJson, ReadsEtcdAnswers) {
  std::string err;
  auto v = json::parse(
      R"({"header":{"cluster_id":"324952591200643719","revision":"12"},"kvs":[{"key":"Zm9v",)"
      R"("create_revision":"2","value":"YmFy"}],"count":"1","more":false,"x":[1,-2.5e3,null,true]})",
      &err);
  ASSERT_TRUE(v) << err;
  EXPECT_EQ(json::as_int(v->find("header")->find("revision")), 12);
  EXPECT_EQ(v->find("kvs")->items[0].find("value")->text, "YmFy");
  EXPECT_FALSE(json::as_bool(v->find("more")));
  EXPECT_FALSE(json::as_bool(v->find("absent")));
  EXPECT_EQ(v->find("x")->items.size(), 4u);
  EXPECT_EQ(json::as_int(&v->find("x")->items[0]), 1);
  EXPECT_FALSE(json::as_int(&v->find("x")->items[1]));  // not an integer
  auto s = json::parse(R"("a\"b\\c\u00e9\ud83d\ude00\n")", &err);
  ASSERT_TRUE(s) << err;
  EXPECT_EQ(s->text, "a\"b\\c\xc3\xa9\xf0\x9f\x98\x80\n");
}

TEST(EtcdJson, RefusesMalformedDocumentsNamingTheOffset) {
  for (const char* bad : {"", "{", "{\"a\":}", "[1,]", "{\"a\" 1}", "\"\\ud800\"", "01",
                          "{\"a\":1} x", "tru", "\"\x01\"", "-", "1.", "[\"\\x\"]"}) {
    std::string err;
    EXPECT_FALSE(json::parse(bad, &err)) << bad;
    EXPECT_NE(err.find("offset"), std::string::npos) << bad;
  }
  std::string deep(100, '[');
  std::string err;
  EXPECT_FALSE(json::parse(deep, &err));
  EXPECT_NE(err.find("deeply"), std::string::npos);
}

TEST(EtcdJson, Base64RoundTrips) {
  for (std::string s : {std::string(), std::string("f"), std::string("fo"), std::string("foo"),
                        std::string("\0\xff\x10 binary", 10)}) {
    EXPECT_EQ(json::base64_decode(json::base64_encode(s)), s);
  }
  EXPECT_EQ(json::base64_encode("foo"), "Zm9v");
  EXPECT_EQ(json::base64_encode("fo"), "Zm8=");
  for (const char* bad : {"Zm9", "Zm9v=", "Z===", "Zm*v", "=m9v"}) {
    EXPECT_FALSE(json::base64_decode(bad)) << bad;
  }
}

TEST(EtcdHttp, ParsesResponseHeads) {
  bool complete = false;
  std::string err;
  auto h = http::parse_head("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                            "Content-Length: 12\r\n\r\nbody", &complete, &err);
  ASSERT_TRUE(h) << err;
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(h->content_length, 12u);
  EXPECT_FALSE(h->chunked);
  EXPECT_FALSE(h->close);
  EXPECT_EQ(h->size, std::string("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 "Content-Length: 12\r\n\r\n").size());
  h = http::parse_head("HTTP/1.1 400 Bad Request\r\ntransfer-encoding: chunked\r\n"
                       "Connection: close\r\n\r\n", &complete, &err);
  ASSERT_TRUE(h) << err;
  EXPECT_EQ(h->status, 400);
  EXPECT_TRUE(h->chunked);
  EXPECT_TRUE(h->close);
  EXPECT_FALSE(http::parse_head("HTTP/1.1 200 OK\r\nContent-Len", &complete, &err));
  EXPECT_FALSE(complete);  // more to come
  for (const char* bad : {"SSH-2.0-OpenSSH\r\n\r\n", "HTTP/1.1 2x0 OK\r\n\r\n",
                          "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
                          "HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
                          "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"}) {
    EXPECT_FALSE(http::parse_head(bad, &complete, &err)) << bad;
    EXPECT_TRUE(complete) << bad;
  }
  EXPECT_FALSE(http::parse_head(std::string(http::kMaxHeadBytes, 'x'), &complete, &err));
  EXPECT_TRUE(complete);
}

TEST(EtcdHttp, DecodesChunksInAnyPieces) {
  const std::string body = "5;ext=1\r\nhello\r\n7\r\n world\n\r\n0\r\nTrailer: x\r\n\r\n";
  for (size_t piece : {size_t(1), size_t(2), size_t(5), body.size()}) {
    http::ChunkedDecoder d;
    std::string out;
    http::ChunkedDecoder::State st = http::ChunkedDecoder::State::More;
    for (size_t at = 0; at < body.size(); at += piece) {
      std::string_view in = std::string_view(body).substr(at, piece);
      while (!in.empty()) {
        size_t used = 0;
        st = d.feed(in, &used, &out);
        ASSERT_NE(st, http::ChunkedDecoder::State::Error) << d.error();
        in.remove_prefix(used);
        if (st == http::ChunkedDecoder::State::Done) break;
        ASSERT_GT(used, 0u);
      }
    }
    EXPECT_EQ(st, http::ChunkedDecoder::State::Done) << piece;
    EXPECT_EQ(out, "hello world\n") << piece;
  }
  for (const char* bad : {"zz\r\n", "5\r\nhelloXX", "5\nhello\r\n"}) {
    http::ChunkedDecoder d;
    std::string out;
    size_t used = 0;
    EXPECT_EQ(d.feed(bad, &used, &out), http::ChunkedDecoder::State::Error) << bad;
  }
}

TEST(EtcdEndpoints, ParsesAndRefusesNamingTheVariable) {
  auto e = parse_etcd_endpoints(split_list("http://10.0.0.5:2379,node-b:2380/,[::1]:2379"), "X");
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].host, "10.0.0.5");
  EXPECT_EQ(e[0].port, 2379);
  EXPECT_EQ(e[1].url, "http://node-b:2380");
  EXPECT_EQ(e[2].host, "::1");
  EXPECT_EQ(e[2].url, "http://[::1]:2379");
  for (const char* bad : {"", "http://a:2379,,http://b:2379", "https://a:2379", "a", "a:0",
                          "a:99999", "ftp://a:1", "http://a:2379/v3", ":2379", "a:23x9",
                          "a :2379", "[::1"}) {
    try {
      parse_etcd_endpoints(split_list(bad), "GRADWIRE_ETCD_ENDPOINTS");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& err) {
      EXPECT_EQ(err.code(), ErrorCode::InvalidArgument);
      EXPECT_NE(std::string(err.what()).find("GRADWIRE_ETCD_ENDPOINTS"), std::string::npos);
    }
  }
  try {
    parse_etcd_endpoints({"https://a:2379"}, "X");
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("TLS"), std::string::npos) << err.what();
  }
}

// Sets variables for one test and restores them.
class ScopedEnv {
 public:
  void set(const char* name, const char* value) {
    if (!saved_.count(name)) {
      const char* old = std::getenv(name);
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    for (auto& [k, v] : saved_) {
      if (v) ::setenv(k.c_str(), v->c_str(), 1);
      else ::unsetenv(k.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

void expect_refused(const char* needle) {
  try {
    (void)Rendezvous::from_environment();
    ADD_FAILURE() << "accepted; expected an error naming " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(EtcdRendezvous, ReadsTheEnvironmentStrictly) {
  ScopedEnv env;
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "GRADWIRE_STORE_DIR", "RANK", "WORLD_SIZE",
                        "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}) {
    env.set(v, nullptr);
  }
  env.set("GRADWIRE_ETCD_ENDPOINTS", "http://10.0.0.5:2379,10.0.0.6:2379");
  env.set("GRADWIRE_ETCD_PREFIX", "/gradwire/job-7/");
  Rendezvous r = Rendezvous::from_environment();
  EXPECT_EQ(r.kind, Rendezvous::Kind::Etcd);
  EXPECT_EQ(r.size, 0);  // elastic: ranks assigned by the membership
  EXPECT_EQ(r.endpoints.size(), 2u);
  EXPECT_EQ(r.key_prefix, "/gradwire/job-7/");
  env.set("RANK", "1");
  env.set("WORLD_SIZE", "3");
  r = Rendezvous::from_environment();
  EXPECT_EQ(r.rank, 1);
  EXPECT_EQ(r.size, 3);
  env.set("WORLD_SIZE", nullptr);
  expect_refused("WORLD_SIZE");
  env.set("RANK", nullptr);
  env.set("GRADWIRE_ETCD_PREFIX", nullptr);
  expect_refused("GRADWIRE_ETCD_PREFIX");
  env.set("GRADWIRE_ETCD_PREFIX", "has space");
  expect_refused("GRADWIRE_ETCD_PREFIX");
  env.set("GRADWIRE_ETCD_PREFIX", "/ok/");
  env.set("GRADWIRE_ETCD_ENDPOINTS", "https://10.0.0.5:2379");
  expect_refused("TLS");
  env.set("GRADWIRE_ETCD_ENDPOINTS", "10.0.0.5");
  expect_refused("GRADWIRE_ETCD_ENDPOINTS");
  env.set("GRADWIRE_ETCD_ENDPOINTS", "");
  expect_refused("GRADWIRE_ETCD_ENDPOINTS");
}

TEST(EtcdRendezvous, AFixedWorldNeedsASize) {
  try {
    (void)make(Rendezvous::etcd({"http://127.0.0.1:1"}, "/p/"), Options{});
    ADD_FAILURE() << "a size-0 etcd rendezvous made a world";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("ElasticGroup::join"), std::string::npos) << e.what();
  }
}

TEST(ElasticCloseRules, MaxSizeFirstGenerationLeasesAndSuspicion) {
  using elastic::CloseQuery;
  using elastic::may_close;
  CloseQuery q;
  q.count = 3;
  q.max_size = 3;
  EXPECT_TRUE(may_close(q));  // at max at once
  q.count = 5;
  EXPECT_EQ(elastic::closed_size(q), 3);
  // The first generation of an open size: at min, after the quiet time.
  q = CloseQuery{};
  q.first = true;
  q.min_size = 2;
  q.settle = milliseconds(2000);
  q.count = 2;
  q.quiet = milliseconds(100);
  EXPECT_FALSE(may_close(q));
  q.quiet = milliseconds(2000);
  EXPECT_TRUE(may_close(q));
  q.count = 1;
  EXPECT_FALSE(may_close(q));
  // After a failure with a host only suspected lost: expect needs the majority.
  q = CloseQuery{};
  q.continuing = true;
  q.previous_size = 4;
  q.count = q.peers = q.expect = 2;
  q.suspected = true;
  EXPECT_FALSE(may_close(q));  // 2 of 4: the other half may be alive behind a broken link
  q.suspected = false;
  EXPECT_TRUE(may_close(q));  // they were seen to exit
  q.suspected = true;
  q.alive_arrived = true;  // etcd: the other half's leases are gone
  EXPECT_TRUE(may_close(q));
  q.previous_size = 3;
  q.alive_arrived = false;
  EXPECT_TRUE(may_close(q));  // 2 of 3 is a majority
  // Joiners never close on leases.
  q = CloseQuery{};
  q.count = 2;
  q.alive_arrived = true;
  EXPECT_FALSE(may_close(q));
}

TEST(Heartbeats, PeersRoundTripAndMalformedOnesAreRefused) {
  Heartbeats::Peer p{"10.0.0.5", 4000, 0xfeedfacecafe, 42, "node-b"};
  auto d = Heartbeats::decode(Heartbeats::encode(p));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->ip, "10.0.0.5");
  EXPECT_EQ(d->port, 4000);
  EXPECT_EQ(d->nonce, p.nonce);
  EXPECT_EQ(d->pid, 42);
  EXPECT_EQ(d->host, "node-b");
  for (const char* bad : {"", "10.0.0.5|0|1|1|h", "nonsense|1|1|1|h", "10.0.0.5|1|x|1|h",
                          "10.0.0.5|70000|1|1|h"}) {
    EXPECT_FALSE(Heartbeats::decode(bad)) << bad;
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(0x0a4e0002);  // 10.78.0.2
  std::string name(reinterpret_cast<const char*>(&a), sizeof a);
  EXPECT_EQ(Heartbeats::local_ip(name + name, ""), "10.78.0.2");  // net: one per lane
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(Heartbeats::local_ip(std::string(reinterpret_cast<const char*>(&a), sizeof a), ""), "");
  EXPECT_EQ(Heartbeats::local_ip("fi_shm://1234", ""), "");
}

// Two ranks' heartbeats on loopback: each hears the other; a goodbye is
// never reported; a peer that stops without one is, after the timeout.
TEST(Heartbeats, SilenceIsReportedAndAGoodbyeIsNot) {
  const milliseconds timeout(300);
  Heartbeats a(0, {false, true, true}, timeout, "127.0.0.1");
  auto b = std::make_unique<Heartbeats>(1, std::vector<bool>{true, false, true}, timeout,
                                        "127.0.0.1");
  // Rank 2 plays a process that dies: a socket that answers with raw
  // datagrams (48 bytes: magic, version, flags, rank, nonces), then stops.
  int s = ::socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_in me{};
  me.sin_family = AF_INET;
  me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&me), sizeof me), 0);
  socklen_t len = sizeof me;
  ASSERT_EQ(::getsockname(s, reinterpret_cast<sockaddr*>(&me), &len), 0);
  Heartbeats::Peer fake{"127.0.0.1", ntohs(me.sin_port), 77, 1234, "host-c"};
  a.set_peer(1, b->self());
  a.set_peer(2, fake);
  b->set_peer(0, a.self());
  EXPECT_EQ(a.unknown(), std::vector<int>{});
  EXPECT_EQ(b->unknown(), std::vector<int>{2});
  struct {
    uint32_t magic = 0x47574842;
    uint8_t version = 1, flags = 0;
    uint16_t reserved = 0;
    int32_t rank = 2;
    uint32_t pad = 0;
    uint64_t to, from = 77, spare[2] = {0, 0};
  } dg;
  dg.to = a.self().nonce;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  to.sin_port = htons(a.self().port);
  for (int i = 0; i < 5; ++i) {
    ::sendto(s, &dg, sizeof dg, 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
    std::this_thread::sleep_for(milliseconds(30));
  }
  EXPECT_TRUE(a.silent().empty());
  std::this_thread::sleep_for(timeout + milliseconds(150));
  auto silent = a.silent();
  ASSERT_EQ(silent.size(), 1u);  // rank 2, not rank 1 (alive)
  EXPECT_EQ(silent[0].first, 2);
  EXPECT_EQ(silent[0].second.host, "host-c");
  b.reset();  // rank 1 says goodbye
  std::this_thread::sleep_for(timeout + milliseconds(150));
  silent = a.silent();
  ASSERT_EQ(silent.size(), 1u);
  EXPECT_EQ(silent[0].first, 2);
  ::close(s);
}

}  // namespace
}  // namespace gradwire
