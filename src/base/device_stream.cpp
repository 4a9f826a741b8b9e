// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [producer stream] in include/gradwire/device_stream.h.
#include "gradwire/device_stream.h"

namespace gradwire {

namespace {
thread_local Stream t_stream;
}  // namespace

DeviceStreamScope::DeviceStreamScope(Stream stream) noexcept : previous_(t_stream) {
  t_stream = stream;
}
DeviceStreamScope::~DeviceStreamScope() { t_stream = previous_; }
Stream DeviceStreamScope::current() noexcept { return t_stream; }

}  // namespace gradwire
