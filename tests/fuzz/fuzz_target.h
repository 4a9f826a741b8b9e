// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The entry point every fuzz target defines (libFuzzer's), and a check that
// aborts the run (so libFuzzer and the corpus replay both report it) when a
// parser breaks one of its own promises.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#define GW_FUZZ_CHECK(cond)                                                                  \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)
