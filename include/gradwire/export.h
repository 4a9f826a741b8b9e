// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [hidden symbols]: libgradwire is built with hidden visibility, so
// only what the public headers mark GRADWIRE_API is exported: the classes
// (their members, vtables and type_info, so an Error thrown inside the
// library is caught as gradwire::Error outside it) and the free functions of
// include/gradwire/. Everything under src/ stays inside the library; tests of
// internal code link the static gradwire_internal instead.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define GRADWIRE_API __attribute__((visibility("default")))
#else
#define GRADWIRE_API
#endif
