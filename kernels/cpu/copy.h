// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// A memcpy for the collectives' bulk copies (Note [copying without rep movsb]
// in kernels/cpu/copy.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace gradwire::kernels {

// copy() above 16 bytes.
void copy_bulk(void* dst, const void* src, size_t bytes);

namespace detail {
// The first and the last sizeof(T) bytes, both loaded before either store
// (for sizeof(T) <= bytes <= 2 * sizeof(T) they cover every byte).
template <class T>
inline void copy_ends(unsigned char* d, const unsigned char* s, size_t bytes) {
  T head, tail;
  std::memcpy(&head, s, sizeof(T));
  std::memcpy(&tail, s + bytes - sizeof(T), sizeof(T));
  std::memcpy(d, &head, sizeof(T));
  std::memcpy(d + bytes - sizeof(T), &tail, sizeof(T));
}
}  // namespace detail

// memcpy(dst, src, bytes): same contract (no overlap), the same bytes. Up
// to 16 bytes (a small collective's payload, Note [one line per message]
// in memory/shared_windows.h) inline: two fixed-size moves that may
// overlap, instead of a call through the PLT into memcpy's dispatch.
inline void copy(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  if (bytes > 16) {
    copy_bulk(dst, src, bytes);
  } else if (bytes >= 8) {
    detail::copy_ends<uint64_t>(d, s, bytes);
  } else if (bytes >= 4) {
    detail::copy_ends<uint32_t>(d, s, bytes);
  } else if (bytes > 0) {
    const unsigned char first = s[0], middle = s[bytes / 2], last = s[bytes - 1];
    d[0] = first;
    d[bytes / 2] = middle;
    d[bytes - 1] = last;
  }
}
// copy_for_peers() from 2 KiB.
void copy_for_peers_bulk(void* dst, const void* src, size_t bytes);

// copy(dst, src, bytes) into memory that another process reads next and
// may hold in its cache: a staging area or slot, a peer's shared buffer
// (Note [stores into lines a peer reads] in kernels/cpu/copy.cpp). Below
// 2 KiB it is copy(), inline: a small collective's payload pays no call.
inline void copy_for_peers(void* dst, const void* src, size_t bytes) {
  if (bytes >= 2048) copy_for_peers_bulk(dst, src, bytes);
  else copy(dst, src, bytes);
}

}  // namespace gradwire::kernels
