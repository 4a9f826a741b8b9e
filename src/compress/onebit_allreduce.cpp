// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The 1-bit compressed allreduce with two-sided error feedback
// (include/gradwire/compress.h).
//
// Note [1-bit layout]: the count elements are cut into size() chunks of
// `chunk` elements (ceil(count / size) rounded up to a multiple of 8, so a
// chunk's signs are whole bytes; the last chunks may be short or empty). A
// block on the wire is [float scale][chunk/8 bytes of signs]: the worker
// compresses straight into its alltoall send blocks (no packing copy), the
// server compresses straight into its allgather block, and one collective
// carries both the signs and the scales.
//
// Note [1-bit determinism]: each scale is computed by one rank only (the
// worker's by the worker, a chunk's server scale by its server) and travels
// with the signs, and every rank decodes the same bytes with the same
// formula, so every rank gets the same result bits even though the SIMD and
// scalar sum_squares round differently.
#include <cstring>

#include "base/state_io.h"
#include "base/errors.h"
#include "gradwire/compress.h"
#include "kernels/compress_math.h"
#include "kernels/cpu/compress.h"

namespace gradwire {

class OneBitAllreduce::Impl {
 public:
  Impl(Communicator& comm, size_t count)
      : comm_(comm), world_(size_t(comm.size())), rank_(size_t(comm.rank())), count_(count) {
    chunk_ = (count + world_ - 1) / world_;
    chunk_ = (chunk_ + 7) / 8 * 8;
    block_ = sizeof(float) + chunk_ / 8;
    worker_error_.assign(count, 0.0f);
    server_error_.assign(real_in_chunk(rank_), 0.0f);
    if (world_ > 1) {
      send_.resize(block_ * world_);
      recv_.resize(block_ * world_);
      acc_.resize(chunk_);
    }
  }

  // Elements of chunk j that exist (the rest is padding).
  size_t real_in_chunk(size_t j) const {
    const size_t first = j * chunk_;
    return first >= count_ ? 0 : std::min(chunk_, count_ - first);
  }

  void run(float* data) {
    if (world_ == 1 || count_ == 0) return;
    // 1. worker: compress data + worker_error into the send blocks.
    const float scale = kernels::rms_scale(
        kernels::sum_squares(data, worker_error_.data(), count_), count_);
    for (size_t j = 0; j < world_; ++j) {
      std::byte* blk = send_.data() + j * block_;
      std::memcpy(blk, &scale, sizeof scale);
      auto* bits = reinterpret_cast<uint8_t*>(blk + sizeof(float));
      const size_t real = real_in_chunk(j);
      std::memset(bits, 0, chunk_ / 8);  // padding signs: defined bytes on the wire
      kernels::compress_signs(data + j * chunk_, worker_error_.data() + j * chunk_, scale, bits,
                              real);
    }
    // 2. chunk j to rank j.
    comm_.alltoall(send_.data(), recv_.data(), block_, DataType::UInt8).wait();
    // 3. server: average the received chunks, add the server error, compress
    //    into this rank's block of the allgather buffer (reusing send_).
    const size_t mine = real_in_chunk(rank_);
    std::fill(acc_.begin(), acc_.begin() + mine, 0.0f);
    const float inv_world = 1.0f / float(world_);
    for (size_t i = 0; i < world_; ++i) {
      const std::byte* blk = recv_.data() + i * block_;
      float s;
      std::memcpy(&s, blk, sizeof s);
      kernels::accumulate_signs(reinterpret_cast<const uint8_t*>(blk + sizeof(float)),
                                s * inv_world, acc_.data(), mine);
    }
    const float server_scale =
        kernels::rms_scale(kernels::sum_squares(acc_.data(), server_error_.data(), mine), mine);
    std::byte* out = send_.data() + rank_ * block_;
    std::memcpy(out, &server_scale, sizeof server_scale);
    auto* out_bits = reinterpret_cast<uint8_t*>(out + sizeof(float));
    std::memset(out_bits, 0, chunk_ / 8);
    kernels::compress_signs(acc_.data(), server_error_.data(), server_scale, out_bits, mine);
    // 4. every server's chunk to every rank (in place: our block is already
    //    where allgather expects it), then decode.
    comm_.allgather(out, send_.data(), block_ * world_, DataType::UInt8).wait();
    for (size_t j = 0; j < world_; ++j) {
      const std::byte* blk = send_.data() + j * block_;
      float s;
      std::memcpy(&s, blk, sizeof s);
      kernels::decompress_signs(reinterpret_cast<const uint8_t*>(blk + sizeof(float)), s,
                                data + j * chunk_, real_in_chunk(j));
    }
  }

  size_t wire_bytes() const {
    // alltoall: a block to each peer; ring allgather: each rank forwards
    // size()-1 blocks.
    return world_ == 1 || count_ == 0 ? 0 : 2 * (world_ - 1) * block_;
  }

  std::string save() const {
    compress::StateWriter w("OneBitAllreduce");
    w.u64("world", world_);
    w.u64("count", count_);
    w.floats("worker_error", worker_error_);
    w.floats("server_error", server_error_);
    return w.finish();
  }

  void load(std::string_view state) {
    compress::StateReader r(state, "OneBitAllreduce",
                            fmt::format("rank {}: OneBitAllreduce::load_state", rank_));
    const uint64_t world = r.u64("world"), count = r.u64("count");
    if (world != world_ || count != count_) {
      raise(ErrorCode::InvalidArgument,
            "rank {}: OneBitAllreduce::load_state: the state is for {} elements on {} ranks, "
            "this object has {} elements on {} ranks (error buffers are per rank and per "
            "chunk; resuming at another world size is not supported)",
            rank_, count, world, count_, world_);
    }
    auto worker = r.floats("worker_error", count_);
    auto server = r.floats("server_error", server_error_.size());
    r.done();
    worker_error_ = std::move(worker);
    server_error_ = std::move(server);
  }

  Communicator& comm_;
  const size_t world_, rank_, count_;
  size_t chunk_ = 0, block_ = 0;
  std::vector<float> worker_error_, server_error_, acc_;
  std::vector<std::byte> send_, recv_;
};

OneBitAllreduce::OneBitAllreduce(Communicator& comm, size_t count)
    : impl_(std::make_unique<Impl>(comm, count)) {}
OneBitAllreduce::~OneBitAllreduce() = default;
OneBitAllreduce::OneBitAllreduce(OneBitAllreduce&&) noexcept = default;
OneBitAllreduce& OneBitAllreduce::operator=(OneBitAllreduce&&) noexcept = default;
void OneBitAllreduce::run(float* data) { impl_->run(data); }
size_t OneBitAllreduce::count() const { return impl_->count_; }
size_t OneBitAllreduce::wire_bytes() const { return impl_->wire_bytes(); }
const std::vector<float>& OneBitAllreduce::worker_error() const { return impl_->worker_error_; }
const std::vector<float>& OneBitAllreduce::server_error() const { return impl_->server_error_; }
std::string OneBitAllreduce::save_state() const { return impl_->save(); }
void OneBitAllreduce::load_state(std::string_view state) { impl_->load(state); }
void OneBitAllreduce::reset_error_feedback() {
  std::fill(impl_->worker_error_.begin(), impl_->worker_error_.end(), 0.0f);
  std::fill(impl_->server_error_.begin(), impl_->server_error_.end(), 0.0f);
}

}  // namespace gradwire
