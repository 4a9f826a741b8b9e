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
  EXPECT_EQ(DeviceStreamScope::current(), Stream());
  {
    DeviceStreamScope outer{Stream(&a)};
    EXPECT_EQ(DeviceStreamScope::current(), Stream(&a));
    {
      DeviceStreamScope inner{Stream(&b)};
      EXPECT_EQ(DeviceStreamScope::current(), Stream(&b));
      {
        DeviceStreamScope legacy{Stream()};  // back to the legacy default stream
        EXPECT_EQ(DeviceStreamScope::current(), Stream());
      }
      EXPECT_EQ(DeviceStreamScope::current(), Stream(&b));
    }
    EXPECT_EQ(DeviceStreamScope::current(), Stream(&a));
  }
  EXPECT_EQ(DeviceStreamScope::current(), Stream());
}

TEST(DeviceStreamScope, IsPerThread) {
  int a = 0;
  DeviceStreamScope scope{Stream(&a)};
  Stream seen(&a);
  std::thread([&] { seen = DeviceStreamScope::current(); }).join();
  EXPECT_EQ(seen, Stream()) << "another thread must not see this thread's scope";
  EXPECT_EQ(DeviceStreamScope::current(), Stream(&a));
}

}  // namespace
}  // namespace gradwire
