// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// DeviceStreamScope (Note [producer stream]): the calling thread's producer
// stream for collectives on device buffers, innermost scope first. No CUDA
// needed: streams are opaque pointers here.
#include <gtest/gtest.h>

#include <thread>

#include "gradwire/device_stream.h"

namespace gradwire {
namespace {

TEST(DeviceStreamScope, NestsAndRestores) {
  int a = 0, b = 0;
  EXPECT_EQ(DeviceStreamScope::current(), nullptr);
  {
    DeviceStreamScope outer(&a);
    EXPECT_EQ(DeviceStreamScope::current(), &a);
    {
      DeviceStreamScope inner(&b);
      EXPECT_EQ(DeviceStreamScope::current(), &b);
      {
        DeviceStreamScope legacy(nullptr);  // back to the legacy default stream
        EXPECT_EQ(DeviceStreamScope::current(), nullptr);
      }
      EXPECT_EQ(DeviceStreamScope::current(), &b);
    }
    EXPECT_EQ(DeviceStreamScope::current(), &a);
  }
  EXPECT_EQ(DeviceStreamScope::current(), nullptr);
}

TEST(DeviceStreamScope, IsPerThread) {
  int a = 0;
  DeviceStreamScope scope(&a);
  void* seen = &a;
  std::thread([&] { seen = DeviceStreamScope::current(); }).join();
  EXPECT_EQ(seen, nullptr) << "another thread must not see this thread's scope";
  EXPECT_EQ(DeviceStreamScope::current(), &a);
}

}  // namespace
}  // namespace gradwire
