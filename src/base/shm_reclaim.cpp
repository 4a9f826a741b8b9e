// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "base/shm_reclaim.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <ctime>
#include <mutex>

#include "base/logging.h"

namespace gradwire::shm {

std::optional<int> region_pid(std::string_view name) {
  if (!name.empty() && name.front() == '/') name.remove_prefix(1);
  if (!name.starts_with("gw_")) return std::nullopt;
  name.remove_prefix(3);
  int pid = 0;
  auto [p, ec] = std::from_chars(name.data(), name.data() + name.size(), pid);
  if (ec != std::errc() || p == name.data() || pid <= 0) return std::nullopt;
  std::string_view rest(p, size_t(name.data() + name.size() - p));
  // "_<hex>_<decimal>"
  if (!rest.starts_with("_")) return std::nullopt;
  rest.remove_prefix(1);
  const size_t sep = rest.find('_');
  if (sep == 0 || sep == std::string_view::npos) return std::nullopt;
  for (char c : rest.substr(0, sep))
    if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
  const std::string_view n = rest.substr(sep + 1);
  if (n.empty()) return std::nullopt;
  for (char c : n)
    if (c < '0' || c > '9') return std::nullopt;
  return pid;
}

namespace {
// Milliseconds since `t` (a file's ctime) on the real-time clock.
int64_t age_ms(const timespec& t) {
  timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return (int64_t(now.tv_sec) - int64_t(t.tv_sec)) * 1000 +
         (int64_t(now.tv_nsec) - int64_t(t.tv_nsec)) / 1000000;
}
}  // namespace

Reclaimed reclaim_dead_regions(const std::string& dir, std::chrono::milliseconds min_age) {
  Reclaimed out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  const uid_t me = ::geteuid();
  std::vector<std::string> candidates;
  while (dirent* e = ::readdir(d)) {
    const auto pid = region_pid(e->d_name);
    if (!pid || *pid == ::getpid()) continue;
    if (::kill(*pid, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to ask
    candidates.emplace_back(e->d_name);
  }
  ::closedir(d);
  for (const std::string& name : candidates) {
    const std::string path = dir + "/" + name;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;
    struct stat st {};
    const bool mine = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == me &&
                      age_ms(st.st_ctim) >= min_age.count();
    // A live holder (in another pid namespace) keeps its shared lock.
    if (mine && ::flock(fd, LOCK_EX | LOCK_NB) == 0 && ::unlink(path.c_str()) == 0) {
      out.names.push_back(name);
      out.bytes += uint64_t(st.st_blocks) * 512;
    }
    ::close(fd);
  }
  return out;
}

namespace {
void sweep(std::chrono::milliseconds min_age) {
  const char* v = std::getenv("GRADWIRE_SHM_RECLAIM");
  if (v && std::string_view(v) == "0") return;
  try {
    const Reclaimed r = reclaim_dead_regions("/dev/shm", min_age);
    if (r.names.empty()) return;
    log().info("reclaimed {} shared-memory region(s) ({:.1f} MiB) left in /dev/shm by "
               "gradwire processes that are gone, e.g. {} (GRADWIRE_SHM_RECLAIM=0 turns "
               "this off)",
               r.names.size(), double(r.bytes) / (1 << 20), r.names.front());
  } catch (...) {
    // Logging failed: the sweep itself never throws. Nothing to undo.
  }
}

}  // namespace

void reclaim_now() { sweep(kMinAgeAtClose); }

void reclaim_once() {
  static std::once_flag once;
  std::call_once(once, [] { sweep(kMinAge); });
}

int hold_region(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return -1;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace gradwire::shm
