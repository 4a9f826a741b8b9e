// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The NCCL backend through the public Communicator (device buffers are
// routed to NCCL, Note [device-buffer dispatch]) and through the backend's
// own API (group launch, barrier). Runs at world size 1 as a plain test and
// at world size 2 under gwlaunch (ctest gpu.nccl.gwlaunch.np2), one GPU per
// rank; skips, saying why, without a CUDA device or with fewer devices than
// ranks. Every test is collective: all ranks run the same tests in order.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "device_host.h"
#include "gpu_util.h"
#include "gradwire/communicator.h"
#include "gradwire/error.h"
#include "kernels/reduce_math.h"
#include "device/backend.h"

static int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

static gwgpu::World* g_world = nullptr;  // set once world() ran

// The one world communicator of this test binary (gpu_util.h).
gwgpu::World& gwgpu::world() {
  using gradwire::Communicator;
  static World w = [] {
    World w;
    w.skip = no_device_reason();
    if (!w.skip.empty()) return w;
    const int ranks = env_int("WORLD_SIZE", env_int("OMPI_COMM_WORLD_SIZE", 1));
    const int devices = device_count();
    if (ranks > devices && !staged_path()) {
      w.skip = "world size " + std::to_string(ranks) + " needs " + std::to_string(ranks) +
               " CUDA devices (NCCL runs one rank per device; GRADWIRE_DEVICE_PATH=staged "
               "shares them); this machine has " +
               std::to_string(devices);
      return w;
    }
    w.comm = Communicator::create();
    w.device = env_int("LOCAL_RANK", env_int("OMPI_COMM_WORLD_LOCAL_RANK", w.comm->rank())) % devices;
    cudaSetDevice(w.device);
    return w;
  }();
  g_world = &w;
  return w;
}

namespace gradwire {
namespace {

using gwgpu::World;
using gwgpu::world;

// Destroys the communicator (and its NCCL communicator) before exit, not
// during static destruction, when the CUDA runtime may already be gone.
class WorldTeardown : public ::testing::Environment {
 public:
  void TearDown() override {
    if (g_world) g_world->comm.reset();
  }
};
[[maybe_unused]] ::testing::Environment* const kWorldTeardown =
    ::testing::AddGlobalTestEnvironment(new WorldTeardown);

class NcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    World& w = world();
    if (!w.skip.empty()) GTEST_SKIP() << w.skip;
    ASSERT_TRUE(w.comm);
    comm_ = w.comm.get();
    rank_ = comm_->rank();
    size_ = comm_->size();
    cudaSetDevice(w.device);
  }
  Communicator* comm_ = nullptr;
  int rank_ = 0, size_ = 1;
};

// Small integers: every dtype holds them and their sums/products exactly.
double value(int rank, size_t i) { return double((i * 7 + size_t(rank) * 3) % 5); }

using gwgpu::decode;
using gwgpu::encode;

std::vector<double> inputs(int rank, size_t n, size_t first = 0) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = value(rank, first + i);
  return v;
}

double reduce_all(ReduceOp op, DataType dt, size_t i, int world) {
  if (dt == DataType::Bool) {  // Sum and Max: or; Prod and Min: and
    const bool any = op == ReduceOp::Sum || op == ReduceOp::Max;
    bool acc = !any;
    for (int r = 0; r < world; ++r) acc = any ? (acc || value(r, i) != 0) : (acc && value(r, i) != 0);
    return acc ? 1 : 0;
  }
  double acc = value(0, i);
  for (int r = 1; r < world; ++r) {
    const double x = value(r, i);
    switch (op) {
      case ReduceOp::Sum: case ReduceOp::Avg: acc += x; break;
      case ReduceOp::Min: acc = std::min(acc, x); break;
      case ReduceOp::Max: acc = std::max(acc, x); break;
      case ReduceOp::Prod: acc *= x; break;
    }
  }
  if (op == ReduceOp::Avg) acc = is_floating(dt) ? acc / world : std::trunc(acc / world);
  return acc;
}

// Exact except Avg on floats (NCCL pre-multiplies by 1/n) in 16 bits.
bool close(double got, double want, DataType dt, ReduceOp op) {
  if (op != ReduceOp::Avg || !is_floating(dt)) return got == want;
  const double tol = element_size(dt) == 2 ? 1e-2 : 1e-6;
  return std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));
}

const size_t kCounts[] = {0, 1, 33, 1000, 65537};

TEST_F(NcclTest, AllreduceEveryDtypeAndOp) {
  for (DataType dt : kAllDataTypes) {
    for (ReduceOp op : kAllReduceOps) {
      if (dt == DataType::Bool && op == ReduceOp::Avg) continue;  // refused (validate())
      if (dt == DataType::Int16 && !gwgpu::staged_path()) {
        // NCCL has no 16-bit integer: refused with what to do instead.
        gwgpu::DeviceBuffer buf(64);
        EXPECT_THROW(comm_->allreduce(buf.get(), buf.get(), 8, dt, op), Error);
        continue;
      }
      for (size_t n : kCounts) {
        for (bool in_place : {false, true}) {
          auto host = encode(dt, inputs(rank_, n));
          gwgpu::DeviceBuffer send(host.size()), recv(host.size());
          send.upload(host);
          void* out = in_place ? send.get() : recv.get();
          comm_->allreduce(send.get(), out, n, dt, op).wait();
          auto got = decode(dt, in_place ? send.download<uint8_t>() : recv.download<uint8_t>());
          for (size_t i = 0; i < n; ++i) {
            const double want = reduce_all(op, dt, i, size_);
            ASSERT_TRUE(close(got[i], want, dt, op))
                << to_string(dt) << " " << to_string(op) << " n=" << n << " in_place=" << in_place
                << " element " << i << ": " << got[i] << " != " << want;
          }
        }
      }
    }
  }
}

TEST_F(NcclTest, ReduceScatterAndAllgatherWithUnevenShards) {
  const DataType dt = DataType::Float32;
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1001}, size_t{4096}}) {
    const size_t off = shard_offset(n, size_, rank_), cnt = shard_count(n, size_, rank_);
    // reduce_scatter (sum), out of place
    gwgpu::DeviceBuffer send(n * 4), shard(std::max<size_t>(cnt, 1) * 4);
    send.upload(encode(dt, inputs(rank_, n)));
    comm_->reduce_scatter(send.get(), shard.get(), n, dt, ReduceOp::Sum).wait();
    auto got = decode(dt, shard.download<uint8_t>());
    for (size_t i = 0; i < cnt; ++i) ASSERT_EQ(got[i], reduce_all(ReduceOp::Sum, dt, off + i, size_)) << n;
    // allgather of every rank's inputs for its shard, in place
    gwgpu::DeviceBuffer all(std::max<size_t>(n, 1) * 4);
    std::vector<double> mine(n, -1.0);
    for (size_t i = 0; i < cnt; ++i) mine[off + i] = value(rank_, off + i);
    if (n > 0) all.upload(encode(dt, mine));
    void* in_place = static_cast<std::byte*>(all.get()) + off * 4;
    comm_->allgather(in_place, all.get(), n, dt).wait();
    auto gathered = decode(dt, all.download<uint8_t>());
    for (int r = 0; r < size_; ++r) {
      for (size_t i = 0; i < shard_count(n, size_, r); ++i) {
        const size_t k = shard_offset(n, size_, r) + i;
        ASSERT_EQ(gathered[k], value(r, k)) << "n=" << n << " rank " << r << " element " << k;
      }
    }
  }
}

TEST_F(NcclTest, BroadcastFromEveryRoot) {
  for (int root = 0; root < size_; ++root) {
    const size_t n = 5000;
    gwgpu::DeviceBuffer buf(n * 8);
    buf.upload(encode(DataType::Int64, inputs(rank_, n)));
    comm_->broadcast(buf.get(), buf.get(), n, DataType::Int64, root).wait();
    auto got = decode(DataType::Int64, buf.download<uint8_t>());
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], value(root, i)) << "root " << root;
  }
}

TEST_F(NcclTest, AlltoallInPlaceAndNot) {
  const size_t per = 1000;
  const size_t n = per * size_t(size_);
  auto block_value = [&](int from, int to, size_t i) { return double((from * 31 + to * 7 + int(i)) % 97); };
  std::vector<double> mine(n);
  for (int to = 0; to < size_; ++to)
    for (size_t i = 0; i < per; ++i) mine[size_t(to) * per + i] = block_value(rank_, to, i);
  for (bool in_place : {false, true}) {
    gwgpu::DeviceBuffer send(n * 4), recv(n * 4);
    send.upload(encode(DataType::Int32, mine));
    void* out = in_place ? send.get() : recv.get();
    comm_->alltoall(send.get(), out, per, DataType::Int32).wait();
    auto got = decode(DataType::Int32, in_place ? send.download<uint8_t>() : recv.download<uint8_t>());
    for (int from = 0; from < size_; ++from)
      for (size_t i = 0; i < per; ++i)
        ASSERT_EQ(got[size_t(from) * per + i], block_value(from, rank_, i)) << "in_place=" << in_place;
  }
}

TEST_F(NcclTest, WaitsForTheProducerStream) {
  // The data arrives by an asynchronous copy on the legacy default stream
  // right before the call: the collective must start after it.
  const size_t n = 1 << 22;
  std::vector<double> ones(n, 1.0);
  auto host = encode(DataType::Float32, ones);
  void* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, host.size()), cudaSuccess);
  std::memcpy(pinned, host.data(), host.size());
  gwgpu::DeviceBuffer buf(host.size());
  ASSERT_EQ(cudaMemsetAsync(buf.get(), 0, host.size(), nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(buf.get(), pinned, host.size(), cudaMemcpyHostToDevice, nullptr), cudaSuccess);
  Work w = comm_->allreduce(buf.get(), buf.get(), n, DataType::Float32, ReduceOp::Sum);
  bool called = false;
  w.then([&](std::exception_ptr e) { called = e == nullptr; });
  w.wait();
  EXPECT_TRUE(w.test());
  EXPECT_TRUE(called);
  EXPECT_NE(w.describe().find(gwgpu::staged_path() ? "staged" : "nccl on device"),
            std::string::npos) << w.describe();
  auto got = decode(DataType::Float32, buf.download<uint8_t>());
  for (size_t i = 0; i < n; i += 4099) ASSERT_EQ(got[i], double(size_)) << i;
  cudaFreeHost(pinned);
}

TEST_F(NcclTest, GroupLaunchAndBarrier) {
  if (gwgpu::staged_path()) {
    GTEST_SKIP() << "the group launch of the NCCL backend (the staged backend runs on its "
                    "communicator's engine, which the device layer's own Router cannot reach)";
  }
  // The device layer's own Router over this communicator (a group launch
  // has no public API: the Reducer's batched launches use it internally).
  device::Router router(gwgpu::host_of(*comm_));
  device::Backend& nccl = router.backend(world().device);
  const size_t n = 3000;
  gwgpu::DeviceBuffer a(n * 4), b(n * 8);
  a.upload(encode(DataType::Float32, inputs(rank_, n)));
  b.upload(encode(DataType::Float64, inputs(rank_, n)));
  Work w = nccl.submit_group(
      {CollectiveCall::allreduce(a.get(), a.get(), n, DataType::Float32, ReduceOp::Max),
       CollectiveCall::allreduce(b.get(), b.get(), n, DataType::Float64, ReduceOp::Sum),
       CollectiveCall::barrier()});
  w.wait();
  EXPECT_NE(w.describe().find("group"), std::string::npos) << w.describe();
  auto ga = decode(DataType::Float32, a.download<uint8_t>());
  auto gb = decode(DataType::Float64, b.download<uint8_t>());
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(ga[i], reduce_all(ReduceOp::Max, DataType::Float32, i, size_));
    ASSERT_EQ(gb[i], reduce_all(ReduceOp::Sum, DataType::Float64, i, size_));
  }
  nccl.submit(CollectiveCall::barrier()).wait();
}

TEST_F(NcclTest, MixedHostAndDeviceBuffersAreInvalid) {
  gwgpu::DeviceBuffer dev(64 * 4);
  std::vector<float> host(64);
  try {
    comm_->allreduce(host.data(), dev.get(), 64, DataType::Float32, ReduceOp::Sum);
    FAIL() << "mixed buffers accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("host memory"), std::string::npos) << e.what();
  }
}

TEST_F(NcclTest, AbortFailsLaterDeviceCollectivesWithAborted) {
  std::vector<int> all(size_);
  for (int r = 0; r < size_; ++r) all[r] = r;
  auto child = comm_->split(all);
  ASSERT_TRUE(child);
  gwgpu::DeviceBuffer buf(256 * 4);
  buf.upload(encode(DataType::Float32, inputs(rank_, 256)));
  child->allreduce(buf.get(), buf.get(), 256, DataType::Float32, ReduceOp::Sum).wait();
  child->abort("test");
  try {
    child->allreduce(buf.get(), buf.get(), 256, DataType::Float32, ReduceOp::Sum).wait();
    FAIL() << "collective after abort() ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::Aborted) << e.what();
    EXPECT_NE(std::string(e.what()).find("test"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gradwire
