// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [reclaiming dead regions]: the names gradwire gives its regions, and
// the sweep that unlinks those of dead processes and nothing else.
#include "base/shm_reclaim.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "shm/windows.h"

namespace gradwire::shm {
namespace {

namespace fs = std::filesystem;

TEST(ShmReclaim, RegionNames) {
  EXPECT_EQ(region_pid("gw_1234_7388fa2abf1897ed_0"), 1234);
  EXPECT_EQ(region_pid("/gw_77_0a1b2c3d4e5f6789_12"), 77);
  for (const char* bad : {"gw_", "gw_x_ab_0", "gw_12_ab", "gw_12__0", "gw_12_xyz_0", "gw_12_ab_",
                          "gw_12_ab_1a", "gw_0_ab_0", "gw_-5_ab_0", "fi_12_ab_0", "1234:0:0",
                          "gw_99999999999999_ab_0"}) {
    EXPECT_EQ(region_pid(bad), std::nullopt) << bad;
  }
}

// A pid that was just used and is no longer alive.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

class ShmReclaimDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gw-reclaim-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string make(const std::string& name) {
    std::ofstream(dir_ + "/" + name) << std::string(8192, 'x');
    return name;
  }
  bool exists(const std::string& name) const { return fs::exists(dir_ + "/" + name); }
  std::string dir_;
};

TEST_F(ShmReclaimDir, AFreshRegionIsLeftAlone) {
  // Between its creation and its owner's flock a region is unlocked: a
  // sweep must not take a region that young for a dead one's.
  const std::string young = make("gw_" + std::to_string(dead_pid()) + "_00ff00ff00ff00ff_0");
  EXPECT_TRUE(reclaim_dead_regions(dir_).names.empty());
  EXPECT_TRUE(exists(young));
}

TEST_F(ShmReclaimDir, OnlyDeadUnlockedRegionsGo) {
  const pid_t dead = dead_pid();
  const std::string gone = make("gw_" + std::to_string(dead) + "_00ff00ff00ff00ff_0");
  const std::string locked = make("gw_" + std::to_string(dead) + "_00ff00ff00ff00ff_1");
  const std::string mine = make("gw_" + std::to_string(::getpid()) + "_00ff00ff00ff00ff_0");
  const std::string live = make("gw_1_00ff00ff00ff00ff_0");  // init is always alive
  const std::string other = make("somebody_else_" + std::to_string(dead));
  // A live process in another pid namespace holds its lock (simulated:
  // this process holds it for a name whose pid is dead here).
  const int hold = hold_region(dir_ + "/" + locked);
  ASSERT_GE(hold, 0);
  Reclaimed r = reclaim_dead_regions(dir_, std::chrono::seconds(0));
  EXPECT_EQ(r.names, std::vector<std::string>{gone});
  EXPECT_GE(r.bytes, 8192u);
  EXPECT_FALSE(exists(gone));
  EXPECT_TRUE(exists(locked));
  EXPECT_TRUE(exists(mine));
  EXPECT_TRUE(exists(live));
  EXPECT_TRUE(exists(other));
  // Once the holder lets go, the region is a dead one's.
  ::close(hold);
  r = reclaim_dead_regions(dir_, std::chrono::seconds(0));
  EXPECT_EQ(r.names, std::vector<std::string>{locked});
  EXPECT_TRUE(exists(mine));
}

// A real segment (shm_open in /dev/shm) of a process that is SIGKILLed
// before it could unlink it: the sweep of the next process removes it.
TEST(ShmReclaim, ASigkilledProcessSegmentIsReclaimed) {
  int names[2];
  ASSERT_EQ(::pipe(names), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("GRADWIRE_SHM_RECLAIM", "0", 1);  // the child leaves others alone
    shm::Created c = shm::create_segment(1 << 20, 0);
    std::memset(c.map.data(), 1, 1 << 20);  // touch it: the memory is really held
    const std::string n = c.name + "\n";
    ssize_t ignored = ::write(names[1], n.data(), n.size());
    (void)ignored;
    ::raise(SIGKILL);
  }
  ::close(names[1]);
  std::string name;
  char ch;
  while (::read(names[0], &ch, 1) == 1 && ch != '\n') name += ch;
  ::close(names[0]);
  ::waitpid(pid, nullptr, 0);
  ASSERT_FALSE(name.empty());
  const std::string path = "/dev/shm" + name;
  ASSERT_TRUE(fs::exists(path)) << path;
  const Reclaimed r = reclaim_dead_regions("/dev/shm", std::chrono::seconds(0));
  EXPECT_NE(std::find(r.names.begin(), r.names.end(), name.substr(1)), r.names.end()) << name;
  EXPECT_FALSE(fs::exists(path)) << path;
}

}  // namespace
}  // namespace gradwire::shm
