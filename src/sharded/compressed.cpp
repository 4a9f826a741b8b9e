// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The sharded engine's compressed gradient reduce-scatter
// (ShardedOptions::gradient_compression): its options' agreement, its
// buffers and the Bucket's reduction as one composite operation.
//
// Note [compressed gradient reduce-scatter]: a Bucket's plain reduction is
// an asynchronous reduce_scatter (stage 1: allreduce) launched when the
// Bucket completes, overlapped with the rest of backward. Its compressed
// form is three steps: quantize every shard of this rank's contribution
// (with its error feedback), exchange the int8 segments (one alltoall),
// and sum the received segments of this rank's shard in rank order (Note
// [quantized collective layout] in collectives/quantized_layout.h; stage
// 1 then allgathers the reduced shards, exactly, so that gradient(i) holds
// the whole average as in the plain path). The three run as one composite
// operation (Communicator::compose, Note [composite operations]) queued
// where the plain collective would be:
//  * it is an ordinary Work in this communicator's order, so everything
//    built on the plain path holds unchanged: the pool buffer goes back in
//    its then() (Note [bounded gradient buffers]), finalize() waits for it
//    and reports its failure with the Bucket, and every rank queues the
//    same operations in the same order;
//  * the element work runs on the engine thread, not on the autograd
//    thread that completed the Bucket, so backward goes on computing while
//    the Bucket is quantized, exchanged and summed;
//  * stage 1's allgather comes right after the sum inside the same
//    operation: queued separately from a completion callback, its place
//    in the order would depend on timing, differently on each rank.
// Not the public QuantizedReduceScatter: its run() is synchronous and owns
// its buffers, and it lives in the compress layer, above this one; the
// layout and the element passes are shared instead (Note [quantized
// exchange below both users]), so a shard is bit for bit what that class
// computes from the same inputs and error buffers. Each shard is reduced
// by its owner alone and reaches the other ranks only as the parameters'
// exact allgather (or, stage 1, the gradients' exact allgather), so every
// rank holds the same bits.
//
// The gradients are copied into the Bucket divided by the world size
// (mark_ready), so the quantized values are the averaged contributions and
// the reduction sums them (factor 1), as the plain path does.
//
// Memory: stages 2 and 3 put the send and receive wire buffers of a
// Bucket behind its gradients in the pool buffer (counted in
// bucket_buffers, freed with it); stage 1 keeps one pair per Bucket. The
// error-feedback buffer is per rank and per Bucket and covers the whole
// padded Bucket, because each rank's error is that of its own contribution
// to every shard: 4 bytes per parameter element on every rank, whatever
// the stage (memory().compression). state() saves it (with a fingerprint
// of the layout it belongs to: the plan, the world size and the
// compression options), and load_state() restores it from the source
// written by this same rank under the same layout, so a run resumed at the
// same world size continues bit for bit. It is not a shard of anything, so
// it does not re-shard: at another world size, another plan or block size,
// from a full state or a state without it, load_state() starts it at zero,
// and the first step after the load sends its gradient without the
// previous step's residual (at most half a quantization step per element):
// close to, not bit for bit, the uninterrupted run. The step counter
// start_step is compared with is optimizer_steps(), which state() saves,
// so a resumed run warms up exactly as far as the original did.
#include <algorithm>
#include <cstring>

#include <fmt/ranges.h>

#include "base/logging.h"
#include "base/raise.h"
#include "kernels/cpu/quantize.h"
#include "sharded/engine_impl.h"
#include "sharded/plan_internal.h"

namespace gradwire {

namespace {

constexpr size_t kKindField = 0, kBlockField = 1;

std::string kind_name(uint64_t kind) {
  switch (kind) {
    case uint64_t(GradientCompression::None): return "none";
    case uint64_t(GradientCompression::Int8): return "int8";
    default: return fmt::format("GradientCompression({})", kind);
  }
}

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// One option struct's fields as every rank sent them (check_agreement's
// allgather): rank r's field k is all[stride * r + first + k].
struct AgreedFields {
  const std::vector<uint64_t>& all;
  size_t stride, first;
  int world;
  uint64_t value(int r, size_t k) const { return all[stride * size_t(r) + first + k]; }
  template <class Bad>
  std::vector<int> ranks_where(Bad&& bad) const {
    std::vector<int> out;
    for (int r = 0; r < world; ++r) {
      if (bad(all.data() + stride * size_t(r) + first)) out.push_back(r);
    }
    return out;
  }
};

// Both compressions' block size: elements per float32 scale, where on.
void check_block_size(const AgreedFields& f, const std::string& who, const char* option) {
  auto bad = f.ranks_where([](const uint64_t* v) {
    return v[kKindField] != 0 && (v[kBlockField] == 0 || v[kBlockField] > kernels::kMaxQuantBlock);
  });
  if (bad.empty()) return;
  raise(ErrorCode::InvalidArgument, "{}: ShardedOptions::{}.block_size {} (rank(s) {}) is out of "
        "range; it is the number of elements per float32 scale, 1 .. {}", who, option,
        f.value(bad[0], kBlockField), fmt::join(bad, ", "), kernels::kMaxQuantBlock);
}

// Every field alike on every rank (fields[k] names field k), once any rank
// compresses: options that only describe compression matter only then.
template <class KindName>
void check_same_everywhere(const AgreedFields& f, const std::string& who, const char* option,
                           std::initializer_list<const char*> fields, KindName&& kind_name) {
  if (f.ranks_where([](const uint64_t* v) { return v[kKindField] != 0; }).empty()) return;
  size_t k = 0;
  for (const char* field : fields) {
    const uint64_t ref = f.value(0, k);
    auto bad = f.ranks_where([&](const uint64_t* v) { return v[k] != ref; });
    if (!bad.empty()) {
      auto show = [&](uint64_t v) { return k == kKindField ? kind_name(v) : fmt::format("{}", v); };
      raise(ErrorCode::Mismatch, "{}: rank(s) {} passed ShardedOptions::{}.{} {}, rank 0 passed "
            "{}; every rank must build the engine with the same options", who,
            fmt::join(bad, ", "), option, field, show(f.value(bad[0], k)), show(ref));
    }
    ++k;
  }
}

}  // namespace

// all: every rank's `stride` values; the compression options are at
// [first, first + 4): kind, block_size, error_feedback, start_step.
void ShardedEngine::Impl::check_compression(const std::vector<uint64_t>& all, size_t stride,
                                            size_t first) const {
  const std::string who = fmt::format("rank {}: ShardedEngine", rank_);
  const AgreedFields f{all, stride, first, world_};
  if (auto bad = f.ranks_where([](const uint64_t* v) {
        return v[kKindField] > uint64_t(GradientCompression::Int8);
      });
      !bad.empty()) {
    raise(ErrorCode::InvalidArgument, "{}: ShardedOptions::gradient_compression.kind {} (rank(s) "
          "{}) is not a GradientCompression (none, int8)", who,
          kind_name(f.value(bad[0], kKindField)), fmt::join(bad, ", "));
  }
  check_block_size(f, who, "gradient_compression");
  if (options_.gradient_compression.kind != GradientCompression::None) {
    // Called before allocate(): the plan says what each Bucket reduces in.
    for (const ShardedBucket& pb : plan_.buckets) {
      const DataType rdtype = options_.reduce_dtype.value_or(pb.dtype);
      if (collectives::quantizable(rdtype)) continue;
      raise(ErrorCode::InvalidArgument, "{}: ShardedOptions::gradient_compression.kind int8 "
            "cannot reduce {} gradients (reduce_dtype); the int8 quantizer takes float32, float16 "
            "or bfloat16", who, to_string(rdtype));
    }
  }
  check_same_everywhere(f, who, "gradient_compression",
                        {"kind", "block_size", "error_feedback", "start_step"}, kind_name);
}

void ShardedEngine::Impl::allocate_compression(size_t max_shard) {
  const ParameterCompressionOptions& pc = options_.parameter_compression;
  if (pc.kind != ParameterCompression::None) {  // stage 3 (check_parameter_compression)
    for (auto& bk : buckets_) {
      bk->param_quant = collectives::QuantizedLayout::make(
          size_t(world_), size_t(rank_), bk->planned->padded, pc.block_size, bk->dtype);
    }
  }
  const GradientCompressionOptions& gc = options_.gradient_compression;
  if (gc.kind == GradientCompression::None) return;
  size_t max_wire = 0;
  for (auto& bk : buckets_) {
    const ShardedBucket& pb = *bk->planned;
    bk->quant = collectives::QuantizedLayout::make(size_t(world_), size_t(rank_), pb.padded,
                                                   gc.block_size, bk->rdtype);
    if (gc.error_feedback) bk->error.assign(pb.padded, 0.0f);
    if (options_.stage == 1 && pb.padded) bk->wire = HostBuffer(2 * bk->quant.wire_bytes());
    max_wire = std::max(max_wire, bk->quant.wire_bytes());
  }
  quant_acc_.assign(max_shard, 0.0f);
  if (options_.stage != 1) {
    wire_at_ = round_up(pool_buffer_bytes_, 64);
    wire_bytes_ = round_up(max_wire, 64);
    pool_buffer_bytes_ = wire_at_ + 2 * wire_bytes_;
  }
}

bool ShardedEngine::Impl::compressing() const {
  const GradientCompressionOptions& gc = options_.gradient_compression;
  return gc.kind != GradientCompression::None && steps_ >= gc.start_step;
}

Work ShardedEngine::Impl::launch_compressed(size_t b, std::byte* full) {
  Bucket& bk = *buckets_[b];
  const bool stage1 = options_.stage == 1;
  std::byte* send = stage1 ? bk.wire.get() : full + wire_at_;
  std::byte* recv = send + (stage1 ? bk.quant.wire_bytes() : wire_bytes_);
  return comm_.compose(
      "compressed reduce-scatter", describe_bucket(b),
      [this, &bk, full, send, recv, stage1](CompositeSteps& steps) {
        const collectives::QuantizedLayout& l = bk.quant;
        collectives::quantize_shards(l, full, bk.error.empty() ? nullptr : bk.error.data(), send);
        // The bytes after each segment's values: a pool buffer held
        // another Bucket's layout before (Note [quantized collective
        // layout]: the wire is defined bytes).
        for (size_t j = 0; j < l.world; ++j) {
          const size_t used = l.nbmax * sizeof(float) + l.shard(j);
          std::memset(send + j * l.segment + used, 0, l.segment - used);
        }
        steps.alltoall(send, recv, l.segment, DataType::UInt8);
        std::byte* shard = bk.grads.get();
        if (stage1) shard += bk.shard_offset * element_size(bk.rdtype);
        collectives::reduce_segments(l, recv, quant_acc_.data(), 1.0f, shard);
        if (stage1) steps.allgather(shard, bk.grads.get(), l.count, bk.rdtype);
      });
}

void ShardedEngine::Impl::reset_error_feedback() {
  for (auto& bk : buckets_) std::fill(bk->error.begin(), bk->error.end(), 0.0f);
}

// 0: no error feedback to save.
uint64_t ShardedEngine::Impl::error_feedback_layout() const {
  const GradientCompressionOptions& gc = options_.gradient_compression;
  if (gc.kind == GradientCompression::None || !gc.error_feedback) return 0;
  Fnv1a h;
  h.add(sharded::plan_fingerprint(plan_, options_));  // the world size and Buckets too
  h.add(uint64_t(gc.kind));
  h.add(gc.block_size);
  return std::max<uint64_t>(h.value(), 1);
}

void ShardedEngine::Impl::save_error_feedback(ShardedState& s) const {
  s.error_feedback_layout = error_feedback_layout();
  if (!s.error_feedback_layout) return;
  for (const auto& bk : buckets_) s.error_feedback.push_back(bk->error);
}

void ShardedEngine::Impl::load_error_feedback(const std::vector<const ShardedState*>& sources) {
  reset_error_feedback();
  const uint64_t layout = error_feedback_layout();
  if (!layout) return;
  for (const ShardedState* s : sources) {
    if (s->world != world_ || s->rank != rank_ || s->error_feedback_layout != layout ||
        s->error_feedback.size() != buckets_.size()) {
      continue;
    }
    bool fits = true;
    for (size_t b = 0; b < buckets_.size(); ++b) {
      fits = fits && s->error_feedback[b].size() == buckets_[b]->error.size();
    }
    if (!fits) continue;
    for (size_t b = 0; b < buckets_.size(); ++b) buckets_[b]->error = s->error_feedback[b];
    return;
  }
  log().info("{}: load_state: no error-feedback buffers of this rank under this layout among the "
             "{} states; they start at zero (Note [compressed gradient reduce-scatter])",
             where(), sources.size());
}

size_t ShardedEngine::Impl::compression_bytes() const {
  size_t n = quant_acc_.size() * sizeof(float);
  for (const auto& bk : buckets_) {
    n += bk->error.size() * sizeof(float) + bk->wire.bytes + bk->param_wire.bytes;
  }
  return n;
}

// ---------------------------------------------------------------- parameters

// Note [compressed parameter allgather]: stage 3 gathers a unit's Buckets
// before its forward and again before its backward (Note [units] in
// parameters.cpp); ShardedOptions::parameter_compression sends them as
// int8. Each rank quantizes its shard of the Bucket (its parameters at
// rest, in the parameter dtype) into its own segment of a wire buffer laid
// out as the quantized allgather's (Note [quantized collective layout]),
// the segments are allgathered in place, and every rank dequantizes every
// segment into the gathered Bucket: its own too. That last point is what
// keeps the ranks identical: were the owner to copy its exact shard (as the
// plain gather does), its forward and backward would read other weights
// than the other ranks', and the ranks' models would drift apart. So the
// gathered values are a function of the wire bytes alone, computed by the
// same code on every rank, and QuantizedAllgather would produce the same
// bits from the same shards. The shard is quantized when the gather starts
// (where the plain gather copies it: the value of that moment), and the
// exchange and the dequantization run as one composite operation (Note
// [composite operations]) queued where the plain allgather would be, so a
// prefetch still overlaps with compute and gather() waits for it as
// before; at world size 1 the dequantization runs at once too (the values a
// larger world would compute from the same shard).
//
// There is no error feedback: what is quantized is the weights themselves,
// afresh at every gather, and the fp32 master shard (and the parameters at
// rest that state() saves) stay exact, so the error does not accumulate
// across steps; it is at most half a quantization step (the block's largest
// magnitude / 254) per element of the weights the forward and backward
// read, and the gradients are those of the dequantized weights. Padding
// elements are zeros and dequantize to zeros. The wire buffer is allocated
// with the gathered Bucket and freed with it (memory().compression while it
// exists). Before start_step (compared with optimizer_steps() when the
// gather starts; end_step() releases every unit, so a step's gathers all
// see the same count) the gather is the plain one, bit for bit.
void ShardedEngine::Impl::check_parameter_compression(const std::vector<uint64_t>& all,
                                                      size_t stride, size_t first) const {
  constexpr size_t kStage = 3;
  const std::string who = fmt::format("rank {}: ShardedEngine", rank_);
  const AgreedFields f{all, stride, first, world_};
  auto name = [](uint64_t kind) {
    switch (kind) {
      case uint64_t(ParameterCompression::None): return std::string("none");
      case uint64_t(ParameterCompression::Int8): return std::string("int8");
      default: return fmt::format("ParameterCompression({})", kind);
    }
  };
  if (auto bad = f.ranks_where([](const uint64_t* v) {
        return v[kKindField] > uint64_t(ParameterCompression::Int8);
      });
      !bad.empty()) {
    raise(ErrorCode::InvalidArgument, "{}: ShardedOptions::parameter_compression.kind {} (rank(s) "
          "{}) is not a ParameterCompression (none, int8)", who, name(f.value(bad[0], kKindField)),
          fmt::join(bad, ", "));
  }
  if (auto bad = f.ranks_where([](const uint64_t* v) {
        return v[kKindField] != uint64_t(ParameterCompression::None) && v[kStage] != 3;
      });
      !bad.empty()) {
    raise(ErrorCode::InvalidArgument, "{}: ShardedOptions::parameter_compression.kind int8 at "
          "stage {} (rank(s) {}); it compresses stage 3's parameter gathers, and stages 1 and 2 "
          "allgather the updated parameters once per step, exactly (use stage 3, or "
          "gradient_compression for the gradients)", who, f.value(bad[0], kStage),
          fmt::join(bad, ", "));
  }
  check_block_size(f, who, "parameter_compression");
  check_same_everywhere(f, who, "parameter_compression", {"kind", "block_size", "start_step"},
                        name);
}

bool ShardedEngine::Impl::compressing_parameters() const {
  const ParameterCompressionOptions& pc = options_.parameter_compression;
  return pc.kind != ParameterCompression::None && steps_ >= pc.start_step;
}

Work ShardedEngine::Impl::gather_compressed(size_t b) {
  Bucket& bk = *buckets_[b];
  const collectives::QuantizedLayout& l = bk.param_quant;
  bk.param_wire = HostBuffer(l.wire_bytes());  // zeroed: the unused scales and padding
  // Quantized here, on the calling thread, as the plain gather copies the
  // shard here: the shard as it is now, whatever the optimizer (which
  // writes float32 shards in place) does while the exchange is in flight.
  kernels::quantize_int8_blocks(bk.params.get(), l.type, l.shard(l.rank), l.block, nullptr,
                                l.scales(bk.param_wire.get(), l.rank),
                                l.values(bk.param_wire.get(), l.rank));
  auto run = [&bk, &l](CompositeSteps* steps) {
    std::byte* wire = bk.param_wire.get();
    // In place: this rank's segment is already where the allgather puts it.
    if (steps) steps->allgather(wire + l.rank * l.segment, wire, l.wire_bytes(), DataType::UInt8);
    for (size_t r = 0; r < l.world; ++r) {  // this rank's shard too: the same bytes everywhere
      kernels::dequantize_int8_blocks(l.values(wire, r), l.scales(wire, r), l.shard(r), l.block,
                                      l.type, bk.gathered.get() + l.offset(r) * l.element);
    }
  };
  if (world_ == 1) {
    run(nullptr);
    return Work();
  }
  return comm_.compose("compressed parameter allgather", describe_bucket(b),
                       [run](CompositeSteps& steps) { run(&steps); });
}

}  // namespace gradwire
