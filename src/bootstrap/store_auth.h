// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The cryptography of the store handshake (Note [store handshake] in
// store_wire.h), all of it OpenSSL's libcrypto: HMAC-SHA256 for the proofs,
// RAND_bytes for nonces and generated secrets, CRYPTO_memcmp to compare
// proofs in constant time. Internal to src/bootstrap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "bootstrap/store_wire.h"

namespace gradwire::bootstrap {

// A job secret is any 16..1024 bytes every rank of the job shares.
constexpr size_t kMinSecretBytes = 16;
constexpr size_t kMaxSecretBytes = 1024;

// InvalidArgument naming `source` (e.g. "GRADWIRE_JOB_SECRET") when the
// secret is too short or too long. Never prints the secret.
void check_secret(const std::string& secret, const char* source);

// 32 random bytes as 64 hex characters: what gwlaunch and the torch
// backend generate per job when none is given.
std::string generate_secret();

// Cryptographically random bytes; Internal if the generator fails.
void random_bytes(uint8_t* out, size_t n);
tcp_store::Nonce random_nonce();

enum class Role { Client, Server };
// HMAC-SHA256(secret, "gradwire store v<version> <role>" | client | server).
tcp_store::Proof store_proof(const std::string& secret, Role role, uint16_t version,
                             const tcp_store::Nonce& client, const tcp_store::Nonce& server);
// Constant time: how long it takes says nothing about where they differ.
bool proofs_equal(const tcp_store::Proof& a, const tcp_store::Proof& b);

}  // namespace gradwire::bootstrap
