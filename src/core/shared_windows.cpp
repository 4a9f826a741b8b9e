// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "core/shared_windows.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "bootstrap/socket.h"
#include "core/communicator_impl.h"
#include "core/errors.h"
#include "core/hierarchy.h"
#include "core/logging.h"
#include "gradwire/shared_buffer.h"

namespace gradwire {

namespace shared {

Mapping::~Mapping() {
  if (data_) munmap(data_, length_);
}

Mapping& Mapping::operator=(Mapping&& o) noexcept {
  if (this != &o) {
    if (data_) munmap(data_, length_);
    data_ = std::exchange(o.data_, nullptr);
    length_ = std::exchange(o.length_, 0);
  }
  return *this;
}

std::optional<Location> Windows::find(const void* p, size_t bytes) const {
  const auto* b = static_cast<const std::byte*>(p);
  std::lock_guard<std::mutex> lk(mu_);
  for (const auto& [id, w] : windows_) {
    const std::byte* base = w.maps[rank_].data();
    if (b >= base && b + bytes <= base + w.bytes[rank_]) return Location{id, uint64_t(b - base)};
  }
  return std::nullopt;
}

std::byte* Windows::address(int r, uint32_t id, uint64_t offset, size_t bytes) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = windows_.find(id);
  if (it == windows_.end() || r < 0 || r >= size_) return nullptr;
  const size_t have = it->second.bytes[r];
  if (offset > have || bytes > have - offset) return nullptr;
  return it->second.maps[r].data() + offset;
}

void Windows::set_controls(std::vector<Mapping> controls) {
  controls_ = std::move(controls);
  active_ = true;
}

void Windows::add(uint32_t id, std::vector<Mapping> maps, std::vector<size_t> bytes) {
  std::lock_guard<std::mutex> lk(mu_);
  windows_[id] = Window{std::move(maps), std::move(bytes)};
}

void Windows::release(uint32_t id) {
  Window gone;  // unmapped outside the lock
  std::lock_guard<std::mutex> lk(mu_);
  auto it = windows_.find(id);
  if (it == windows_.end()) return;
  gone = std::move(it->second);
  windows_.erase(it);
}

namespace {

size_t page_round(size_t bytes) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  return std::max(page, (bytes + page - 1) / page * page);
}

// Which machine and kernel this process runs on: ranks with the same
// identity can share /dev/shm (a private /dev/shm per container is caught
// when a peer's segment does not open).
std::string host_identity(const CommunicatorImpl& comm) {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string boot;
  std::getline(f, boot);
  // Emulated hosts (GRADWIRE_HOST_ID) stay apart, as they would on a cluster.
  return host_name(comm.options) + "/" + boot;
}

std::string unique_name(uint32_t id) {
  std::random_device rd;
  return fmt::format("/gw_{}_{:08x}{:08x}_{}", getpid(), rd(), rd(), id);
}

struct Created {
  std::string name;  // "" if shm_open failed
  std::string error;
  Mapping map;
};

Created create_segment(size_t bytes, uint32_t id) {
  Created c;
  const size_t length = page_round(bytes);
  c.name = unique_name(id);
  int fd = shm_open(c.name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd >= 0 && ftruncate(fd, off_t(length)) == 0) {
    void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) c.map = Mapping(static_cast<std::byte*>(p), length);
  }
  const int err = errno;
  if (fd >= 0) close(fd);
  if (c.map.data()) return c;
  c.error = fmt::format("creating {} of {} bytes: {}", c.name, length, bootstrap::errno_text(err));
  if (fd >= 0) shm_unlink(c.name.c_str());
  c.name.clear();
  // Private memory instead, so the caller still gets a buffer.
  void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    raise(ErrorCode::InvalidArgument, "allocate_shared: cannot allocate {} bytes: {}", length,
          bootstrap::errno_text(errno));
  }
  c.map = Mapping(static_cast<std::byte*>(p), length);
  return c;
}

Mapping open_segment(const std::string& name, size_t length, std::string& error) {
  int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    error = fmt::format("opening {}: {}", name, bootstrap::errno_text(errno));
    return {};
  }
  void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (p == MAP_FAILED) {
    error = fmt::format("mapping {}: {}", name, bootstrap::errno_text(err));
    return {};
  }
  return Mapping(static_cast<std::byte*>(p), length);
}

struct Exchanged {
  bool direct = false;
  std::string why_not;      // when !direct
  std::vector<Mapping> maps;  // by rank when direct; else only own (at [rank])
  std::vector<size_t> bytes;  // by rank
};

// Note [mapping each other's segments]: two rounds over the communicator.
// Round one: every rank creates its segment and publishes host identity,
// name and size. If all share a host, each rank maps every peer's segment;
// round two publishes whether that worked, so all ranks reach the same
// verdict. Then each rank unlinks its own name: the memory lives on in the
// mappings, and nothing is left in /dev/shm if a process is killed later.
Exchanged exchange_segments(CommunicatorImpl& comm, size_t bytes, uint32_t id) {
  const int n = comm.size, me = comm.rank;
  Created mine = create_segment(bytes, id);
  const std::string blob = fmt::format("{}\n{}\n{}\n{}", host_identity(comm), mine.name, bytes,
                                       mine.error);
  const std::vector<std::string> all = comm.allgather_blobs(blob);
  Exchanged out;
  out.maps.resize(n);
  out.bytes.resize(n);
  std::vector<std::string> names(n), hosts(n);
  std::string problem;
  for (int r = 0; r < n; ++r) {
    std::istringstream in(all[r]);
    std::string size_text, error;
    std::getline(in, hosts[r]);
    std::getline(in, names[r]);
    std::getline(in, size_text);
    std::getline(in, error);
    out.bytes[r] = size_t(std::strtoull(size_text.c_str(), nullptr, 10));
    if (problem.empty() && names[r].empty()) problem = fmt::format("rank {}: {}", r, error);
    if (problem.empty() && hosts[r] != hosts[0]) {
      problem = fmt::format("ranks 0 and {} run on different hosts", r);
    }
  }
  if (problem.empty()) {
    for (int r = 0; r < n && problem.empty(); ++r) {
      if (r == me) continue;
      std::string error;
      out.maps[r] = open_segment(names[r], page_round(out.bytes[r]), error);
      if (!out.maps[r].data()) problem = fmt::format("rank {}: {}", me, error);
    }
  }
  const std::vector<std::string> verdicts = comm.allgather_blobs(problem);
  if (!mine.name.empty()) shm_unlink(mine.name.c_str());
  for (int r = 0; r < n && problem.empty(); ++r) problem = verdicts[r];
  out.maps[me] = std::move(mine.map);
  if (problem.empty() && n > 1) {
    out.direct = true;
  } else {
    out.why_not = n > 1 ? problem : "a communicator of one rank";
    for (int r = 0; r < n; ++r) {
      if (r != me) out.maps[r] = Mapping();
    }
  }
  return out;
}

}  // namespace

std::shared_ptr<detail::SharedAllocation> allocate(CommunicatorImpl& comm, size_t bytes) {
  std::lock_guard<std::mutex> lk(comm.shared_mu);
  if (!comm.shared) {
    auto windows = std::make_shared<Windows>(comm.rank, comm.size);
    Exchanged ctl = exchange_segments(comm, sizeof(Control), Descriptor::kNoWindow);
    if (ctl.direct) {
      for (int r = 0; r < comm.size; ++r) new (ctl.maps[r].data()) Control();
      windows->set_controls(std::move(ctl.maps));
    } else if (comm.rank == 0) {
      log().info("allocate_shared on communicator {}: no direct path ({}); collectives on "
                 "shared buffers go through the transport", comm.name, ctl.why_not);
    }
    comm.shared = windows;
  }
  auto alloc = std::make_shared<detail::SharedAllocation>();
  alloc->bytes = bytes;
  const uint32_t id = comm.shared->next_id();
  Exchanged seg = exchange_segments(comm, bytes, id);
  alloc->data = seg.maps[comm.rank].data();
  if (seg.direct && comm.shared->active()) {
    alloc->owner = comm.shared;
    alloc->id = id;
    alloc->direct = true;
    comm.shared->add(id, std::move(seg.maps), std::move(seg.bytes));
  } else {
    alloc->own = std::move(seg.maps[comm.rank]);
  }
  return alloc;
}

}  // namespace shared

detail::SharedAllocation::~SharedAllocation() {
  if (owner) owner->release(id);
}

SharedBuffer::SharedBuffer(std::shared_ptr<detail::SharedAllocation> allocation)
    : allocation_(std::move(allocation)),
      data_(allocation_ ? allocation_->data : nullptr),
      size_(allocation_ ? allocation_->bytes : 0) {}

SharedBuffer::~SharedBuffer() = default;

bool SharedBuffer::direct() const { return allocation_ && allocation_->direct; }

}  // namespace gradwire
