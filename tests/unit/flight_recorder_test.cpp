// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The flight recorder's ring, its dump format read back, the diagnosis
// gradwire-fr prints, and debug-mode fingerprints: all without ranks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "diag/fingerprint.h"
#include "diag/flight_recorder.h"
#include "diag/fr_report.h"
#include "gradwire/error.h"

namespace gradwire::fr {
namespace {

CollectiveCall allreduce(uint64_t count, DataType dt = DataType::Float32) {
  return CollectiveCall::allreduce(nullptr, nullptr, count, dt, ReduceOp::Sum);
}

bool contains(const std::string& s, const std::string& needle) {
  return s.find(needle) != std::string::npos;
}

// Note [ids in blocks]: two communicators recording in turns from their
// own blocks get distinct ids; the dump lists what the ring still holds by
// queued time; a communicator whose block fell half a ring behind takes a
// fresh one, so its records are not lost to the window the dump reads.
TEST(FlightRecorder, IdBlocksAreDistinctAndStaleBlocksAreReplaced) {
  Recorder r;
  r.configure(64, "/nonexistent", 0, 1);
  const uint16_t a = r.register_comm("a", 0, 1), b = r.register_comm("b", 0, 1);
  Recorder::IdBlock ia, ib;
  std::vector<uint64_t> ids;
  const auto t0 = coarse_now();
  for (uint32_t seq = 0; seq < 20; ++seq) {
    ids.push_back(r.queued(ia, a, seq, allreduce(1), t0 + std::chrono::microseconds(2 * seq)));
    ids.push_back(r.queued(ib, b, seq, allreduce(2), t0 + std::chrono::microseconds(2 * seq + 1)));
  }
  std::vector<uint64_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end());
  Dump d = parse_dump(r.to_json("blocks"));
  ASSERT_EQ(d.entries.size(), 40u);
  for (size_t i = 0; i < d.entries.size(); ++i) {  // by queued time: a, b, a, b, ...
    EXPECT_EQ(d.entries[i].comm, i % 2) << i;
    EXPECT_EQ(d.entries[i].seq, i / 2) << i;
  }
  // b alone records a ring's worth; a's block, half a ring behind now, is
  // replaced, so a's next record is still in the dump's window.
  for (uint32_t seq = 20; seq < 20 + 64; ++seq) r.queued(ib, b, seq, allreduce(2), t0);
  r.queued(ia, a, 20, allreduce(1), t0 + std::chrono::seconds(1));
  d = parse_dump(r.to_json("stale"));
  ASSERT_FALSE(d.entries.empty());
  EXPECT_EQ(d.entries.back().comm, a);
  EXPECT_EQ(d.entries.back().seq, 20u);
}

TEST(FlightRecorder, RingKeepsTheNewestEntriesInOrder) {
  Recorder r;
  r.configure(4, "/nonexistent", 3, 8);
  const uint16_t c = r.register_comm("world", 3, 8);
  std::vector<uint64_t> ids;
  for (uint32_t seq = 0; seq < 6; ++seq) ids.push_back(r.queued(c, seq, allreduce(seq * 10)));
  r.started(ids[0]);  // overwritten: ignored
  r.done(ids[0], true);
  r.started(ids[4]);
  r.done(ids[4], true);
  r.started(ids[5]);
  Dump d = parse_dump(r.to_json("test"));
  EXPECT_EQ(d.rank, 3);
  EXPECT_EQ(d.world_size, 8);
  EXPECT_EQ(d.reason, "test");
  ASSERT_EQ(d.entries.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(d.entries[i].seq, i + 2);
  EXPECT_EQ(d.entries[0].state, State::Queued);
  EXPECT_EQ(d.entries[2].state, State::Completed);
  EXPECT_EQ(d.entries[3].state, State::Started);
  EXPECT_EQ(d.entries[3].count, 50u);
  EXPECT_EQ(d.entries[3].op, "allreduce");
  EXPECT_EQ(d.entries[3].dtype, "float32");
  EXPECT_EQ(d.entries[3].redop, "sum");
  EXPECT_GT(d.entries[2].done_us, 0);
  EXPECT_EQ(d.entries[3].done_us, 0);
  // Note [recorded on the monotonic clock]: dumped on the Unix epoch, as
  // other ranks' dumps and the dump's own time are.
  for (const auto& e : d.entries) {
    EXPECT_LE(std::llabs(e.queued_us - d.dumped_us), 10'000'000) << e.seq;
    EXPECT_LE(e.queued_us, e.started_us == 0 ? e.queued_us : e.started_us);
  }
}

TEST(FlightRecorder, DisabledRecordsNothing) {
  Recorder r;
  r.configure(0, "", 0, 1);
  EXPECT_EQ(r.queued(r.register_comm("world", 0, 1), 0, allreduce(1)), 0u);
  EXPECT_EQ(r.dump("x"), "");
}

TEST(FlightRecorder, DumpWritesOnceAndEscapes) {
  char tmpl[] = "/tmp/gwfr-unit-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  Recorder r;
  r.configure(8, tmpl, 1, 2);
  const uint16_t c = r.register_comm("group 1 [0, 1]", 1, 2);
  r.done(r.queued(c, 7, CollectiveCall::broadcast(nullptr, nullptr, 3, DataType::Int64, 1)), false);
  r.set_error(c, 7, "a \"quoted\"\nerror");
  const std::string path = r.dump("first");
  ASSERT_EQ(path, std::string(tmpl) + "/gradwire-fr-rank1.json");
  EXPECT_EQ(r.dump("second"), path);  // the first reason wins
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  Dump d = parse_dump(ss.str(), path);
  EXPECT_EQ(d.reason, "first");
  ASSERT_EQ(d.comms.size(), 1u);
  EXPECT_EQ(d.comms[0].name, "group 1 [0, 1]");
  // Read back for printing: a newline is shown, not obeyed (issue 17).
  EXPECT_EQ(d.comms[0].error, "a \"quoted\"\\x0aerror");
  EXPECT_EQ(d.comms[0].error_seq, 7);
  ASSERT_EQ(d.entries.size(), 1u);
  EXPECT_EQ(d.entries[0].op, "broadcast");
  EXPECT_EQ(d.entries[0].root, 1);
  EXPECT_EQ(d.entries[0].redop, "");
  EXPECT_EQ(d.entries[0].state, State::Failed);
  std::remove(path.c_str());
  rmdir(tmpl);
}

TEST(FlightRecorder, ParseRejectsOtherFiles) {
  EXPECT_THROW(parse_dump("{\"format\": \"something\"}", "x.json"), Error);
  EXPECT_THROW(parse_dump("{\"format\": \"gradwire-fr/1\", \"rank\": ", "x.json"), Error);
  EXPECT_THROW(parse_dump("not json", "x.json"), Error);
}

// Issue 17: gradwire-fr printed a dump's strings raw (terminal escapes and
// forged lines passed through) and read 20 M numbers into 4 GB before
// refusing them.
TEST(FlightRecorder, DumpStringsArePrintedEscaped) {
  Recorder r;
  r.configure(8, "", 0, 2);
  const uint16_t c = r.register_comm("world\x1b]0;owned\x07", 0, 2);
  r.started(r.queued(c, 0, allreduce(4)));
  const Dump d = parse_dump(r.to_json("boom\x1b[2J\nrank 1: all is well\xc2\x9b" "31m caf\xc3\xa9"));
  EXPECT_EQ(d.reason, "boom\\x1b[2J\\x0arank 1: all is well\\xc2\\x9b31m caf\xc3\xa9");
  const std::string text = diagnose({d}).text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text.find("\nrank 1: all is well"), std::string::npos) << text;
  EXPECT_EQ(text.find("\xc2\x9b"), std::string::npos) << text;
}

TEST(FlightRecorder, ParseBoundsWhatItReads) {
  std::string bomb = "[";
  for (size_t i = 0; i < kMaxJsonValues + 1; ++i) bomb += i ? ",0" : "0";
  bomb += "]";
  try {
    parse_dump(bomb, "bomb.json");
    FAIL() << "a dump of " << kMaxJsonValues + 1 << " numbers was accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "more values than a dump can hold")) << e.what();
  }
  EXPECT_THROW(parse_dump(std::string(kMaxDumpBytes + 1, ' '), "big.json"), Error);
  // The largest recorder the options accept writes a dump within both
  // bounds: measured on 1000 entries with the widest numbers, with 10 %
  // to spare.
  Recorder r;
  r.configure(1000, "", 0, 1);
  const uint16_t c = r.register_comm("world", 0, 1);
  for (uint32_t s = 0; s < 1000; ++s) {
    r.done(r.queued(c, kMaxRecorderEntries * 32 + s, allreduce(uint64_t(1) << 62)), true);
  }
  const std::string json = r.to_json("full");
  EXPECT_EQ(parse_dump(json).entries.size(), 1000u);
  const double values_per_entry = double(std::count(json.begin(), json.end(), ':')) / 1000 + 1;
  EXPECT_LE(values_per_entry * kMaxRecorderEntries * 1.1, double(kMaxJsonValues));
  EXPECT_LE(double(json.size()) / 1000 * kMaxRecorderEntries * 1.1, double(kMaxDumpBytes));
}

// A rank's dump with collectives 0..last (the last one in `last_state`).
Dump make_dump(int rank, int world, uint32_t last, State last_state, const std::string& error = "",
               uint64_t last_count = 1024) {
  Recorder r;
  r.configure(64, "", rank, world);
  const uint16_t c = r.register_comm("world", rank, world);
  for (uint32_t s = 0; s <= last; ++s) {
    uint64_t id = r.queued(c, s, allreduce(s == last ? last_count : 1024));
    if (s < last || last_state != State::Queued) r.started(id);
    if (s < last) r.done(id, true);
    else if (last_state == State::Completed || last_state == State::Failed)
      r.done(id, last_state == State::Completed);
  }
  if (!error.empty()) r.set_error(c, last, error);
  return parse_dump(r.to_json("test"));
}

TEST(FlightRecorderDiagnosis, NamesTheRankBehindAndItsSequenceNumber) {
  const std::string err = "rank 0: allreduce #5 timed out after 3.0 s waiting for data from rank 1";
  std::vector<Dump> dumps = {make_dump(0, 3, 5, State::Failed, err),
                             make_dump(1, 3, 4, State::Completed),
                             make_dump(2, 3, 5, State::Failed, "... sending to rank 1 ...")};
  Diagnosis d = diagnose(dumps);
  ASSERT_FALSE(d.suspects.empty());
  EXPECT_EQ(d.suspects[0], 1);
  EXPECT_TRUE(contains(d.text, "rank 1 is behind on 'world': it never reached allreduce #5"))
      << d.text;
  EXPECT_TRUE(contains(d.text, "ranks 0, 2 waited for rank 1")) << d.text;
}

TEST(FlightRecorderDiagnosis, AMissingDumpIsNamed) {
  const std::string err = "allreduce #3 timed out after 3.0 s waiting for data from rank 2";
  Diagnosis d = diagnose({make_dump(0, 3, 3, State::Failed, err),
                          make_dump(1, 3, 3, State::Failed, err)});
  EXPECT_EQ(d.suspects, std::vector<int>{2});
  EXPECT_TRUE(contains(d.text, "rank 2: NO DUMP")) << d.text;
  EXPECT_TRUE(contains(d.text, "rank 2 left no dump")) << d.text;
}

// Issue 17 item 7: rank 0 is SIGKILLed (no dump); rank 1 waited for it,
// rank 2 waited for rank 1. The rank that is gone comes first, and the
// live rank in the middle is shown as a link of the chain.
TEST(FlightRecorderDiagnosis, ARankThatIsGoneComesBeforeALiveOneWaitingForIt) {
  const auto err = [](int peer) {
    return "allreduce #22 timed out after 3.0 s waiting for data from rank " +
           std::to_string(peer) + " in recursive doubling";
  };
  Diagnosis d = diagnose({make_dump(1, 3, 22, State::Failed, err(0)),
                          make_dump(2, 3, 22, State::Failed, err(1))});
  EXPECT_EQ(d.suspects, (std::vector<int>{0, 1})) << d.text;
  EXPECT_TRUE(contains(d.text, "look at ranks 0, 1 first")) << d.text;
  EXPECT_TRUE(contains(d.text, "rank 2 waited for rank 1 on 'world' and timed out; rank 1 was "
                               "itself waiting for rank 0"))
      << d.text;
}

TEST(FlightRecorderDiagnosis, DifferentCountsAreReported) {
  Diagnosis d = diagnose({make_dump(0, 2, 2, State::Started, "", 1000),
                          make_dump(1, 2, 2, State::Failed, "", 2000)});
  EXPECT_TRUE(contains(d.text, "ranks called different collectives at seq 2 of 'world': rank 0 "
                               "allreduce #2 (1000 x float32 sum); rank 1 allreduce #2 (2000 x "
                               "float32 sum)"))
      << d.text;
}

TEST(FlightRecorderDiagnosis, AgreeingRanksGiveNoFinding) {
  Diagnosis d = diagnose({make_dump(0, 2, 4, State::Completed), make_dump(1, 2, 4, State::Completed)});
  EXPECT_TRUE(d.findings.empty()) << d.text;
  EXPECT_TRUE(d.suspects.empty());
}

}  // namespace
}  // namespace gradwire::fr

namespace gradwire {
namespace {

TEST(Fingerprint, EqualFingerprintsAgree) {
  const auto info = CollectiveCall::allreduce(nullptr, nullptr, 100, DataType::Float32, ReduceOp::Sum);
  std::vector<Fingerprint> all(4, make_fingerprint(9, info));
  EXPECT_FALSE(compare_fingerprints(all).has_value());
}

TEST(Fingerprint, DifferencesNameRanksAndFields) {
  const auto a = CollectiveCall::allreduce(nullptr, nullptr, 100, DataType::Float32, ReduceOp::Sum);
  const auto b = CollectiveCall::broadcast(nullptr, nullptr, 100, DataType::Float32, 0);
  CollectiveCall c = a;
  c.count = 200;
  c.dtype = DataType::BFloat16;
  std::vector<Fingerprint> all = {make_fingerprint(3, a), make_fingerprint(3, b),
                                  make_fingerprint(3, a), make_fingerprint(3, c)};
  auto msg = compare_fingerprints(all);
  ASSERT_TRUE(msg.has_value());
  EXPECT_NE(msg->find("rank 0 called allreduce #3 (100 x float32 sum)"), std::string::npos) << *msg;
  EXPECT_NE(msg->find("rank 1 called broadcast #3 (100 x float32 from rank 0) (differs in op, "
                      "reduce op, root)"),
            std::string::npos)
      << *msg;
  EXPECT_NE(msg->find("rank 3 called allreduce #3 (200 x bfloat16 sum) (differs in dtype, count)"),
            std::string::npos)
      << *msg;
  EXPECT_EQ(msg->find("rank 2"), std::string::npos) << *msg;
}

}  // namespace
}  // namespace gradwire
