// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Checkpoints on 1-4 ranks (include/gradwire/checkpoint.h): round trips of
// per-rank entries, the newest complete checkpoint wins, an interrupted
// save is ignored, corrupt / truncated / missing shards are refused on
// every rank naming the file, pruning keeps `keep` checkpoints.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gradwire/checkpoint.h"
#include "harness.h"

namespace {

namespace fs = std::filesystem;
using gradwire::ErrorCode;
using gwtest::world;

// A directory every rank agrees on, fresh per test.
std::string fresh_dir(const char* name) {
  std::string dir = fmt::format("{}/gw-ckpt-test-{}-{}", fs::temp_directory_path().string(),
                                 name, world().size());
  if (world().rank() == 0) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  world().barrier().wait();
  return dir;
}

// Rank r's entries at step s: different per rank, large enough to matter.
std::map<std::string, std::string> entries(uint64_t step, int rank) {
  std::string big(100000 + size_t(rank) * 7, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = char((i * 131 + step * 7 + size_t(rank)) & 0xff);
  return {{"errors", big}, {"step", std::to_string(step)}, {"empty", ""}};
}

std::string step_dir(const std::string& dir, uint64_t step) {
  return fmt::format("{}/step-{:012d}", dir, step);
}

// Runs load_latest_checkpoint, expecting `code` with every fragment in
// the message, on every rank.
void expect_load_error(const std::string& dir, ErrorCode code,
                       std::initializer_list<std::string> fragments) {
  try {
    gradwire::load_latest_checkpoint(world(), dir);
    ADD_FAILURE() << "rank " << world().rank() << ": loading succeeded";
  } catch (const gradwire::Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const auto& f : fragments) EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, RoundTripsEveryRanksEntriesAndMeta) {
  const std::string dir = fresh_dir("roundtrip");
  EXPECT_FALSE(gradwire::load_latest_checkpoint(world(), dir).has_value());
  gradwire::CheckpointOptions o;
  o.meta["model"] = "mlp";
  o.meta["odd key\nwith newline"] = std::string("\0\x01 binary", 9);
  for (uint64_t step : {5, 10}) gradwire::save_checkpoint(world(), dir, step, entries(step, world().rank()), o);
  auto c = gradwire::load_latest_checkpoint(world(), dir);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->step(), 10u);
  EXPECT_EQ(c->world_size(), world().size());
  EXPECT_EQ(c->entries(), entries(10, world().rank()));
  EXPECT_EQ(c->meta(), o.meta);
  try {
    c->get("nothing");
    ADD_FAILURE() << "get of a missing entry succeeded";
  } catch (const gradwire::Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("'nothing'"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, AnInterruptedSaveIsIgnoredAndThenReplaced) {
  const std::string dir = fresh_dir("interrupted");
  gradwire::save_checkpoint(world(), dir, 1, entries(1, world().rank()));
  gradwire::save_checkpoint(world(), dir, 2, entries(2, world().rank()));
  world().barrier().wait();
  // Step 2 as a kill before its manifest would leave it: shards, no MANIFEST,
  // and a half-written temporary file.
  if (world().rank() == 0) {
    fs::remove(step_dir(dir, 2) + "/MANIFEST");
    std::ofstream(step_dir(dir, 2) + "/shard-00000.bin.tmp") << "half";
  }
  world().barrier().wait();
  auto c = gradwire::load_latest_checkpoint(world(), dir);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->step(), 1u);
  EXPECT_EQ(c->entries(), entries(1, world().rank()));
  // Saving step 2 again completes it.
  gradwire::save_checkpoint(world(), dir, 2, entries(2, world().rank()));
  c = gradwire::load_latest_checkpoint(world(), dir);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->step(), 2u);
  EXPECT_EQ(c->entries(), entries(2, world().rank()));
}

// Note [a lost checkpoint is not a fresh start] (issue 17): every MANIFEST
// deleted from a run's directory must not read as "no checkpoint".
TEST(Checkpoint, LostManifestsAreRefusedNotAFreshStart) {
  const std::string dir = fresh_dir("lost");
  gradwire::save_checkpoint(world(), dir, 1, entries(1, world().rank()));
  gradwire::save_checkpoint(world(), dir, 2, entries(2, world().rank()));
  world().barrier().wait();
  if (world().rank() == 0) {
    fs::remove(step_dir(dir, 1) + "/MANIFEST");
    fs::remove(step_dir(dir, 2) + "/MANIFEST");
  }
  world().barrier().wait();
  expect_load_error(dir, ErrorCode::Protocol,
                    {"rank(s) 0", "no complete checkpoint", "step 2 was completed here",
                     "(step-000000000002, step-000000000001)",
                     "Refusing to start afresh"});
  // Without COMMITTED (a run of an older gradwire), two step directories
  // still say that saves were completed here.
  world().barrier().wait();
  if (world().rank() == 0) fs::remove(dir + "/COMMITTED");
  world().barrier().wait();
  expect_load_error(dir, ErrorCode::Protocol,
                    {"no complete checkpoint", "only completed saves leave more than one"});
  // Removing the directory's contents is the deliberate fresh start.
  world().barrier().wait();
  if (world().rank() == 0) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  world().barrier().wait();
  EXPECT_FALSE(gradwire::load_latest_checkpoint(world(), dir).has_value());
}

// A first save killed before its MANIFEST: nothing was ever committed, so
// starting afresh loses nothing.
TEST(Checkpoint, AnInterruptedFirstSaveIsAFreshStart) {
  const std::string dir = fresh_dir("first");
  gradwire::save_checkpoint(world(), dir, 1, entries(1, world().rank()));
  world().barrier().wait();
  if (world().rank() == 0) {
    fs::remove(step_dir(dir, 1) + "/MANIFEST");
    fs::remove(dir + "/COMMITTED");
  }
  world().barrier().wait();
  EXPECT_FALSE(gradwire::load_latest_checkpoint(world(), dir).has_value());
}

TEST(Checkpoint, ACorruptShardIsNamedOnEveryRank) {
  const std::string dir = fresh_dir("corrupt");
  gradwire::save_checkpoint(world(), dir, 3, entries(3, world().rank()));
  const int victim = world().size() - 1;
  const std::string shard = fmt::format("{}/shard-{:05d}.bin", step_dir(dir, 3), victim);
  world().barrier().wait();
  if (world().rank() == 0) {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(5000);
    f.put('\x7f');
  }
  world().barrier().wait();
  expect_load_error(dir, ErrorCode::Protocol,
                    {fmt::format("rank(s) {}", victim), "SHA-256", shard});
}

TEST(Checkpoint, ATruncatedShardIsNamedOnEveryRank) {
  const std::string dir = fresh_dir("truncated");
  gradwire::save_checkpoint(world(), dir, 4, entries(4, world().rank()));
  const std::string shard = step_dir(dir, 4) + "/shard-00000.bin";
  world().barrier().wait();
  if (world().rank() == 0) fs::resize_file(shard, 1000);
  world().barrier().wait();
  expect_load_error(dir, ErrorCode::Protocol, {"rank(s) 0", "truncated", shard});
}

TEST(Checkpoint, AMalformedManifestIsRefused) {
  const std::string dir = fresh_dir("manifest");
  gradwire::save_checkpoint(world(), dir, 6, entries(6, world().rank()));
  world().barrier().wait();
  if (world().rank() == 0) {
    std::ofstream(step_dir(dir, 6) + "/MANIFEST") << "gradwire-checkpoint 1\nstep 6\n";
  }
  world().barrier().wait();
  expect_load_error(dir, ErrorCode::Protocol, {"MANIFEST", "truncated"});
}

TEST(Checkpoint, KeepsTheNewestTwo) {
  const std::string dir = fresh_dir("prune");
  for (uint64_t step = 1; step <= 5; ++step) {
    gradwire::save_checkpoint(world(), dir, step, entries(step, world().rank()));
  }
  world().barrier().wait();
  for (uint64_t step = 1; step <= 5; ++step) {
    EXPECT_EQ(fs::exists(step_dir(dir, step)), step >= 4) << "step " << step;
  }
}

TEST(Checkpoint, AnUnwritableDirectoryFailsOnEveryRank) {
  // A path through a regular file: not even root can create it.
  const std::string base = fresh_dir("unwritable");
  const std::string dir = base + "/a-file/checkpoints";
  if (world().rank() == 0) std::ofstream(base + "/a-file") << "not a directory";
  world().barrier().wait();
  try {
    gradwire::save_checkpoint(world(), dir, 1, entries(1, world().rank()));
    ADD_FAILURE() << "saved below a regular file";
  } catch (const gradwire::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank(s) 0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(dir), std::string::npos) << e.what();
  }
}

}  // namespace

int main(int argc, char** argv) { return gwtest::run_rank_tests(argc, argv); }
