// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [a connection's last will] (src/bootstrap/tcp_store_server.h): a
// client that dies without destroying its Store has its will carried out by
// the server; one that closes cleanly has it withdrawn; the first value
// written to the key stays. "Dies" is a forked child that leaves with
// _exit(): its kernel closes its sockets, as for a SIGKILL.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "bootstrap/store.h"
#include "bootstrap/store_wire.h"
#include "runtime/watchdog.h"
#include "test_util.h"

namespace gradwire::bootstrap {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<Store> will_server(uint16_t port) {
  return make_tcp_store("127.0.0.1", port, true, Deadline::after(2s), TcpStoreOptions{});
}
std::unique_ptr<Store> will_client(uint16_t port) {
  return make_tcp_store("127.0.0.1", port, false, Deadline::after(2s));
}

// A child process leaves `value` as its will under `key`, then dies
// without destroying its Store. Returns once it has been reaped.
void child_dies_with_will(uint16_t port, const std::string& key, const std::string& value) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    try {
      auto c = will_client(port);
      c->set_will(key, value);
      c.release();  // never destroyed: the will stays
    } catch (...) {
      ::_exit(2);
    }
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
}

TEST(StoreWill, ADeadClientsWillIsWritten) {
  const uint16_t port = gwtest::free_port();
  auto srv = will_server(port);
  child_dies_with_will(port, "lost", "rank 3");
  auto reader = will_client(port);
  EXPECT_EQ(reader->get("lost", Deadline::after(5s), "the will"), "rank 3");
}

TEST(StoreWill, AClientThatClosesCleanlyWithdrawsIt) {
  const uint16_t port = gwtest::free_port();
  auto srv = will_server(port);
  {
    auto c = will_client(port);
    EXPECT_TRUE(c->set_will("lost", "rank 1"));
    EXPECT_TRUE(c->set_will("lost", "rank 1, again"));  // replaces, on the same connection
    c->set("other", "x");  // ordinary requests leave the will alone
  }
  // The withdrawal was answered before the destructor returned; the sleep
  // lets the server see the close too, so that a will left in place would
  // have been written by the time we look (this is what could fail).
  std::this_thread::sleep_for(200ms);
  auto reader = will_client(port);
  EXPECT_EQ(reader->get("other", Deadline::after(1s), "x"), "x");
  EXPECT_FALSE(reader->try_get("lost").has_value());
}

TEST(StoreWill, TheFirstValueStays) {
  const uint16_t port = gwtest::free_port();
  auto srv = will_server(port);
  auto reader = will_client(port);
  reader->set("lost", "already there");
  child_dies_with_will(port, "lost", "rank 2");
  child_dies_with_will(port, "other-key", "rank 2");
  EXPECT_EQ(reader->get("other-key", Deadline::after(5s), "the second will"), "rank 2");
  EXPECT_EQ(*reader->try_get("lost"), "already there");
}

TEST(StoreWill, PrefixStoresPrefixTheKeyAndOtherStoresHaveNoWill) {
  const uint16_t port = gwtest::free_port();
  auto srv = will_server(port);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto c = prefix_store(will_client(port), "world7/");
    c->set_will("gradwire/lost", "5");
    c.release();
    ::_exit(0);
  }
  ASSERT_EQ(::waitpid(pid, nullptr, 0), pid);
  auto reader = will_client(port);
  EXPECT_EQ(reader->get("world7/gradwire/lost", Deadline::after(5s), "the will"), "5");

  const std::string dir = ::testing::TempDir() + "store_will_files";
  auto files = make_file_store(dir);
  EXPECT_FALSE(files->set_will("k", "v"));  // no connection: nothing to watch
}

TEST(StoreWill, WillsAreValidated) {
  const uint16_t port = gwtest::free_port();
  auto srv = will_server(port);
  auto c = will_client(port);
  EXPECT_THROW(c->set_will("k", ""), Error);
  EXPECT_THROW(c->set_will("", "v"), Error);
  EXPECT_THROW(c->set_will("k", std::string(5000, 'v')), Error);
}

TEST(StoreWire, WillFramesParse) {
  using namespace tcp_store;
  const std::string frame = encode_request(kWill, "gradwire/lost", "3\x1f" "42\x1fhost");
  auto r = parse_request(frame);  // views into `frame`
  ASSERT_EQ(r.status, Parse::Ok);
  EXPECT_EQ(r.request.command, kWill);
  EXPECT_EQ(r.request.key, "gradwire/lost");
  EXPECT_EQ(r.request.value, "3\x1f" "42\x1fhost");
  const std::string withdrawal = encode_request(kWill, "gradwire/lost", "");
  r = parse_request(withdrawal);
  ASSERT_EQ(r.status, Parse::Ok);
  EXPECT_EQ(r.request.value, "");
}

}  // namespace
}  // namespace gradwire::bootstrap

namespace gradwire::job {
namespace {

TEST(LostRank, RoundTripsAndRejectsAnythingElse) {
  const LostRank l{12, 4567, "node-7.cluster"};
  auto back = parse_lost_rank(encode_lost_rank(l));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->rank, 12);
  EXPECT_EQ(back->pid, 4567);
  EXPECT_EQ(back->host, "node-7.cluster");
  EXPECT_FALSE(parse_lost_rank(""));
  EXPECT_FALSE(parse_lost_rank("12"));
  EXPECT_FALSE(parse_lost_rank("12\x1f"));
  EXPECT_FALSE(parse_lost_rank("x\x1f" "1\x1fh"));
  EXPECT_FALSE(parse_lost_rank("-1\x1f" "1\x1fh"));
  EXPECT_FALSE(parse_lost_rank("99999999999\x1f" "1\x1fh"));
  // A host name is printed in errors: control bytes do not pass through.
  EXPECT_EQ(parse_lost_rank("1\x1f" "2\x1fho\x1b[2Jst")->host, "ho?[2Jst");
}

}  // namespace
}  // namespace gradwire::job
