// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Fuzz target: what etcd's JSON gateway answers (src/bootstrap/json.h), as
// the etcd store reads it: parse the document, walk it the way
// etcd_store.cpp does (header.revision, kvs[].key/value in base64), and
// check that base64 round-trips whatever the input decodes to.
#include <string>
#include <string_view>

#include "bootstrap/json.h"
#include "fuzz_target.h"

using namespace gradwire::bootstrap;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string error;
  auto doc = json::parse(text, &error);
  GW_FUZZ_CHECK(doc.has_value() || !error.empty());
  if (doc) {
    if (const json::Value* h = doc->find("header")) (void)json::as_int(h->find("revision"));
    (void)json::as_bool(doc->find("more"));
    if (const json::Value* kvs = doc->find("kvs")) {
      for (const json::Value& kv : kvs->items) {
        for (const char* field : {"key", "value"}) {
          const json::Value* f = kv.find(field);
          if (f && f->is_string()) {
            if (auto bytes = json::base64_decode(f->text)) {
              GW_FUZZ_CHECK(json::base64_decode(json::base64_encode(*bytes)) == bytes);
            }
          }
        }
      }
    }
  }
  auto raw = json::base64_decode(text);
  if (raw) GW_FUZZ_CHECK(json::base64_decode(json::base64_encode(*raw)) == raw);
  return 0;
}
