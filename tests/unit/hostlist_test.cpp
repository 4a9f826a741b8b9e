// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Slurm's hostlist syntax (src/bootstrap/hostlist.h): what Slurm writes into
// SLURM_STEP_NODELIST, and every way a list can be malformed.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "bootstrap/hostlist.h"
#include "gradwire/error.h"

namespace gradwire::bootstrap {
namespace {

using Names = std::vector<std::string>;

// expand_hostlist(list) must throw InvalidArgument holding every needle.
void expect_invalid(const std::string& list, const Names& needles, size_t max_hosts = 1 << 20) {
  try {
    expand_hostlist(list, "SLURM_STEP_NODELIST", max_hosts);
    ADD_FAILURE() << "no error for '" << list << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument) << e.what();
    for (const auto& n : needles) {
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "'" << n << "' not in: " << e.what();
    }
  }
}

TEST(Hostlist, ExpandsSlurmsSyntax) {
  EXPECT_EQ(expand_hostlist("vm", "L"), Names{"vm"});
  EXPECT_EQ(expand_hostlist("node[01-04,07],gpu-a[1-2]", "L"),
            (Names{"node01", "node02", "node03", "node04", "node07", "gpu-a1", "gpu-a2"}));
  // The width is the range's first number's: zero padding kept, none added.
  EXPECT_EQ(expand_hostlist("n[8-10]", "L"), (Names{"n8", "n9", "n10"}));
  EXPECT_EQ(expand_hostlist("n[08-10]", "L"), (Names{"n08", "n09", "n10"}));
  EXPECT_EQ(expand_hostlist("n[098-101]-ib", "L"),
            (Names{"n098-ib", "n099-ib", "n100-ib", "n101-ib"}));
  // Several groups: nested loops, the last fastest (scontrol show hostnames).
  EXPECT_EQ(expand_hostlist("r[1-2]n[1,3]", "L"), (Names{"r1n1", "r1n3", "r2n1", "r2n3"}));
  EXPECT_EQ(expand_hostlist("a,b-c,[3-4]x,d.example.org", "L"),
            (Names{"a", "b-c", "3x", "4x", "d.example.org"}));
  EXPECT_EQ(expand_hostlist("gpu[7]", "L"), Names{"gpu7"});
}

TEST(Hostlist, MalformedListsAreNamedWithWhatIsWrong) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "it is empty"},
      {"a,,b", "an empty name at offset 2"},
      {"a,", "an empty name at offset 2"},
      {",a", "an empty name at offset 0"},
      {"node[1-2", "a '[' that is never closed at offset 4"},
      {"node1-2]", "a ']' without its '[' at offset 7"},
      {"node[[1]]", "a '[' inside brackets"},
      {"node[]", "empty brackets"},
      {"node[1,]", "an empty range in brackets"},
      {"node[3-1]", "the range 3-1 runs backwards"},
      {"node[a-b]", "'a' inside brackets where a number belongs"},
      {"node[1-]", "a range bound that is missing"},
      {"node[-2]", "a range bound that is missing"},
      {"node[1-2-3]", "'-' inside brackets"},
      {"node 1", "white space at offset 4"},
      {"n[1234567890123456789]", "too long"},
  };
  for (const auto& [list, what] : cases) {
    expect_invalid(list, {"SLURM_STEP_NODELIST='" + list + "'", "not a Slurm host list", what});
  }
}

TEST(Hostlist, RefusesMoreNamesThanTheCap) {
  expect_invalid("n[0-99999999]", {"more than 1048576 host names"});
  expect_invalid("a[0-999]b[0-9999]", {"more than"});
  expect_invalid("a[1-3],b[1-2]", {"more than 4 host names"}, 4);
  EXPECT_EQ(expand_hostlist("a[1-2],b[1-2]", "L", 4).size(), 4u);
}

}  // namespace
}  // namespace gradwire::bootstrap
