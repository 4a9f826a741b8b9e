// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "sharded/agree.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/ranges.h>

#include "base/raise.h"

namespace gradwire::sharded {

namespace {

// [code + 1, or 0 for success][message, NUL-padded].
constexpr size_t kRecordBytes = 512;

}  // namespace

void agree(Communicator& comm, const Outcome& mine, std::string_view phase) {
  std::vector<char> record(kRecordBytes, '\0');
  record[0] = char(mine.code + 1);
  std::memcpy(record.data() + 1, mine.message.data(),
              std::min(mine.message.size(), kRecordBytes - 2));
  std::vector<char> all(kRecordBytes * size_t(comm.size()));
  comm.allgather(record.data(), all.data(), all.size(), DataType::UInt8).wait();
  std::vector<int> failed;
  int code = -1;
  std::string first;
  for (int r = 0; r < comm.size(); ++r) {
    const char* p = all.data() + size_t(r) * kRecordBytes;
    if (p[0] == 0) continue;
    if (failed.empty()) {
      code = int(uint8_t(p[0])) - 1;
      first.assign(p + 1, strnlen(p + 1, kRecordBytes - 1));
    }
    failed.push_back(r);
  }
  if (failed.empty()) return;
  const ErrorCode ec = code <= int(ErrorCode::Unauthenticated) ? ErrorCode(code) : ErrorCode::Internal;
  raise(ec, "rank {}: {} failed on rank(s) {}; rank {}: {}", comm.rank(), phase,
        fmt::join(failed, ", "), failed[0], first);
}

}  // namespace gradwire::sharded
