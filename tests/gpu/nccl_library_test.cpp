// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The parts of the NCCL backend that need NCCL but no GPU, so they run on
// every machine with the CUDA toolkit: loading libnccl at run time (Note
// [loading NCCL]), making an ncclUniqueId, the gradwire -> NCCL mapping, and
// the readiness exchange of Note [lazy NCCL communicator] failing every rank
// with a clear error when a rank cannot use its device.
#include <gtest/gtest.h>

#include <string>

#include "device_host.h"
#include "gpu_util.h"
#include "gradwire/communicator.h"
#include "gradwire/error.h"
#include "device/location.h"
#include "device/nccl/collectives.h"
#include "device/nccl/library.h"
#include "device/backend.h"

namespace gradwire::device::nccl {
namespace {

TEST(NcclLibraryTest, LoadsAtRunTimeAndMakesAUniqueId) {
  const Library& lib = Library::get();
  EXPECT_GE(lib.version, 21400) << lib.path;
  ncclUniqueId id{};
  ASSERT_EQ(lib.GetUniqueId(&id), ncclSuccess) << lib.describe(ncclSuccess, nullptr);
  EXPECT_STRNE(lib.GetErrorString(ncclRemoteError), "");
}

TEST(NcclLibraryTest, MapsEveryDtypeAndOp) {
  EXPECT_EQ(to_nccl(DataType::Float32), ncclFloat32);
  EXPECT_EQ(to_nccl(DataType::Float64), ncclFloat64);
  EXPECT_EQ(to_nccl(DataType::Float16), ncclFloat16);
  EXPECT_EQ(to_nccl(DataType::BFloat16), ncclBfloat16);
  EXPECT_EQ(to_nccl(DataType::Int32), ncclInt32);
  EXPECT_EQ(to_nccl(DataType::Int64), ncclInt64);
  EXPECT_EQ(to_nccl(DataType::UInt8), ncclUint8);
  EXPECT_EQ(to_nccl(ReduceOp::Sum), ncclSum);
  EXPECT_EQ(to_nccl(ReduceOp::Avg), ncclAvg);
  EXPECT_EQ(to_nccl(ReduceOp::Min), ncclMin);
  EXPECT_EQ(to_nccl(ReduceOp::Max), ncclMax);
  EXPECT_EQ(to_nccl(ReduceOp::Prod), ncclProd);
}

TEST(NcclLibraryTest, ChecksCollectivesBeforeLaunching) {
  using C = CollectiveCall;
  const DataType f32 = DataType::Float32;
  int x = 0;
  EXPECT_NO_THROW(check(C::allreduce(&x, &x, 1, f32, ReduceOp::Sum), 0, 2));
  EXPECT_NO_THROW(check(C::barrier(), 0, 2));
  // A rank with an empty shard may pass null buffers (count < size).
  EXPECT_NO_THROW(check(C::allgather(nullptr, &x, 1, f32), 1, 2));
  EXPECT_NO_THROW(check(C::reduce_scatter(&x, nullptr, 1, f32, ReduceOp::Sum), 1, 2));
  EXPECT_NO_THROW(check(C::broadcast(nullptr, &x, 1, f32, 0), 1, 2));
  EXPECT_THROW(check(C::broadcast(&x, &x, 1, f32, 2), 0, 2), Error);
  EXPECT_THROW(check(C::allreduce(nullptr, &x, 1, f32, ReduceOp::Sum), 0, 2), Error);
  EXPECT_EQ(C::allreduce(&x, &x, 1024, DataType::BFloat16, ReduceOp::Avg).describe(),
            "1024 x bfloat16 avg");
  EXPECT_EQ(C::broadcast(&x, &x, 3, DataType::Int64, 1).describe(), "3 x int64 from rank 1");
}

TEST(NcclLibraryTest, HostBuffersStayOnTheCpuPath) {
  auto comm = Communicator::create();
  Router router(gwgpu::host_of(*comm));
  int x = 0;
  EXPECT_EQ(router.route(CollectiveCall::allreduce(&x, &x, 1, DataType::Int32, ReduceOp::Sum)),
            nullptr);
  EXPECT_FALSE(locate(&x).is_device());
}

TEST(NcclLibraryTest, ARankThatCannotUseItsDeviceFailsCreationWithAClearError) {
  if (gwgpu::no_device_reason().empty()) GTEST_SKIP() << "a CUDA device is usable here";
  auto comm = Communicator::create();
  Router router(gwgpu::host_of(*comm));
  try {
    router.backend(0);
    FAIL() << "an NCCL backend was created without a device";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 0 failed: cudaSetDevice(0) failed"),
              std::string::npos) << e.what();
  }
  // The communicator is still usable for host buffers.
  int v = 3;
  comm->allreduce(&v, &v, 1, DataType::Int32, ReduceOp::Sum).wait();
  EXPECT_EQ(v, 3);
}

}  // namespace
}  // namespace gradwire::device::nccl
