// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "bootstrap/store_auth.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <climits>

#include "base/raise.h"

namespace gradwire::bootstrap {

namespace {

std::string openssl_error() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return "no OpenSSL error queued";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

}  // namespace

void check_secret(const std::string& secret, const char* source) {
  if (secret.size() < kMinSecretBytes || secret.size() > kMaxSecretBytes) {
    raise(ErrorCode::InvalidArgument,
          "{} is {} bytes long; a job secret is {}..{} bytes (generate one with "
          "`openssl rand -hex 32`) and the same on every rank",
          source, secret.size(), kMinSecretBytes, kMaxSecretBytes);
  }
}

void random_bytes(uint8_t* out, size_t n) {
  while (n > 0) {
    const int chunk = n > size_t(INT_MAX) ? INT_MAX : int(n);
    if (RAND_bytes(out, chunk) != 1) {
      raise(ErrorCode::Internal, "OpenSSL RAND_bytes failed: {}", openssl_error());
    }
    out += chunk;
    n -= size_t(chunk);
  }
}

tcp_store::Nonce random_nonce() {
  tcp_store::Nonce n;
  random_bytes(n.data(), n.size());
  return n;
}

std::string generate_secret() {
  uint8_t raw[32];
  random_bytes(raw, sizeof(raw));
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : raw) {
    s += kHex[b >> 4];
    s += kHex[b & 15];
  }
  OPENSSL_cleanse(raw, sizeof(raw));
  return s;
}

tcp_store::Proof store_proof(const std::string& secret, Role role, uint16_t version,
                             const tcp_store::Nonce& client, const tcp_store::Nonce& server) {
  std::string msg =
      "gradwire store v" + std::to_string(version) + (role == Role::Server ? " server" : " client");
  msg.append(reinterpret_cast<const char*>(client.data()), client.size());
  msg.append(reinterpret_cast<const char*>(server.data()), server.size());
  tcp_store::Proof out{};
  unsigned int len = 0;
  // One-shot HMAC(): no context to own, and not deprecated in OpenSSL 3.
  const unsigned char* ok =
      HMAC(EVP_sha256(), secret.data(), int(secret.size()),
           reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), out.data(), &len);
  if (!ok || len != out.size()) {
    raise(ErrorCode::Internal, "OpenSSL HMAC-SHA256 failed: {}", openssl_error());
  }
  return out;
}

bool proofs_equal(const tcp_store::Proof& a, const tcp_store::Proof& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace gradwire::bootstrap
