// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The store handshake (Note [store handshake] in store_wire.h).
#include "bootstrap/store_handshake.h"

#include "bootstrap/socket.h"
#include "bootstrap/store_auth.h"
#include "base/raise.h"
#include "gradwire/version.h"

namespace gradwire::bootstrap::tcp_store {

namespace {

std::string our_version() { return describe_version(kProtocolVersion, version()); }

// The version text a peer of another protocol version sent, if its body
// has our layout (best effort: only for the message).
template <typename Message>
std::string their_version_text(std::string_view body,
                               const char* (*parse)(std::string_view, Message*)) {
  Message m;
  return parse(body, &m) == nullptr ? m.version_text : std::string();
}

}  // namespace

ServerHandshake::ServerHandshake(const std::string& secret) : secret_(secret) {}

ServerHandshake::Step ServerHandshake::feed(std::string_view in) {
  Step step;
  auto refuse = [&](std::string why) {
    step.outcome = Outcome::Refused;
    step.why = std::move(why);
    state_ = State::Done;
    return step;
  };
  while (state_ != State::Done) {
    const HandshakeParse m = parse_handshake(in.substr(step.consumed));
    if (m.status == Parse::NeedMore) return step;
    if (m.status == Parse::Bad) return refuse(std::string("malformed handshake: ") + m.error);
    step.consumed += m.consumed;
    if (m.header.version != kProtocolVersion) {
      ServerHello no;
      no.verdict = kVersionRefused;
      no.version_text = version();
      step.reply += encode_server_hello(no);
      return refuse(fmt::format(
          "it speaks {}, this store speaks {}; every rank must run the same gradwire",
          describe_version(m.header.version, their_version_text(m.body, parse_client_hello)),
          our_version()));
    }
    if (state_ == State::Hello) {
      ClientHello hello;
      if (m.header.type != kClientHello)
        return refuse("handshake did not start with a ClientHello");
      if (const char* e = parse_client_hello(m.body, &hello)) {
        return refuse(std::string("malformed ClientHello: ") + e);
      }
      client_nonce_ = hello.nonce;
      server_nonce_ = random_nonce();
      ServerHello reply;
      reply.version_text = version();
      reply.nonce = server_nonce_;
      if (secret_.empty()) {
        step.reply += encode_server_hello(reply);
        step.outcome = Outcome::Ready;
        state_ = State::Done;
        return step;
      }
      if (!hello.has_secret) {
        reply.verdict = kSecretRequired;
        step.reply += encode_server_hello(reply);
        return refuse("it has no job secret (GRADWIRE_JOB_SECRET is not set on that rank)");
      }
      reply.auth = kAuthHmacSha256;
      reply.proof =
          store_proof(secret_, Role::Server, kProtocolVersion, client_nonce_, server_nonce_);
      step.reply += encode_server_hello(reply);
      state_ = State::Proof;
      continue;  // the proof may already be here (a pipelining client)
    }
    Proof proof;
    if (m.header.type != kClientProof) return refuse("expected a ClientProof");
    if (const char* e = parse_client_proof(m.body, &proof)) {
      return refuse(std::string("malformed ClientProof: ") + e);
    }
    const Proof expected =
        store_proof(secret_, Role::Client, kProtocolVersion, client_nonce_, server_nonce_);
    if (!proofs_equal(proof, expected)) {
      step.reply += encode_verdict(kWrongProof);
      return refuse(
          "wrong proof of the job secret: its GRADWIRE_JOB_SECRET differs from this "
          "store's, or it replayed a recorded handshake");
    }
    step.reply += encode_verdict(kAccepted);
    step.outcome = Outcome::Ready;
    state_ = State::Done;
  }
  return step;
}

namespace {

// Reads one whole handshake message; raises like client_handshake.
HandshakeParse read_message(int fd, const std::string& where, Deadline deadline, std::string& buf) {
  auto fail_io = [&](IoStatus st, int err) {
    if (st == IoStatus::TimedOut) {
      raise(ErrorCode::Timeout,
            "tcp store {}: no answer to the store handshake in time; is {} a gradwire store, "
            "and is rank 0 responsive?",
            where, where);
    }
    if (st == IoStatus::Closed) {
      raise(ErrorCode::PeerLost,
            "tcp store {}: the store closed the connection during the handshake; likely cause: "
            "rank 0 refused this process (its log says why: a wrong or missing "
            "GRADWIRE_JOB_SECRET, or a different gradwire version), or it runs a gradwire "
            "older than the store handshake",
            where);
    }
    raise(ErrorCode::PeerLost, "tcp store {}: socket error during the store handshake: {}", where,
          errno_text(err));
  };
  buf.assign(kHandshakeHeaderBytes, '\0');
  int err = 0;
  IoStatus st = recv_all(fd, buf.data(), buf.size(), deadline, &err);
  if (st != IoStatus::Ok) fail_io(st, err);
  HandshakeParse m = parse_handshake(buf);
  if (m.status == Parse::NeedMore) {
    buf.resize(kHandshakeHeaderBytes + m.header.body_length);
    st = recv_all(fd, buf.data() + kHandshakeHeaderBytes, m.header.body_length, deadline, &err);
    if (st != IoStatus::Ok) fail_io(st, err);
    m = parse_handshake(buf);
  }
  if (m.status != Parse::Ok) {
    raise(ErrorCode::Protocol,
          "tcp store {}: the peer did not answer like a gradwire store ({}); is MASTER_PORT "
          "(or GRADWIRE_STORE_PORT) pointing at another service?",
          where, m.error ? m.error : "truncated message");
  }
  return m;
}

void send_or_raise(int fd, const std::string& where, const std::string& bytes, Deadline deadline) {
  int err = 0;
  const IoStatus st = send_all(fd, bytes.data(), bytes.size(), deadline, &err);
  if (st == IoStatus::Ok) return;
  if (st == IoStatus::TimedOut) {
    raise(ErrorCode::Timeout, "tcp store {}: could not send the store handshake in time", where);
  }
  raise(ErrorCode::PeerLost, "tcp store {}: connection lost while sending the store handshake{}",
        where, st == IoStatus::Error ? ": " + errno_text(err) : std::string());
}

}  // namespace

void client_handshake(int fd, const std::string& where, const std::string& secret,
                      Deadline deadline) {
  ClientHello hello;
  hello.has_secret = !secret.empty();
  hello.version_text = version();
  hello.nonce = random_nonce();
  send_or_raise(fd, where, encode_client_hello(hello), deadline);

  std::string buf;
  const HandshakeParse m = read_message(fd, where, deadline, buf);
  if (m.header.version != kProtocolVersion) {
    raise(ErrorCode::Protocol,
          "tcp store {}: the store speaks {}, this process speaks {}; every rank must run the "
          "same gradwire",
          where, describe_version(m.header.version, their_version_text(m.body, parse_server_hello)),
          our_version());
  }
  ServerHello sh;
  const char* bad =
      m.header.type != kServerHello ? "expected a ServerHello" : parse_server_hello(m.body, &sh);
  if (bad) {
    raise(ErrorCode::Protocol,
          "tcp store {}: malformed store handshake ({}); is {} a gradwire "
          "store?",
          where, bad, where);
  }
  if (sh.verdict == kSecretRequired) {
    raise(ErrorCode::Unauthenticated,
          "tcp store {}: the store requires the job secret and this process has none; set the "
          "same GRADWIRE_JOB_SECRET on every rank (the launcher hands it out; torchrun users "
          "set it themselves)",
          where);
  }
  if (sh.verdict != kProceed) {
    raise(ErrorCode::Protocol, "tcp store {}: the store refused this process's {}", where,
          our_version());
  }
  if (sh.auth == kAuthNone) {
    if (!secret.empty()) {
      raise(ErrorCode::Unauthenticated,
            "tcp store {}: the store does not authenticate its clients (rank 0 runs without "
            "GRADWIRE_JOB_SECRET) but this process has a job secret; refusing an "
            "unauthenticated store: set the same GRADWIRE_JOB_SECRET on every rank, rank 0 "
            "included",
            where);
    }
    return;
  }
  if (secret.empty()) {
    raise(ErrorCode::Unauthenticated,
          "tcp store {}: the store requires the job secret and this process has none; set the "
          "same GRADWIRE_JOB_SECRET on every rank",
          where);
  }
  const Proof expected = store_proof(secret, Role::Server, kProtocolVersion, hello.nonce, sh.nonce);
  const std::string proof = encode_client_proof(
      store_proof(secret, Role::Client, kProtocolVersion, hello.nonce, sh.nonce));
  if (!proofs_equal(sh.proof, expected)) {
    // Our proof still goes out (best effort), so that a genuine store with
    // another secret logs this client as refused; it tells an impostor
    // nothing an eavesdropper on a good handshake would not see.
    int ignored = 0;
    send_all(fd, proof.data(), proof.size(), deadline, &ignored);
    raise(ErrorCode::Unauthenticated,
          "tcp store {}: secret mismatch: the store could not prove it knows this process's "
          "GRADWIRE_JOB_SECRET; likely cause: the secret differs between this rank and rank 0, "
          "or another job's store listens on this port",
          where);
  }
  send_or_raise(fd, where, proof, deadline);
  const HandshakeParse v = read_message(fd, where, deadline, buf);
  uint8_t verdict = 0;
  bad = v.header.type != kVerdict ? "expected a Verdict" : parse_verdict(v.body, &verdict);
  if (bad) raise(ErrorCode::Protocol, "tcp store {}: malformed store handshake ({})", where, bad);
  if (verdict != kAccepted) {
    raise(ErrorCode::Unauthenticated,
          "tcp store {}: secret mismatch: the store refused this process's proof of "
          "GRADWIRE_JOB_SECRET; set the same secret on every rank",
          where);
  }
}

}  // namespace gradwire::bootstrap::tcp_store
