// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Slurm's hostlist syntax (SLURM_STEP_NODELIST, SLURM_JOB_NODELIST), e.g.
// "node[01-04,07],gpu-a[1-2]". Pure; internal to src/bootstrap.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace gradwire::bootstrap {

// The host names of `list`, in Slurm's order: comma-separated entries (a
// comma inside brackets separates ranges), each a name with any number of
// bracket groups, each group a comma-separated list of numbers and lo-hi
// ranges. Numbers keep the width of the range's first number ("[08-10]":
// 08 09 10; "[8-10]": 8 9 10). Several groups expand as nested loops, the
// last group fastest ("r[1-2]n[1-2]": r1n1 r1n2 r2n1 r2n2), as Slurm's
// `scontrol show hostnames` prints them.
//
// Malformed lists (empty, an empty entry or group, unbalanced or nested
// brackets, a range that runs backwards, a non-digit inside a group,
// white space, more than `max_hosts` names) are an InvalidArgument that
// quotes `name='list'`, says what is wrong and where (the offset).
std::vector<std::string> expand_hostlist(std::string_view list, std::string_view name,
                                         size_t max_hosts = 1 << 20);

}  // namespace gradwire::bootstrap
