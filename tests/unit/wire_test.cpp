// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The pure parsers of everything gradwire reads from a peer: store frames
// and handshake messages, the server's handshake state machine, collective
// fingerprints, failure reports and flight-recorder dumps. (The same
// functions the fuzzers in tests/fuzz/ drive.)
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "bootstrap/store_auth.h"
#include "bootstrap/store_handshake.h"
#include "bootstrap/store_wire.h"
#include "diag/fingerprint.h"
#include "diag/fr_report.h"
#include "runtime/watchdog.h"
#include "gradwire/error.h"
#include "gradwire/version.h"

namespace gradwire {
namespace {

using namespace bootstrap::tcp_store;

std::string u32(uint32_t v) { return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)}; }
std::string frame(uint8_t cmd, uint32_t klen, uint32_t vlen, const std::string& body = "") {
  return std::string(1, char(cmd)) + u32(klen) + u32(vlen) + body;
}

TEST(StoreWire, RequestsRoundTripAndNeedTheWholeFrame) {
  const std::string set = encode_request(kSet, "key", "value");
  for (size_t n = 0; n < set.size(); ++n) {
    EXPECT_EQ(parse_request(std::string_view(set).substr(0, n)).status, Parse::NeedMore) << n;
  }
  const std::string two = set + "trailing";  // parse results are views into it
  auto r = parse_request(two);
  ASSERT_EQ(r.status, Parse::Ok);
  EXPECT_EQ(r.consumed, set.size());
  EXPECT_EQ(r.request.key, "key");
  EXPECT_EQ(r.request.value, "value");

  const std::string wait = encode_request(kWait, "k", u32(1234));
  r = parse_request(wait);
  ASSERT_EQ(r.status, Parse::Ok);
  EXPECT_EQ(r.request.wait_ms, 1234u);
  EXPECT_EQ(r.request.value, "");
}

TEST(StoreWire, MalformedRequestsAreBadAfterTheHeader) {
  // Decided on the 9-byte header alone: no body is waited for.
  EXPECT_STREQ(parse_request(frame(9, 1, 0)).error, "unknown command");
  EXPECT_EQ(parse_request(frame(kSet, 0xFFFFFFFFu, 0)).status, Parse::Bad);  // bad length
  EXPECT_EQ(parse_request(frame(kSet, 0, 1)).status, Parse::Bad);            // empty key
  EXPECT_EQ(parse_request(frame(kSet, 3, (16u << 20) + 1)).status, Parse::Bad);
  // Offsets that would wrap a 32-bit sum: each length is capped first.
  EXPECT_EQ(parse_request(frame(kSet, 4096, 0xFFFFF000u)).status, Parse::Bad);
  EXPECT_EQ(parse_request(frame(kGet, 1, 1, "kv")).status, Parse::Bad);
  EXPECT_EQ(parse_request(frame(kWait, 1, 5, "k12345")).status, Parse::Bad);
  EXPECT_EQ(parse_request("GET / HTTP/1.1\r\n").status, Parse::Bad);
}

TEST(StoreWire, ResponseHeaders) {
  ResponseHeader h;
  const uint8_t ok[5] = {kOk, 0, 0, 0, 0};
  EXPECT_EQ(parse_response_header(ok, &h), nullptr);
  const uint8_t found[5] = {kFound, 0, 0, 1, 0};
  EXPECT_EQ(parse_response_header(found, &h), nullptr);
  EXPECT_EQ(h.length, 256u);
  const uint8_t status[5] = {7, 0, 0, 0, 0};
  EXPECT_NE(parse_response_header(status, &h), nullptr);
  const uint8_t huge[5] = {kFound, 0xFF, 0xFF, 0xFF, 0xFF};
  EXPECT_NE(parse_response_header(huge, &h), nullptr);
  const uint8_t value_on_ok[5] = {kOk, 0, 0, 0, 1};
  EXPECT_NE(parse_response_header(value_on_ok, &h), nullptr);
}

TEST(StoreWire, HandshakeMessagesRoundTrip) {
  ClientHello ch;
  ch.has_secret = true;
  ch.version_text = "0.1.0";
  ch.nonce.fill(7);
  const std::string bytes = encode_client_hello(ch);
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_EQ(parse_handshake(std::string_view(bytes).substr(0, n)).status, Parse::NeedMore) << n;
  }
  auto m = parse_handshake(bytes);
  ASSERT_EQ(m.status, Parse::Ok);
  EXPECT_EQ(m.header.version, kProtocolVersion);
  EXPECT_EQ(m.header.type, kClientHello);
  ClientHello back;
  ASSERT_EQ(parse_client_hello(m.body, &back), nullptr);
  EXPECT_TRUE(back.has_secret);
  EXPECT_EQ(back.version_text, "0.1.0");
  EXPECT_EQ(back.nonce, ch.nonce);
  // Every truncation of the body, and trailing bytes, are malformed.
  for (size_t n = 0; n < m.body.size(); ++n) {
    EXPECT_NE(parse_client_hello(m.body.substr(0, n), &back), nullptr) << n;
  }
  EXPECT_NE(parse_client_hello(std::string(m.body) + "x", &back), nullptr);

  ServerHello sh;
  sh.verdict = kProceed;
  sh.auth = kAuthHmacSha256;
  sh.version_text = "9.9.9";
  sh.nonce.fill(1);
  sh.proof.fill(2);
  const std::string sbytes = encode_server_hello(sh);
  m = parse_handshake(sbytes);
  ASSERT_EQ(m.status, Parse::Ok);
  ServerHello sback;
  ASSERT_EQ(parse_server_hello(m.body, &sback), nullptr);
  EXPECT_EQ(sback.proof, sh.proof);
  EXPECT_EQ(sback.version_text, "9.9.9");
}

TEST(StoreWire, MalformedHandshakesAreBad) {
  EXPECT_EQ(parse_handshake("X").status, Parse::Bad);  // wrong magic, from the first byte
  EXPECT_EQ(parse_handshake("GW").status, Parse::NeedMore);
  EXPECT_EQ(parse_handshake(std::string("GWHS\0\1\1\xFF\xFF", 9)).status, Parse::Bad);  // body cap
  ClientHello back;
  std::string body = std::string(1, '\0') + std::string(1, char(3)) +
                     "a\x1b"
                     "b" +
                     std::string(kNonceBytes, 'n');
  EXPECT_STREQ(parse_client_hello(body, &back), "version text is not printable ASCII");
  body = std::string(1, '\x02') + std::string(1, '\0') + std::string(kNonceBytes, 'n');
  EXPECT_STREQ(parse_client_hello(body, &back), "unknown ClientHello flags");
  uint8_t v;
  EXPECT_NE(parse_verdict("\x05", &v), nullptr);
  Proof p;
  EXPECT_NE(parse_client_proof("short", &p), nullptr);
}

// The server's half, driven as the store drives it.
std::string client_hello(bool has_secret, Nonce nonce, uint16_t version = kProtocolVersion) {
  ClientHello ch;
  ch.has_secret = has_secret;
  ch.version_text = "test";
  ch.nonce = nonce;
  return encode_client_hello(ch, version);
}

ServerHello server_hello_of(const std::string& reply) {
  auto m = parse_handshake(reply);
  EXPECT_EQ(m.status, Parse::Ok);
  ServerHello sh;
  EXPECT_EQ(parse_server_hello(m.body, &sh), nullptr);
  return sh;
}

TEST(ServerHandshake, WithoutASecretEveryCurrentClientIsLetIn) {
  const std::string none;
  ServerHandshake hs(none);
  const std::string hello = client_hello(false, Nonce{});
  auto step = hs.feed(std::string_view(hello).substr(0, 5));
  EXPECT_EQ(step.outcome, ServerHandshake::Outcome::Pending);
  EXPECT_EQ(step.consumed, 0u);
  step = hs.feed(hello + "first frame");
  ASSERT_EQ(step.outcome, ServerHandshake::Outcome::Ready);
  EXPECT_EQ(step.consumed, hello.size());
  EXPECT_EQ(server_hello_of(step.reply).auth, kAuthNone);
}

TEST(ServerHandshake, ProofOverBothNoncesLetsIn) {
  const std::string secret = "0123456789abcdef-test";
  ServerHandshake hs(secret);
  Nonce cn;
  cn.fill(42);
  auto step = hs.feed(client_hello(true, cn));
  ASSERT_EQ(step.outcome, ServerHandshake::Outcome::Pending);
  const ServerHello sh = server_hello_of(step.reply);
  EXPECT_EQ(sh.auth, kAuthHmacSha256);
  EXPECT_TRUE(bootstrap::proofs_equal(
      sh.proof,
      bootstrap::store_proof(secret, bootstrap::Role::Server, kProtocolVersion, cn, sh.nonce)));
  const std::string proof = encode_client_proof(
      bootstrap::store_proof(secret, bootstrap::Role::Client, kProtocolVersion, cn, sh.nonce));
  // One byte at a time: the state machine never needs a whole message at once.
  for (size_t i = 0; i + 1 < proof.size(); ++i) {
    EXPECT_EQ(hs.feed(std::string_view(proof).substr(0, i + 1)).outcome,
              ServerHandshake::Outcome::Pending);
  }
  step = hs.feed(proof);
  ASSERT_EQ(step.outcome, ServerHandshake::Outcome::Ready) << step.why;
  uint8_t verdict = 9;
  auto m = parse_handshake(step.reply);
  ASSERT_EQ(parse_verdict(m.body, &verdict), nullptr);
  EXPECT_EQ(verdict, kAccepted);
}

TEST(ServerHandshake, RefusesWrongProofsMissingSecretsAndOtherVersions) {
  const std::string secret = "0123456789abcdef-test";
  {
    ServerHandshake hs(secret);
    Proof wrong{};
    auto step = hs.feed(client_hello(true, Nonce{}) + encode_client_proof(wrong));
    EXPECT_EQ(step.outcome, ServerHandshake::Outcome::Refused);
    EXPECT_NE(step.why.find("wrong proof"), std::string::npos) << step.why;
  }
  {
    ServerHandshake hs(secret);
    auto step = hs.feed(client_hello(false, Nonce{}));
    EXPECT_EQ(step.outcome, ServerHandshake::Outcome::Refused);
    EXPECT_EQ(server_hello_of(step.reply).verdict, kSecretRequired);
  }
  {
    ServerHandshake hs(secret);
    auto step = hs.feed(client_hello(true, Nonce{}, kProtocolVersion + 1));
    EXPECT_EQ(step.outcome, ServerHandshake::Outcome::Refused);
    EXPECT_NE(step.why.find("store protocol " + std::to_string(kProtocolVersion + 1) +
                            " (gradwire test)"), std::string::npos) << step.why;
    auto m = parse_handshake(step.reply);
    EXPECT_EQ(m.header.version, kProtocolVersion);  // the refusal names our version
  }
  {
    ServerHandshake hs(secret);
    auto step = hs.feed(frame(kSet, 1, 1, "kv"));  // a command before any handshake
    EXPECT_EQ(step.outcome, ServerHandshake::Outcome::Refused);
    EXPECT_NE(step.why.find("wrong magic"), std::string::npos) << step.why;
  }
}

TEST(StoreAuth, ProofsDependOnSecretRoleAndBothNonces) {
  Nonce a{}, b{};
  b[31] = 1;
  const std::string s = "0123456789abcdef";
  const Proof p = bootstrap::store_proof(s, bootstrap::Role::Client, 1, a, b);
  EXPECT_TRUE(
      bootstrap::proofs_equal(p, bootstrap::store_proof(s, bootstrap::Role::Client, 1, a, b)));
  EXPECT_FALSE(bootstrap::proofs_equal(
      p, bootstrap::store_proof(s + "x", bootstrap::Role::Client, 1, a, b)));
  EXPECT_FALSE(
      bootstrap::proofs_equal(p, bootstrap::store_proof(s, bootstrap::Role::Server, 1, a, b)));
  EXPECT_FALSE(
      bootstrap::proofs_equal(p, bootstrap::store_proof(s, bootstrap::Role::Client, 1, b, a)));
  EXPECT_FALSE(
      bootstrap::proofs_equal(p, bootstrap::store_proof(s, bootstrap::Role::Client, 2, a, b)));
  const std::string g1 = bootstrap::generate_secret(), g2 = bootstrap::generate_secret();
  EXPECT_EQ(g1.size(), 64u);
  EXPECT_NE(g1, g2);
  EXPECT_NE(bootstrap::random_nonce(), bootstrap::random_nonce());
}

// ---- collective fingerprints ----

TEST(FingerprintWire, DecodesOnlyWhatThisBuildSends) {
  const Fingerprint f =
      make_fingerprint(5, CollectiveCall::allreduce(nullptr, nullptr, 77, DataType::BFloat16, ReduceOp::Max));
  Fingerprint out;
  ASSERT_EQ(decode_fingerprint(&f, sizeof(f), &out), nullptr);
  EXPECT_EQ(out.count, 77u);
  EXPECT_STREQ(decode_fingerprint(&f, sizeof(f) - 1, &out), "wrong size");
  auto corrupt = [&](auto edit) {
    Fingerprint g = f;
    edit(g);
    return decode_fingerprint(&g, sizeof(g), &out);
  };
  EXPECT_STREQ(corrupt([](Fingerprint& g) { g.magic ^= 1; }), "wrong magic");
  EXPECT_STREQ(corrupt([](Fingerprint& g) { g.op = 200; }), "unknown collective");
  EXPECT_STREQ(corrupt([](Fingerprint& g) { g.dtype = 99; }), "unknown dtype");
  EXPECT_STREQ(corrupt([](Fingerprint& g) { g.redop = 17; }), "unknown reduce op");
  EXPECT_NE(corrupt([](Fingerprint& g) { g.has_redop = 2; }), nullptr);
  EXPECT_STREQ(corrupt([](Fingerprint& g) { g.root = -5; }), "negative root");
}

// ---- failure reports (the watchdog's store key) ----

TEST(FailureReport, ParsesStrictly) {
  auto r = job::parse_failure_report(
      "3\x1f"
      "1\x1fgradwire Timeout: it broke");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->rank, 3);
  EXPECT_EQ(r->code, ErrorCode::Timeout);
  EXPECT_EQ(r->reason, "gradwire Timeout: it broke");
  EXPECT_FALSE(job::parse_failure_report("no separators").has_value());
  EXPECT_FALSE(job::parse_failure_report("99999999999999999999\x1f"
                                         "1\x1fx")
                   .has_value());
  EXPECT_FALSE(job::parse_failure_report("-1\x1f"
                                         "1\x1fx")
                   .has_value());
  EXPECT_FALSE(job::parse_failure_report("1 \x1f"
                                         "1\x1fx")
                   .has_value());
  // A code this build does not know becomes Aborted; a huge reason is cut.
  r = job::parse_failure_report(
      "0\x1f"
      "4242\x1f" +
      std::string(1 << 20, 'r'));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->code, ErrorCode::Aborted);
  EXPECT_EQ(r->reason.size(), job::kMaxFailureReasonBytes);
}

// ---- flight-recorder dumps ----

std::string dump_with(const std::string& fields) {
  return "{\"format\": \"gradwire-fr/1\", \"rank\": 0, \"world_size\": 2" + fields + "}";
}

ErrorCode parse_error(const std::string& json) {
  try {
    fr::parse_dump(json, "x.json");
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "parsed: " << json.substr(0, 200);
  return ErrorCode::Internal;
}

TEST(FlightRecorderWire, UntrustedDumpsAreBoundedAndRangeChecked) {
  EXPECT_NO_THROW(fr::parse_dump(dump_with(""), "x.json"));
  EXPECT_EQ(parse_error(std::string(100000, '[')), ErrorCode::Protocol);  // no stack overflow
  EXPECT_EQ(parse_error(dump_with(", \"x\": " + std::string(65, '[') + std::string(65, ']'))),
            ErrorCode::Protocol);
  EXPECT_EQ(parse_error("{\"format\": \"gradwire-fr/1\", \"rank\": 5, \"world_size\": 2}"),
            ErrorCode::Protocol);
  EXPECT_EQ(parse_error("{\"format\": \"gradwire-fr/1\", \"rank\": 0, \"world_size\": 99999999}"),
            ErrorCode::Protocol);
  EXPECT_EQ(parse_error(dump_with(", \"dumped_us\": -9223372036854775807")), ErrorCode::Protocol);
  EXPECT_EQ(parse_error(dump_with(", \"entries\": [{\"seq\": 4294967296}]")), ErrorCode::Protocol);
  EXPECT_EQ(parse_error(dump_with(", \"communicators\": [{\"id\": 70000}]")), ErrorCode::Protocol);
  EXPECT_EQ(parse_error(dump_with(", \"host\": \"\\uZZZZ\"")), ErrorCode::Protocol);
  EXPECT_EQ(parse_error(dump_with(", \"pid\": +5")), ErrorCode::Protocol);
  EXPECT_EQ(parse_error(dump_with(", \"pid\": inf")), ErrorCode::Protocol);
  EXPECT_EQ(parse_error(dump_with(", \"host\": \"unterminated")), ErrorCode::Protocol);
  // diagnose() copes with a huge peer number in an error message.
  const std::string odd = dump_with(
      ", \"communicators\": [{\"id\": 0, \"name\": \"world\", \"rank\": 0, \"size\": 2, "
      "\"error_seq\": 1, \"error\": \"waiting for data from rank 99999999999999999999 and "
      "sending to rank 1\"}], \"entries\": [{\"comm\": 0, \"seq\": 1}]");
  const fr::Diagnosis d = fr::diagnose({fr::parse_dump(odd, "x.json")});
  EXPECT_NE(d.text.find("waited for rank 1"), std::string::npos) << d.text;
}

}  // namespace
}  // namespace gradwire
