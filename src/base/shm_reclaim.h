// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [reclaiming dead regions]: every shared-memory region gradwire
// creates in /dev/shm is named after its creator's pid, "gw_<pid>_<random>_<n>"
// (the shm provider's endpoint region, Note [unique shm names]; a shared
// buffer's segment, shm/windows.h). A process that is SIGKILLed
// cannot unlink its regions, and gwlaunch is the only launcher that cleans
// up after its ranks: under mpirun or torchrun each killed rank left 16 MiB
// behind for good (issue 17), in memory, until the host reboots.
// So the first region a process creates (once per process) is preceded by
// a sweep: a region is reclaimed (unlinked) when
//   * its name has our form and it is owned by this user,
//   * its pid does not exist in our pid namespace (kill(pid, 0) = ESRCH),
//   * it is at least kMinAge old (a region is unlocked between its
//     creation and its owner's flock, a few microseconds),
//   * and nobody holds a lock on it: a live owner holds a shared flock on
//     each of its regions for as long as it uses them (hold_region). The
//     lock is what makes the sweep safe where the pid test alone is not:
//     a live process in another pid namespace that shares /dev/shm
//     (hostIPC containers) looks dead by pid but still holds its lock.
// Regions made before the lock existed are reclaimed on the pid test.
// Unlinking only removes the name: a process that still has a region
// mapped keeps its memory. GRADWIRE_SHM_RECLAIM=0 turns the sweep off.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gradwire::shm {

// The creator's pid from a region name ("gw_<pid>_<hex>_<n>", with or
// without a leading '/'); nullopt for any other name. Pure.
std::optional<int> region_pid(std::string_view name);

struct Reclaimed {
  std::vector<std::string> names;  // unlinked
  uint64_t bytes = 0;              // memory they held
};
constexpr std::chrono::milliseconds kMinAge{2000};
// The sweep when a transport closes (reclaim_now): a launcher that restarts
// at once can end the next generation within kMinAge of the kill, and the
// window kMinAge guards (creation to flock) is microseconds long.
constexpr std::chrono::milliseconds kMinAgeAtClose{200};
// One sweep of `dir` (see the Note). Never throws.
Reclaimed reclaim_dead_regions(const std::string& dir = "/dev/shm",
                               std::chrono::milliseconds min_age = kMinAge);

// The sweep, once per process, logged when it finds anything; a no-op
// with GRADWIRE_SHM_RECLAIM=0. Never throws.
void reclaim_once();
// The same sweep, every time: when a transport on shm closes. A launcher
// that restarts a job at once (torchrun after a SIGKILLed rank) starts the
// next generation before the dead rank's region is kMinAge old, so the
// first sweep passes it by; the one at the end of that generation's run
// finds it (tests/ranks/torchrun_restart.sh).
void reclaim_now();

// Opens `path` (a region this process created or uses) and takes a shared
// flock on it; the returned descriptor must stay open while the region is
// in use. -1 if that fails (the region then goes unprotected).
int hold_region(const std::string& path);

}  // namespace gradwire::shm
