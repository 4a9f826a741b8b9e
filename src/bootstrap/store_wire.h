// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The TCP store's bytes on the wire, as pure functions: encoders, and
// parsers that take the bytes received so far and return a parsed message,
// "need more bytes", or the reason the bytes are malformed. Nothing here
// touches a socket, so the unit tests and the fuzzers (tests/fuzz/) call
// exactly what the client and the server run. Internal to src/bootstrap.
//
// Note [store handshake]
// Before its first command, every connection runs this exchange; the
// server parses no command frame (Note [tcp store protocol]) of a
// connection that has not finished it, so a refused peer cannot read or
// change a single key.
//
//   client -> server  ClientHello  flags (bit 0: has a secret), gradwire version, client nonce
//   server -> client  ServerHello  verdict, auth mode, gradwire version, server nonce,
//                                  server proof
//   client -> server  ClientProof  client proof              (only when auth mode is HMAC)
//   server -> client  Verdict      accepted | wrong proof    (only when auth mode is HMAC)
//
// Every handshake message is a 9-byte header
//     "GWHS" | u16 protocol version | u8 type | u16 body length
// (big-endian) and a body of at most kMaxHandshakeBody bytes. The header
// never changes between protocol versions, so a server can always read a
// peer's version and refuse it with a ServerHello of its own version
// (verdict kVersionRefused), which names both versions in the peer's error.
// Compatible means the same protocol version.
//
// Proofs (HMAC-SHA256 keyed with the job secret, store_auth.h):
//     server proof = HMAC(secret, "gradwire store v<P> server" | client nonce | server nonce)
//     client proof = HMAC(secret, "gradwire store v<P> client" | client nonce | server nonce)
// Both nonces are 32 fresh random bytes per connection, so a recorded
// handshake replayed on a new connection fails (the server's new nonce is
// not in the recorded proof), and a recorded server answer cannot fool a
// client. The server proves itself first, so a client never talks to a
// store that does not know the secret either. The different labels keep a
// client from using the server as an oracle for a client proof.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gradwire::bootstrap::tcp_store {

// ---- command frames (Note [tcp store protocol] in tcp_store_server.h) ----

enum Command : uint8_t { kSet = 1, kGet = 2, kWait = 3, kWill = 4 };
enum Status : uint8_t { kOk = 0, kFound = 1, kNotFound = 2 };

constexpr size_t kRequestHeaderBytes = 9;
constexpr size_t kResponseHeaderBytes = 5;
constexpr uint32_t kMaxKeyBytes = 4 * 1024;
constexpr uint32_t kMaxValueBytes = 16 * 1024 * 1024;
constexpr uint32_t kWaitForever = 0xFFFFFFFFu;

enum class Parse { NeedMore, Ok, Bad };

struct Request {
  uint8_t command = 0;
  std::string_view key;    // views into the parsed bytes
  std::string_view value;  // SET and WILL only
  uint32_t wait_ms = 0;    // WAIT only
};

struct RequestParse {
  Parse status = Parse::NeedMore;
  Request request;
  size_t consumed = 0;          // bytes of the frame when Ok
  const char* error = nullptr;  // why, when Bad (a static string)
};

// Parses the first frame of `in`. The header is checked before the body is
// waited for, so an oversized or unknown frame is Bad after 9 bytes.
RequestParse parse_request(std::string_view in);
std::string encode_request(uint8_t command, std::string_view key, std::string_view value);

struct ResponseHeader {
  uint8_t status = 0;
  uint32_t length = 0;
};
// Checks a response header; nullptr when it is well formed, else why not.
const char* parse_response_header(const uint8_t (&h)[kResponseHeaderBytes], ResponseHeader* out);
void append_response(std::string& out, uint8_t status, std::string_view value);

// ---- handshake (Note [store handshake]) ----

// 2: WILL (Note [a connection's last will] in tcp_store_server.h).
constexpr uint16_t kProtocolVersion = 2;
constexpr char kHandshakeMagic[4] = {'G', 'W', 'H', 'S'};
constexpr size_t kHandshakeHeaderBytes = 9;
constexpr size_t kMaxHandshakeBody = 512;
constexpr size_t kNonceBytes = 32;
constexpr size_t kProofBytes = 32;
constexpr size_t kMaxVersionText = 64;

using Nonce = std::array<uint8_t, kNonceBytes>;
using Proof = std::array<uint8_t, kProofBytes>;

enum MessageType : uint8_t { kClientHello = 1, kServerHello = 2, kClientProof = 3, kVerdict = 4 };
enum HelloVerdict : uint8_t { kProceed = 0, kVersionRefused = 1, kSecretRequired = 2 };
enum AuthMode : uint8_t { kAuthNone = 0, kAuthHmacSha256 = 1 };
enum ProofVerdict : uint8_t { kAccepted = 0, kWrongProof = 1 };

struct HandshakeHeader {
  uint16_t version = 0;
  uint8_t type = 0;
  uint16_t body_length = 0;
};

struct HandshakeParse {
  Parse status = Parse::NeedMore;
  HandshakeHeader header;
  std::string_view body;        // view into the parsed bytes when Ok
  size_t consumed = 0;          // header + body when Ok
  const char* error = nullptr;  // when Bad
};
// Splits the first handshake message off `in`; checks the magic and the
// body length cap, not the version or the body.
HandshakeParse parse_handshake(std::string_view in);

struct ClientHello {
  bool has_secret = false;
  std::string version_text;  // the peer's gradwire version, printable ASCII
  Nonce nonce{};
};
struct ServerHello {
  uint8_t verdict = kProceed;
  uint8_t auth = kAuthNone;
  std::string version_text;
  Nonce nonce{};
  Proof proof{};
};

// Body parsers for this protocol version: nullptr on success, else why the
// body is malformed. The version text of a peer of another version is
// read with the same layout when it fits (best effort, for the message).
const char* parse_client_hello(std::string_view body, ClientHello* out);
const char* parse_server_hello(std::string_view body, ServerHello* out);
const char* parse_client_proof(std::string_view body, Proof* out);
const char* parse_verdict(std::string_view body, uint8_t* out);

std::string encode_client_hello(const ClientHello& m, uint16_t version = kProtocolVersion);
std::string encode_server_hello(const ServerHello& m, uint16_t version = kProtocolVersion);
std::string encode_client_proof(const Proof& p);
std::string encode_verdict(uint8_t verdict);

// "protocol 1 (gradwire 0.1.0)" / "protocol 7": for messages.
std::string describe_version(uint16_t protocol, const std::string& version_text);

}  // namespace gradwire::bootstrap::tcp_store
