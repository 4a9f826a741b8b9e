// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The parameters' side of the engine: where they live, their allgather
// after a step (stages 1 and 2), and stage 3's units (Note [units]).
#include <algorithm>
#include <cstring>

#include "base/raise.h"
#include "sharded/engine_impl.h"

namespace gradwire {

std::byte* ShardedEngine::Impl::own_params(size_t b) {
  Bucket& bk = *buckets_[b];
  if (options_.stage == 3) return bk.params.get();
  if (!bk.params.get()) return nullptr;
  return bk.params.get() + bk.shard_offset * element_size(bk.dtype);
}

// ---------------------------------------------------------------- stages 1, 2

// The updated shards go out Bucket by Bucket, the last Bucket first:
// Buckets are planned in backward order, so the last one holds the
// parameters the next forward pass reads first, and forward can wait for
// each Bucket as it reaches it (wait_parameter) instead of for all.
void ShardedEngine::Impl::start_exchange() {
  for (size_t b = buckets_.size(); b-- > 0;) {
    Bucket& bk = *buckets_[b];
    const ShardedBucket& pb = *bk.planned;
    if (pb.padded == 0 || world_ == 1) continue;
    try {
      bk.exchange = comm_.allgather(own_params(b), bk.params.get(), pb.padded, bk.dtype);
    } catch (const Error& e) {
      wait_exchanges_quietly();
      throw Error(e.code(), fmt::format("{}: starting the allgather of {} failed: {}", where(),
                                        describe_bucket(b), e.message()));
    }
  }
}

void ShardedEngine::Impl::wait_exchanges_quietly() {
  for (auto& b : buckets_) {
    if (!b->exchange.valid()) continue;
    try {
      b->exchange.wait();
    } catch (const std::exception&) {
    }
    b->exchange = Work();
  }
}

void ShardedEngine::Impl::wait_bucket(size_t b) {
  if (b >= buckets_.size()) {
    raise(ErrorCode::InvalidArgument, "{}: wait_bucket({}) but there are {} Buckets", where(), b,
          buckets_.size());
  }
  Bucket& bk = *buckets_[b];
  if (!bk.exchange.valid()) return;
  Work w = std::move(bk.exchange);
  bk.exchange = Work();
  try {
    w.wait();
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: the parameters' allgather of {} failed: {}", where(),
                                      describe_bucket(b), e.message()));
  }
}

void ShardedEngine::Impl::wait_parameters() {
  if (options_.stage == 3) {
    for (size_t u = 0; u < units_.size(); ++u) {
      if (units_[u].state == UnitState::InFlight) gather(u);
    }
    return;
  }
  for (size_t b = buckets_.size(); b-- > 0;) wait_bucket(b);
}

void* ShardedEngine::Impl::parameter(size_t i) {
  check_index(i, "parameter");
  const auto& loc = plan_.location[i];
  Bucket& bk = *buckets_[loc.bucket];
  const size_t es = element_size(bk.dtype);
  if (options_.stage < 3) return bk.params.get() ? bk.params.get() + loc.offset * es : nullptr;
  const size_t u = params_[i].unit;
  if (units_[u].state != UnitState::Gathered) {
    raise(ErrorCode::InvalidArgument, "{}: parameter {} of unit {} used while the unit is {}: in "
          "stage 3 parameters rest as shards; call gather({}) before the unit's forward and "
          "backward, release({}) after", where(), name_of(i), u,
          units_[u].state == UnitState::InFlight ? "prefetched but not yet gathered"
                                                 : "not gathered",
          u, u);
  }
  return bk.gathered.get() ? bk.gathered.get() + loc.offset * es : nullptr;
}

void* ShardedEngine::Impl::wait_parameter(size_t i) {
  check_index(i, "wait_parameter");
  if (options_.stage < 3) {
    wait_bucket(plan_.location[i].bucket);
  } else if (units_[params_[i].unit].state == UnitState::InFlight) {
    gather(params_[i].unit);
  }
  return parameter(i);
}

// ---------------------------------------------------------------- stage 3

// Note [units]: in stage 3 a unit's Buckets rest as this rank's shards.
// prefetch() allocates each full Bucket, puts the shard in its place and
// starts an in-place allgather; gather() waits for them; release() frees
// them. A unit's states: Released -> (prefetch) InFlight -> (gather)
// Gathered -> (release) Released. parameter() of a unit that is not
// Gathered is an InvalidArgument rather than a pointer to freed or
// half-written memory. Every rank must gather and release the same units
// in the same order (the allgathers pair up by order, like every
// collective). An optimizer step makes gathered copies stale, so
// end_step() releases every unit.
void ShardedEngine::Impl::note_gathered(ptrdiff_t bytes) {
  gathered_bytes_ = size_t(ptrdiff_t(gathered_bytes_) + bytes);
  peak_gathered_ = std::max(peak_gathered_, gathered_bytes_);
}

bool ShardedEngine::Impl::gathered(size_t unit) const {
  return unit < units_.size() && units_[unit].state == UnitState::Gathered;
}

void ShardedEngine::Impl::prefetch(size_t u) {
  if (options_.stage != 3) {
    raise(ErrorCode::InvalidArgument, "{}: prefetch/gather/release are for stage 3 (the "
          "parameters are whole in stage {})", where(), options_.stage);
  }
  if (u >= units_.size()) {
    raise(ErrorCode::InvalidArgument, "{}: unit {} but there are {} units", where(), u,
          units_.size());
  }
  if (units_[u].state != UnitState::Released) return;
  units_[u].state = UnitState::InFlight;
  for (size_t b : plan_.units[u]) {
    Bucket& bk = *buckets_[b];
    const ShardedBucket& pb = *bk.planned;
    const size_t es = element_size(bk.dtype);
    bk.gathered = HostBuffer(pb.padded * es);
    note_gathered(ptrdiff_t(bk.gathered.bytes));
    if (pb.padded == 0) continue;
    try {
      if (compressing_parameters()) {  // Note [compressed parameter allgather]
        bk.exchange = gather_compressed(b);
        continue;
      }
      std::byte* mine = bk.gathered.get() + bk.shard_offset * es;
      std::memcpy(mine, bk.params.get(), pb.shard * es);
      if (world_ == 1) continue;
      bk.exchange = comm_.allgather(mine, bk.gathered.get(), pb.padded, bk.dtype);
    } catch (const Error& e) {
      release(u);
      throw Error(e.code(), fmt::format("{}: gathering unit {} ({}) failed: {}", where(), u,
                                        describe_bucket(b), e.message()));
    }
  }
}

void ShardedEngine::Impl::gather(size_t u) {
  prefetch(u);
  if (units_[u].state == UnitState::Gathered) return;
  for (size_t b : plan_.units[u]) {
    Bucket& bk = *buckets_[b];
    if (!bk.exchange.valid()) continue;
    try {
      bk.exchange.wait();
    } catch (const Error& e) {
      release(u);
      throw Error(e.code(), fmt::format("{}: gathering unit {} ({}) failed: {}", where(), u,
                                        describe_bucket(b), e.message()));
    }
    bk.exchange = Work();
  }
  units_[u].state = UnitState::Gathered;
}

void ShardedEngine::Impl::release(size_t u) {
  if (options_.stage != 3 || u >= units_.size()) prefetch(u);  // raises the same errors
  if (units_[u].state == UnitState::Released) return;
  for (size_t b : plan_.units[u]) {
    Bucket& bk = *buckets_[b];
    if (bk.exchange.valid()) {
      try {
        bk.exchange.wait();  // the allgather writes into the buffer we free
      } catch (const std::exception&) {
      }
      bk.exchange = Work();
    }
    note_gathered(-ptrdiff_t(bk.gathered.bytes));
    bk.gathered = HostBuffer();
    bk.param_wire = HostBuffer();
  }
  units_[u].state = UnitState::Released;
}

void ShardedEngine::Impl::release_all_units() {
  for (size_t u = 0; u < units_.size(); ++u) release(u);
}

}  // namespace gradwire
