// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The staging pipeline (Note [staging pipeline], device/staged/staging.h)
// with a fake copy engine on host memory whose copies complete late and in
// order, like one CUDA stream: the step must only ever see a slot whose
// copy in is done and no copy out pending, chunks must cover the buffer
// exactly (element-aligned, last one shorter), and the copies must run
// ahead of the step (the overlap the pipeline exists for).
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <numeric>
#include <vector>

#include "gradwire/error.h"
#include "transport/ofi/hmem.h"
#include "device/staged/staging.h"

namespace gradwire::device::staged {
namespace {

class FakeCopyEngine : public CopyEngine {
 public:
  FakeCopyEngine(int slots, size_t bytes, int latency)
      : host_(size_t(slots), std::vector<std::byte>(bytes)), latency_(latency) {}
  int slots() const override { return int(host_.size()); }
  size_t slot_bytes() const override { return host_[0].size(); }
  void* slot(int i) override { return host_[size_t(i)].data(); }
  void to_host(int i, const void* src, size_t n) override {
    queue_.push_back({host_[size_t(i)].data(), src, n, i});
    max_queued_ = std::max(max_queued_, queue_.size());
  }
  void to_device(void* dst, int i, size_t n) override {
    queue_.push_back({dst, host_[size_t(i)].data(), n, i});
  }
  bool done(int i) override {
    // Each poll completes one copy after `latency_` polls, in order.
    if (++polls_ % latency_ == 0 && !queue_.empty()) {
      const Copy& c = queue_.front();
      std::memcpy(c.dst, c.src, c.bytes);
      queue_.pop_front();
    }
    return pending(i) == 0;
  }
  int pending(int i) const {
    int n = 0;
    for (const Copy& c : queue_) n += c.slot == i;
    return n;
  }
  size_t max_queued() const { return max_queued_; }

 private:
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
    int slot;
  };
  std::vector<std::vector<std::byte>> host_;
  std::deque<Copy> queue_;
  int latency_;
  long polls_ = 0;
  size_t max_queued_ = 0;
};

void run_case(int slots, size_t slot_bytes, size_t bytes, size_t es, bool in_place) {
  std::vector<uint8_t> src(bytes), out(bytes, 0xee);
  std::iota(src.begin(), src.end(), uint8_t{1});
  const std::vector<uint8_t> original = src;
  FakeCopyEngine copies(slots, slot_bytes, 3);
  size_t covered = 0;
  run_staged(copies, src.data(), in_place ? src.data() : out.data(), bytes, es,
             [&](void* host, size_t offset, size_t n) {
               ASSERT_EQ(offset, covered) << "chunks out of order or with gaps";
               ASSERT_EQ(offset % es, 0u);
               ASSERT_LE(n, slot_bytes);
               for (int s = 0; s < copies.slots(); ++s) {
                 if (copies.slot(s) == host) ASSERT_EQ(copies.pending(s), 0) << "copy pending";
               }
               auto* p = static_cast<uint8_t*>(host);
               for (size_t i = 0; i < n; ++i) {
                 ASSERT_EQ(p[i], original[offset + i]) << "step saw a slot before its copy in";
                 p[i] = uint8_t(p[i] + 1);
               }
               covered += n;
             },
             Deadline::after(std::chrono::seconds(10)), "test");
  ASSERT_EQ(covered, bytes);
  const auto& result = in_place ? src : out;
  for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(result[i], uint8_t(original[i] + 1)) << i;
  for (int s = 0; s < slots; ++s) EXPECT_EQ(copies.pending(s), 0);
  if (bytes > 3 * slot_bytes && slots >= 3) EXPECT_GE(copies.max_queued(), 2u) << "no copy ran ahead";
}

TEST(StagingTest, CoversTheBufferInElementAlignedChunks) {
  for (int slots : {2, 3, 4}) {
    for (size_t bytes : {size_t{1}, size_t{8}, size_t{10}, size_t{1000}, size_t{4099}}) {
      for (bool in_place : {false, true}) {
        size_t es = bytes % 4 == 0 ? 4 : 1;
        run_case(slots, 10, bytes, es, in_place);  // 10-byte slots: 8-byte chunks for es 4
        run_case(slots, 256, bytes, es, in_place);
      }
    }
  }
}

TEST(StagingTest, NothingToDoAndBadSlots) {
  FakeCopyEngine copies(3, 16, 1);
  int steps = 0;
  run_staged(copies, nullptr, nullptr, 0, 4, [&](void*, size_t, size_t) { ++steps; },
             Deadline::after(std::chrono::seconds(1)), "empty");
  EXPECT_EQ(steps, 0);
  std::vector<uint8_t> b(64);
  FakeCopyEngine small(3, 4, 1);
  EXPECT_THROW(run_staged(small, b.data(), b.data(), 64, 8, [](void*, size_t, size_t) {},
                          Deadline::after(std::chrono::seconds(1)), "too small"),
               Error);
}

}  // namespace
}  // namespace gradwire::device::staged

namespace gradwire::transport::ofi {
namespace {

TEST(HmemTest, PathRule) {
  HmemSupport none, hmem{true, "efa"};
  EXPECT_EQ(choose_gpu_path(false, true, hmem), GpuPath::Unsupported);
  EXPECT_EQ(choose_gpu_path(true, true, none), GpuPath::Nccl);
  EXPECT_EQ(choose_gpu_path(true, false, hmem), GpuPath::Direct);
  EXPECT_EQ(choose_gpu_path(true, false, none), GpuPath::Staged);
}

TEST(HmemTest, ProbeAnswersForTheLocalProviders) {
  // shm and tcp here: whatever the answer, the probe must give one with a
  // reason and never throw.
  for (const char* prov : {"shm", "tcp;ofi_rxm", "no-such-provider"}) {
    HmemSupport s = probe_hmem(prov, "");
    EXPECT_FALSE(s.detail.empty()) << prov;
  }
}

}  // namespace
}  // namespace gradwire::transport::ofi
