// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Fuzz target: the TCP store's command frames as the server parses them
// (one after another from a client's byte stream) and the answer headers
// as the client checks them (src/bootstrap/store_wire.h).
#include <cstring>
#include <string_view>

#include "bootstrap/store_wire.h"
#include "fuzz_target.h"

using namespace gradwire::bootstrap::tcp_store;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t off = 0;
  while (off < in.size()) {
    const RequestParse r = parse_request(in.substr(off));
    if (r.status != Parse::Ok) {
      GW_FUZZ_CHECK(r.status == Parse::NeedMore || r.error != nullptr);
      break;
    }
    GW_FUZZ_CHECK(r.consumed >= kRequestHeaderBytes && r.consumed <= in.size() - off);
    const Request& q = r.request;
    GW_FUZZ_CHECK(!q.key.empty() && q.key.size() <= kMaxKeyBytes);
    GW_FUZZ_CHECK(q.value.size() <= kMaxValueBytes);
    // Touch every byte the views claim, so ASan checks them.
    volatile unsigned sum = 0;
    for (char c : q.key) sum = sum + unsigned(c);
    for (char c : q.value) sum = sum + unsigned(c);
    // What the server would answer must parse back on the client.
    std::string answer;
    append_response(answer, q.command == kSet ? kOk : kFound, q.command == kSet ? "" : q.key);
    uint8_t h[kResponseHeaderBytes];
    std::memcpy(h, answer.data(), sizeof(h));
    ResponseHeader rh;
    GW_FUZZ_CHECK(parse_response_header(h, &rh) == nullptr);
    GW_FUZZ_CHECK(rh.length == answer.size() - kResponseHeaderBytes);
    off += r.consumed;
  }
  if (size >= kResponseHeaderBytes) {
    uint8_t h[kResponseHeaderBytes];
    std::memcpy(h, data, sizeof(h));
    ResponseHeader rh;
    if (parse_response_header(h, &rh) == nullptr) GW_FUZZ_CHECK(rh.length <= kMaxValueBytes);
  }
  return 0;
}
