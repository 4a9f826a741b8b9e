// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Pure encoders and parsers of the TCP store's wire format (store_wire.h).
// Every read is preceded by a length check against the bytes present; no
// length from the peer is trusted before it is compared with a cap.
#include "bootstrap/store_wire.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace gradwire::bootstrap::tcp_store {

namespace {

uint16_t get_u16(const char* p) {
  return uint16_t((uint16_t(uint8_t(p[0])) << 8) | uint16_t(uint8_t(p[1])));
}
uint32_t get_u32(const char* p) {
  return (uint32_t(uint8_t(p[0])) << 24) | (uint32_t(uint8_t(p[1])) << 16) |
         (uint32_t(uint8_t(p[2])) << 8) | uint32_t(uint8_t(p[3]));
}
void put_u16(std::string& out, uint16_t v) {
  out += char(v >> 8);
  out += char(v);
}
void put_u32(std::string& out, uint32_t v) {
  out += char(v >> 24);
  out += char(v >> 16);
  out += char(v >> 8);
  out += char(v);
}

// A cursor over a message body: every take checks what is left.
class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}
  bool u8(uint8_t* v) {
    if (s_.size() - off_ < 1) return false;
    *v = uint8_t(s_[off_++]);
    return true;
  }
  bool bytes(void* dst, size_t n) {
    if (s_.size() - off_ < n) return false;
    std::memcpy(dst, s_.data() + off_, n);
    off_ += n;
    return true;
  }
  bool text(size_t n, std::string* out) {
    if (s_.size() - off_ < n) return false;
    out->assign(s_.data() + off_, n);
    off_ += n;
    return true;
  }
  bool done() const { return off_ == s_.size(); }

 private:
  std::string_view s_;
  size_t off_ = 0;
};

// The version text goes into log lines and error messages: printable
// ASCII only, so a peer cannot forge log lines or terminal escapes.
bool printable(const std::string& s) {
  for (char c : s)
    if (c < 0x20 || c > 0x7e) return false;
  return true;
}

const char* read_version_text(Reader& r, std::string* out) {
  uint8_t n = 0;
  if (!r.u8(&n)) return "truncated before the version text";
  if (n > kMaxVersionText) return "version text longer than 64 bytes";
  if (!r.text(n, out)) return "truncated version text";
  if (!printable(*out)) return "version text is not printable ASCII";
  return nullptr;
}

std::string header(uint16_t version, uint8_t type, size_t body_length) {
  std::string h(kHandshakeMagic, sizeof(kHandshakeMagic));
  put_u16(h, version);
  h += char(type);
  put_u16(h, uint16_t(body_length));
  return h;
}

std::string version_field(const std::string& text) {
  std::string t = text.substr(0, kMaxVersionText);
  return std::string(1, char(t.size())) + t;
}

}  // namespace

RequestParse parse_request(std::string_view in) {
  RequestParse r;
  if (in.size() < kRequestHeaderBytes) return r;
  const uint8_t cmd = uint8_t(in[0]);
  const uint32_t klen = get_u32(in.data() + 1);
  const uint32_t vlen = get_u32(in.data() + 5);
  if (cmd != kSet && cmd != kGet && cmd != kWait && cmd != kWill)
    r.error = "unknown command";
  else if (klen == 0 || klen > kMaxKeyBytes)
    r.error = "key length out of range (1..4096)";
  else if (vlen > kMaxValueBytes)
    r.error = "value length over 16 MiB";
  else if (cmd == kGet && vlen != 0)
    r.error = "GET carrying a value";
  else if (cmd == kWait && vlen != 4)
    r.error = "WAIT without its 4-byte timeout";
  if (r.error) {
    r.status = Parse::Bad;
    return r;
  }
  // Both lengths are capped above, so the sum cannot overflow.
  const size_t frame = kRequestHeaderBytes + size_t(klen) + size_t(vlen);
  if (in.size() < frame) return r;
  r.status = Parse::Ok;
  r.consumed = frame;
  r.request.command = cmd;
  r.request.key = in.substr(kRequestHeaderBytes, klen);
  if (cmd == kSet || cmd == kWill) r.request.value = in.substr(kRequestHeaderBytes + klen, vlen);
  if (cmd == kWait) r.request.wait_ms = get_u32(in.data() + kRequestHeaderBytes + klen);
  return r;
}

std::string encode_request(uint8_t command, std::string_view key, std::string_view value) {
  std::string f;
  f.reserve(kRequestHeaderBytes + key.size() + value.size());
  f += char(command);
  put_u32(f, uint32_t(key.size()));
  put_u32(f, uint32_t(value.size()));
  f += key;
  f += value;
  return f;
}

const char* parse_response_header(const uint8_t (&h)[kResponseHeaderBytes], ResponseHeader* out) {
  out->status = h[0];
  out->length = get_u32(reinterpret_cast<const char*>(h) + 1);
  if (out->status > kNotFound) return "unknown status";
  if (out->length > kMaxValueBytes) return "value length over 16 MiB";
  if (out->status != kFound && out->length != 0) return "a value on an answer that has none";
  return nullptr;
}

void append_response(std::string& out, uint8_t status, std::string_view value) {
  out += char(status);
  put_u32(out, uint32_t(value.size()));
  out += value;
}

HandshakeParse parse_handshake(std::string_view in) {
  HandshakeParse r;
  if (in.empty()) return r;
  // Check the magic on the first bytes already, so that a peer speaking
  // another protocol is refused without waiting for a full header.
  const size_t have = std::min(in.size(), sizeof(kHandshakeMagic));
  if (std::memcmp(in.data(), kHandshakeMagic, have) != 0) {
    r.status = Parse::Bad;
    r.error = "wrong magic (not a gradwire store handshake)";
    return r;
  }
  if (in.size() < kHandshakeHeaderBytes) return r;
  r.header.version = get_u16(in.data() + 4);
  r.header.type = uint8_t(in[6]);
  r.header.body_length = get_u16(in.data() + 7);
  if (r.header.body_length > kMaxHandshakeBody) {
    r.status = Parse::Bad;
    r.error = "handshake body longer than 512 bytes";
    return r;
  }
  const size_t total = kHandshakeHeaderBytes + r.header.body_length;
  if (in.size() < total) return r;
  r.status = Parse::Ok;
  r.body = in.substr(kHandshakeHeaderBytes, r.header.body_length);
  r.consumed = total;
  return r;
}

const char* parse_client_hello(std::string_view body, ClientHello* out) {
  Reader r(body);
  uint8_t flags = 0;
  if (!r.u8(&flags)) return "empty ClientHello";
  if (flags & ~uint8_t(1)) return "unknown ClientHello flags";
  out->has_secret = flags & 1;
  if (const char* e = read_version_text(r, &out->version_text)) return e;
  if (!r.bytes(out->nonce.data(), kNonceBytes)) return "truncated client nonce";
  if (!r.done()) return "trailing bytes after the ClientHello";
  return nullptr;
}

const char* parse_server_hello(std::string_view body, ServerHello* out) {
  Reader r(body);
  if (!r.u8(&out->verdict)) return "empty ServerHello";
  if (out->verdict > kSecretRequired) return "unknown ServerHello verdict";
  if (!r.u8(&out->auth)) return "truncated before the auth mode";
  if (out->auth > kAuthHmacSha256) return "unknown auth mode";
  if (const char* e = read_version_text(r, &out->version_text)) return e;
  if (!r.bytes(out->nonce.data(), kNonceBytes)) return "truncated server nonce";
  if (!r.bytes(out->proof.data(), kProofBytes)) return "truncated server proof";
  if (!r.done()) return "trailing bytes after the ServerHello";
  return nullptr;
}

const char* parse_client_proof(std::string_view body, Proof* out) {
  if (body.size() != kProofBytes) return "ClientProof is not 32 bytes";
  std::memcpy(out->data(), body.data(), kProofBytes);
  return nullptr;
}

const char* parse_verdict(std::string_view body, uint8_t* out) {
  if (body.size() != 1) return "Verdict is not 1 byte";
  *out = uint8_t(body[0]);
  if (*out > kWrongProof) return "unknown verdict";
  return nullptr;
}

std::string encode_client_hello(const ClientHello& m, uint16_t version) {
  std::string body(1, char(m.has_secret ? 1 : 0));
  body += version_field(m.version_text);
  body.append(reinterpret_cast<const char*>(m.nonce.data()), m.nonce.size());
  return header(version, kClientHello, body.size()) + body;
}

std::string encode_server_hello(const ServerHello& m, uint16_t version) {
  std::string body;
  body += char(m.verdict);
  body += char(m.auth);
  body += version_field(m.version_text);
  body.append(reinterpret_cast<const char*>(m.nonce.data()), m.nonce.size());
  body.append(reinterpret_cast<const char*>(m.proof.data()), m.proof.size());
  return header(version, kServerHello, body.size()) + body;
}

std::string encode_client_proof(const Proof& p) {
  return header(kProtocolVersion, kClientProof, p.size()) +
         std::string(reinterpret_cast<const char*>(p.data()), p.size());
}

std::string encode_verdict(uint8_t verdict) {
  return header(kProtocolVersion, kVerdict, 1) + std::string(1, char(verdict));
}

std::string describe_version(uint16_t protocol, const std::string& version_text) {
  if (version_text.empty()) return fmt::format("store protocol {}", protocol);
  return fmt::format("store protocol {} (gradwire {})", protocol, version_text);
}

}  // namespace gradwire::bootstrap::tcp_store
