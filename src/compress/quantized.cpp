// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The quantized collectives (include/gradwire/quantized.h): reduce-scatter
// and allgather as blockwise int8 (Note [blockwise int8] in
// kernels/quantize_math.h), in the layout of Note [quantized collective
// layout] (src/collectives/quantized_layout.h), whose element passes they
// share with the sharded engine (Note [quantized exchange below both
// users]).
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

#include "base/raise.h"
#include "base/state_io.h"
#include "collectives/quantized_layout.h"
#include "gradwire/quantized.h"
#include "kernels/cpu/quantize.h"

namespace gradwire {
namespace {

std::string dtype_name(uint64_t v) {
  if (v < std::size(kAllDataTypes)) return std::string(to_string(DataType(v)));
  return fmt::format("DataType({})", v);
}

bool quantizable(uint64_t v) {
  return v < std::size(kAllDataTypes) && collectives::quantizable(DataType(v));
}

using Plan = collectives::QuantizedLayout;

// Every rank allgathers what it was asked for and checks every rank's
// values, so a bad or differing option raises the same error on every rank
// instead of a hang or garbage in the exchange (as Note [one plan on every
// rank] does for the sharded engine).
Plan agree_plan(Communicator& comm, const char* who, size_t count, DataType dtype,
                const QuantizedOptions& options) {
  const size_t world = size_t(comm.size()), rank = size_t(comm.rank());
  const uint64_t mine[4] = {count, uint64_t(dtype), options.block_size,
                            options.error_feedback ? 1u : 0u};
  std::vector<uint64_t> all(4 * world);
  try {
    comm.allgather(mine, all.data(), all.size(), DataType::Int64).wait();
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("rank {}: {}: comparing the ranks' options failed: {}", rank,
                                      who, e.message()));
  }
  auto ranks_where = [&](auto&& bad) {
    std::vector<size_t> out;
    for (size_t r = 0; r < world; ++r) {
      if (bad(all.data() + 4 * r)) out.push_back(r);
    }
    return out;
  };
  if (auto bad = ranks_where([](const uint64_t* v) { return !quantizable(v[1]); }); !bad.empty()) {
    raise(ErrorCode::InvalidArgument,
          "rank {}: {}: dtype {} (rank(s) {}) cannot be quantized; the int8 quantizer takes "
          "float32, float16 or bfloat16",
          rank, who, dtype_name(all[4 * bad[0] + 1]), fmt::join(bad, ", "));
  }
  if (auto bad = ranks_where([](const uint64_t* v) {
        return v[2] == 0 || v[2] > kernels::kMaxQuantBlock;
      });
      !bad.empty()) {
    raise(ErrorCode::InvalidArgument,
          "rank {}: {}: QuantizedOptions::block_size {} (rank(s) {}) is out of range; it is the "
          "number of elements per scale, 1 .. {}",
          rank, who, all[4 * bad[0] + 2], fmt::join(bad, ", "), kernels::kMaxQuantBlock);
  }
  static constexpr const char* kWhat[4] = {"count", "dtype", "QuantizedOptions::block_size",
                                           "QuantizedOptions::error_feedback"};
  for (size_t k = 0; k < 4; ++k) {
    auto bad = ranks_where([&](const uint64_t* v) { return v[k] != all[k]; });
    if (bad.empty()) continue;
    auto show = [&](uint64_t v) { return k == 1 ? dtype_name(v) : fmt::format("{}", v); };
    raise(ErrorCode::Mismatch,
          "rank {}: {}: rank(s) {} passed {} {}, rank 0 passed {}; every rank must build the "
          "quantized collective with the same count, dtype and options",
          rank, who, fmt::join(bad, ", "), kWhat[k], show(all[4 * bad[0] + k]), show(all[k]));
  }
  return Plan::make(world, rank, count, options.block_size, dtype);
}

}  // namespace

// ---------------------------------------------------------------- reduce-scatter

class __attribute__((visibility("hidden"))) QuantizedReduceScatter::Impl {
 public:
  Impl(Communicator& comm, size_t count, DataType dtype, QuantizedOptions options)
      : comm_(comm), options_(options),
        plan_(agree_plan(comm, "QuantizedReduceScatter", count, dtype, options)) {
    send_.assign(plan_.segment * plan_.world, std::byte{0});
    recv_.assign(plan_.segment * plan_.world, std::byte{0});
    acc_.assign(plan_.shard(plan_.rank), 0.0f);
    if (options_.error_feedback) error_.assign(count, 0.0f);
  }

  void run(const void* send, void* recv, ReduceOp op) {
    if (op != ReduceOp::Sum && op != ReduceOp::Avg) {
      raise(ErrorCode::InvalidArgument,
            "rank {}: QuantizedReduceScatter::run: op {} is not supported; the quantized "
            "reduce-scatter sums (Sum) or averages (Avg)",
            plan_.rank, to_string(op));
    }
    if (plan_.count == 0) return;
    collectives::quantize_shards(plan_, send, error_.empty() ? nullptr : error_.data(),
                                 send_.data());
    comm_.alltoall(send_.data(), recv_.data(), plan_.segment, DataType::UInt8).wait();
    const float factor = op == ReduceOp::Avg ? 1.0f / float(plan_.world) : 1.0f;
    collectives::reduce_segments(plan_, recv_.data(), acc_.data(), factor, recv);
  }

  std::string save() const {
    compress::StateWriter w("QuantizedReduceScatter");
    w.u64("world", plan_.world);
    w.u64("count", plan_.count);
    w.u64("block_size", plan_.block);
    w.u64("error_feedback", options_.error_feedback);
    w.floats("error", error_);
    return w.finish();
  }

  void load(std::string_view state) {
    compress::StateReader r(state, "QuantizedReduceScatter",
                            fmt::format("rank {}: QuantizedReduceScatter::load_state", plan_.rank));
    const uint64_t world = r.u64("world"), count = r.u64("count"), block = r.u64("block_size"),
                   ef = r.u64("error_feedback");
    if (world != plan_.world || count != plan_.count || block != plan_.block ||
        ef != uint64_t(options_.error_feedback)) {
      raise(ErrorCode::InvalidArgument,
            "rank {}: QuantizedReduceScatter::load_state: the state is for {} elements on {} "
            "ranks, block_size {}, error_feedback {}; this object has {} elements on {} ranks, "
            "block_size {}, error_feedback {}",
            plan_.rank, count, world, block, ef, plan_.count, plan_.world, plan_.block,
            options_.error_feedback);
    }
    auto error = r.floats("error", error_.size());
    r.done();
    error_ = std::move(error);
  }

  Communicator& comm_;
  const QuantizedOptions options_;
  const Plan plan_;
  std::vector<std::byte> send_, recv_;
  std::vector<float> acc_, error_;
};

QuantizedReduceScatter::QuantizedReduceScatter(Communicator& comm, size_t count, DataType dtype,
                                               QuantizedOptions options)
    : impl_(std::make_unique<Impl>(comm, count, dtype, options)) {}
QuantizedReduceScatter::~QuantizedReduceScatter() = default;
QuantizedReduceScatter::QuantizedReduceScatter(QuantizedReduceScatter&&) noexcept = default;
QuantizedReduceScatter& QuantizedReduceScatter::operator=(QuantizedReduceScatter&&) noexcept =
    default;
void QuantizedReduceScatter::run(const void* send, void* recv, ReduceOp op) {
  impl_->run(send, recv, op);
}
size_t QuantizedReduceScatter::count() const { return impl_->plan_.count; }
DataType QuantizedReduceScatter::dtype() const { return impl_->plan_.dtype; }
const QuantizedOptions& QuantizedReduceScatter::options() const { return impl_->options_; }
size_t QuantizedReduceScatter::wire_bytes() const {
  return impl_->plan_.count == 0 ? 0 : (impl_->plan_.world - 1) * impl_->plan_.segment;
}
const std::vector<float>& QuantizedReduceScatter::error() const { return impl_->error_; }
void QuantizedReduceScatter::reset_error_feedback() {
  std::fill(impl_->error_.begin(), impl_->error_.end(), 0.0f);
}
std::string QuantizedReduceScatter::save_state() const { return impl_->save(); }
void QuantizedReduceScatter::load_state(std::string_view state) { impl_->load(state); }

// ---------------------------------------------------------------- allgather

class __attribute__((visibility("hidden"))) QuantizedAllgather::Impl {
 public:
  Impl(Communicator& comm, size_t count, DataType dtype, QuantizedOptions options)
      : comm_(comm), options_(options),
        plan_(agree_plan(comm, "QuantizedAllgather", count, dtype, options)) {
    wire_.assign(plan_.segment * plan_.world, std::byte{0});
  }

  void run(const void* send, void* recv) {
    if (plan_.count == 0) return;
    const size_t me = plan_.rank;
    kernels::quantize_int8_blocks(send, plan_.type, plan_.shard(me), plan_.block, nullptr,
                                  plan_.scales(wire_.data(), me), plan_.values(wire_.data(), me));
    // In place: our segment is already where the allgather puts it.
    comm_.allgather(wire_.data() + me * plan_.segment, wire_.data(),
                    plan_.segment * plan_.world, DataType::UInt8)
        .wait();
    auto* dst = static_cast<std::byte*>(recv);
    for (size_t r = 0; r < plan_.world; ++r) {  // our own shard too: the same bytes everywhere
      kernels::dequantize_int8_blocks(plan_.values(wire_.data(), r), plan_.scales(wire_.data(), r),
                                      plan_.shard(r), plan_.block, plan_.type,
                                      dst + plan_.offset(r) * plan_.element);
    }
  }

  Communicator& comm_;
  const QuantizedOptions options_;
  const Plan plan_;
  std::vector<std::byte> wire_;
};

QuantizedAllgather::QuantizedAllgather(Communicator& comm, size_t count, DataType dtype,
                                       QuantizedOptions options)
    : impl_(std::make_unique<Impl>(comm, count, dtype, options)) {}
QuantizedAllgather::~QuantizedAllgather() = default;
QuantizedAllgather::QuantizedAllgather(QuantizedAllgather&&) noexcept = default;
QuantizedAllgather& QuantizedAllgather::operator=(QuantizedAllgather&&) noexcept = default;
void QuantizedAllgather::run(const void* send, void* recv) { impl_->run(send, recv); }
size_t QuantizedAllgather::count() const { return impl_->plan_.count; }
DataType QuantizedAllgather::dtype() const { return impl_->plan_.dtype; }
const QuantizedOptions& QuantizedAllgather::options() const { return impl_->options_; }
size_t QuantizedAllgather::wire_bytes() const {
  return impl_->plan_.count == 0 ? 0 : (impl_->plan_.world - 1) * impl_->plan_.segment;
}

}  // namespace gradwire
