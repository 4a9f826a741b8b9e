// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "shm/windows.h"

#include <sys/file.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <sstream>

#include "base/fd.h"
#include "base/raise.h"
#include "base/shm_reclaim.h"
#include "base/logging.h"
#include "gradwire/shared_buffer.h"

namespace gradwire {

namespace shm {

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

size_t page_round(size_t bytes) {
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  return std::max(page, (bytes + page - 1) / page * page);
}

namespace {

std::string unique_name(uint32_t id) {
  std::random_device rd;
  return fmt::format("/gw_{}_{:08x}{:08x}_{}", getpid(), rd(), rd(), id);
}

}  // namespace

Created create_segment(size_t bytes, uint32_t id) {
  Created c;
  const size_t length = page_round(bytes);
  shm::reclaim_once();  // Note [reclaiming dead regions]
  c.name = unique_name(id);
  int fd = shm_open(c.name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  int err = fd < 0 ? errno : 0;
  if (fd >= 0 && ftruncate(fd, off_t(length)) != 0) err = errno;
  // Note [segments are backed when made]: reserve every page now. A sized
  // but unbacked tmpfs file maps fine, and the first store to a page that a
  // full /dev/shm cannot back kills the process with SIGBUS, in the middle
  // of a collective (Docker's default /dev/shm is 64 MiB, and DataLoader
  // workers use it too). Refused here, the communicator logs why and goes
  // through the transport; allocate_shared returns private memory.
  if (fd >= 0 && err == 0) err = posix_fallocate(fd, 0, off_t(length));
  if (fd >= 0 && err == 0) {
    // Note [segments are mapped when made]: MAP_POPULATE.
    void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p != MAP_FAILED) c.map = Mapping(static_cast<std::byte*>(p), length);
    else err = errno;
  }
  if (c.map.data()) {
    // The name lives until the exchange unlinks it; the lock says, meanwhile,
    // that its owner is alive.
    flock(fd, LOCK_SH | LOCK_NB);
    c.lock.reset(fd);
    return c;
  }
  if (fd >= 0) close(fd);
  c.error = fmt::format("creating {} of {} bytes: {}", c.name, length, errno_text(err));
  if (fd >= 0) shm_unlink(c.name.c_str());
  c.name.clear();
  // Private memory instead, so the caller still gets a buffer.
  void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    raise(ErrorCode::InvalidArgument, "allocate_shared: cannot allocate {} bytes: {}", length,
          errno_text(errno));
  }
  c.map = Mapping(static_cast<std::byte*>(p), length);
  return c;
}

Mapping open_segment(const std::string& name, size_t length, std::string& error) {
  int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    error = fmt::format("opening {}: {}", name, errno_text(errno));
    return {};
  }
  // Note [segments are mapped when made]: backing a page (above) does not
  // put it in this process's page table; the first touch of each page of
  // a segment was a minor fault, about 0.7 us here. A staging half of
  // copy rounds is 1 MiB, 256 pages on each side, so the first few dozen
  // calls of a size paid for them: a 128 KiB allgather at 2 ranks ran 26
  // us a call for its first 14 calls and 3.5 us after (issue 18; a 30-call
  // benchmark saw only the slow ones). MAP_POPULATE maps every page once,
  // when the segment is made or opened: a few milliseconds per
  // communicator, paid at creation instead of inside collectives.
  void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  const int err = errno;
  close(fd);
  if (p == MAP_FAILED) {
    error = fmt::format("mapping {}: {}", name, errno_text(err));
    return {};
  }
  return Mapping(static_cast<std::byte*>(p), length);
}

}  // namespace shm

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
