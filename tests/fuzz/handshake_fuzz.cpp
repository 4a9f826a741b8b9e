// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Fuzz target: the store handshake (Note [store handshake]). The server's
// state machine is fed the input in pieces (the first byte picks whether
// the store has a secret and where the pieces split), as a client's bytes
// would arrive; every message parser also runs on the raw input.
#include <string>
#include <string_view>

#include "bootstrap/store_handshake.h"
#include "bootstrap/store_wire.h"
#include "fuzz_target.h"

using namespace gradwire::bootstrap::tcp_store;

namespace {

// Every reply the server sends must itself be a well-formed message.
void check_reply(const std::string& reply) {
  size_t off = 0;
  while (off < reply.size()) {
    const HandshakeParse m = parse_handshake(std::string_view(reply).substr(off));
    GW_FUZZ_CHECK(m.status == Parse::Ok);
    if (m.header.type == kServerHello) {
      ServerHello sh;
      GW_FUZZ_CHECK(parse_server_hello(m.body, &sh) == nullptr);
    } else {
      uint8_t v;
      GW_FUZZ_CHECK(m.header.type == kVerdict && parse_verdict(m.body, &v) == nullptr);
    }
    off += m.consumed;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::string kSecret = "fuzzing-secret-0123456789abcdef";
  static const std::string kNone;
  const uint8_t mode = data[0];
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);

  ServerHandshake hs((mode & 1) ? kSecret : kNone);
  const size_t piece = 1 + (mode >> 1);  // 1..128 bytes per arrival
  std::string buf;
  for (size_t off = 0; off < in.size(); off += piece) {
    buf.append(in.substr(off, piece));
    const ServerHandshake::Step step = hs.feed(buf);
    GW_FUZZ_CHECK(step.consumed <= buf.size());
    check_reply(step.reply);
    if (step.outcome == ServerHandshake::Outcome::Refused) {
      GW_FUZZ_CHECK(!step.why.empty());
      break;
    }
    buf.erase(0, step.consumed);
    if (step.outcome == ServerHandshake::Outcome::Ready) break;
  }

  // The client's parsers (and the server's) on the raw bytes.
  const HandshakeParse m = parse_handshake(in);
  if (m.status == Parse::Ok) {
    GW_FUZZ_CHECK(m.consumed == kHandshakeHeaderBytes + m.body.size());
    ClientHello ch;
    if (parse_client_hello(m.body, &ch) == nullptr && m.header.type == kClientHello) {
      GW_FUZZ_CHECK(ch.version_text.size() <= kMaxVersionText);
      const std::string again = encode_client_hello(ch, m.header.version);
      GW_FUZZ_CHECK(again == in.substr(0, m.consumed));  // the encoding is canonical
    }
    ServerHello sh;
    if (parse_server_hello(m.body, &sh) == nullptr && m.header.type == kServerHello) {
      GW_FUZZ_CHECK(encode_server_hello(sh, m.header.version) == in.substr(0, m.consumed));
    }
    Proof p;
    (void)parse_client_proof(m.body, &p);
    uint8_t v;
    (void)parse_verdict(m.body, &v);
  }
  return 0;
}
