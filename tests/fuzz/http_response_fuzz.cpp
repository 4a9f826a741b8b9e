// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Fuzz target: an HTTP/1.1 answer as an etcd server (or anything listening
// on its port) sends it to the etcd store (src/bootstrap/http.h): the head,
// then the chunked body fed in pieces of every size the input's first byte
// chooses; the decoder must consume what it is given and never report more
// data than arrived.
#include <algorithm>
#include <string>
#include <string_view>

#include "bootstrap/http.h"
#include "fuzz_target.h"

using namespace gradwire::bootstrap;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = size_t(data[0] % 16) + 1;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  bool complete = false;
  std::string error;
  auto head = http::parse_head(bytes, &complete, &error);
  if (head) {
    GW_FUZZ_CHECK(complete && head->size <= bytes.size());
  } else if (complete) {
    GW_FUZZ_CHECK(!error.empty());
  }
  // The body: after a head if there is one, else the whole input as chunks.
  std::string_view body = head ? bytes.substr(head->size) : bytes;
  http::ChunkedDecoder decoder;
  std::string out;
  while (!body.empty()) {
    const std::string_view in = body.substr(0, std::min(piece, body.size()));
    size_t used = 0;
    const auto state = decoder.feed(in, &used, &out);
    GW_FUZZ_CHECK(used <= in.size());
    if (state == http::ChunkedDecoder::State::Error) {
      GW_FUZZ_CHECK(!decoder.error().empty());
      break;
    }
    if (state == http::ChunkedDecoder::State::Done) break;
    GW_FUZZ_CHECK(used == in.size());
    body.remove_prefix(used);
  }
  GW_FUZZ_CHECK(out.size() <= bytes.size());
  return 0;
}
