// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// A digest of bytes, for comparing states bit for bit across ranks and
// runs (a model after a resumed run against the uninterrupted one, the
// compression state every rank holds) the way gradwire's checkpoints check
// their shards.
#pragma once

#include "gradwire/export.h"

#include <string>
#include <string_view>

namespace gradwire {

// SHA-256 of `bytes` as 64 lowercase hex digits.
GRADWIRE_API std::string sha256_hex(std::string_view bytes);

}  // namespace gradwire
