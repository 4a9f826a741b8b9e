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
#include "base/raise.h"
#include "compress/lowrank_ops.h"
#include "gradwire/compress.h"
#include "gradwire/device_stream.h"
#include "kernels/compress_math.h"
#include "kernels/cpu/compress.h"

#if GRADWIRE_HAVE_CUDA
#include <cuda_runtime.h>

#include "device/cuda.h"
#include "kernels/cuda/compress.h"
#include "kernels/cuda/onebit.h"
#endif

namespace gradwire {

// Hidden, as Reducer::Impl (src/reducer/reducer_impl.h).
class __attribute__((visibility("hidden"))) OneBitAllreduce::Impl {
 public:
  Impl(Communicator& comm, size_t count, int device)
      : comm_(comm), world_(size_t(comm.size())), rank_(size_t(comm.rank())), count_(count),
        device_(device) {
    chunk_ = (count + world_ - 1) / world_;
    chunk_ = (chunk_ + 7) / 8 * 8;
    block_ = sizeof(float) + chunk_ / 8;
    worker_error_.assign(count, 0.0f);
    server_error_.assign(real_in_chunk(rank_), 0.0f);
    if (device_ >= 0) {
      // Note [the device 1-bit allreduce]: the same steps on the device.
      dev_worker_ = compress::DeviceFloats(device_, count);
      dev_server_ = compress::DeviceFloats(device_, server_error_.size());
      dev_worker_.zero();
      dev_server_.zero();
      if (world_ > 1) {
        const size_t wire_floats = (block_ * world_ + sizeof(float) - 1) / sizeof(float);
        dev_send_ = compress::DeviceFloats(device_, wire_floats);
        dev_recv_ = compress::DeviceFloats(device_, wire_floats);
        dev_acc_ = compress::DeviceFloats(device_, chunk_);
        // world scales, then the server's own, then a double's room (x2 for
        // alignment) for rms_scale's sum.
        dev_scales_ = compress::DeviceFloats(device_, world_ + 1 + 4);
      }
    } else if (world_ > 1) {
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

  void run(float* data, void* stream) {
    if (world_ == 1 || count_ == 0) return;
    if (device_ >= 0) return run_device(data, stream);
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

  // Note [the device 1-bit allreduce]: run() on device memory, with the CPU
  // steps' layout and formulas (the CUDA twins of the same element math);
  // everything is enqueued on `stream`, the two collectives take the device
  // path after it (DeviceStreamScope) and are waited for on the host, as on
  // the CPU. The wire blocks keep Note [1-bit layout] (so their scales are
  // not 4-byte aligned): the scales are moved between the blocks and an
  // aligned array by write_scales / read_scales.
  void run_device(float* data, void* stream) {
#if GRADWIRE_HAVE_CUDA
    namespace cu = kernels::cuda;
    device::DeviceGuard guard(device_);
    DeviceStreamScope scope{Stream(stream)};
    auto* send = reinterpret_cast<uint8_t*>(dev_send_.get());
    auto* recv = reinterpret_cast<uint8_t*>(dev_recv_.get());
    float* scales = dev_scales_.get();  // [world received | server]
    float* server_scale = scales + world_;
    auto* sum = reinterpret_cast<double*>(
        (reinterpret_cast<uintptr_t>(scales + world_ + 1) + 7) & ~uintptr_t(7));
    auto s = static_cast<cudaStream_t>(stream);
    auto check = [&](cudaError_t err, const char* what) {
      if (err != cudaSuccess) {
        cudaGetLastError();
        raise(ErrorCode::Internal, "rank {}: OneBitAllreduce on CUDA device {}: {} failed: {}",
              rank_, device_, what, cudaGetErrorString(err));
      }
    };
    // 1. worker: one scale, the signs of each chunk into its block.
    check(cudaMemsetAsync(send, 0, block_ * world_, s), "cudaMemsetAsync");
    cu::rms_scale(data, dev_worker_.get(), count_, sum, scales, stream);
    cu::write_scales(send, block_, scales, 0, world_, stream);
    for (size_t j = 0; j < world_; ++j) {
      cu::compress_signs(data + j * chunk_, dev_worker_.get() + j * chunk_, scales,
                         send + j * block_ + sizeof(float), real_in_chunk(j), stream);
    }
    // 2. chunk j to rank j.
    comm_.alltoall(send, recv, block_, DataType::UInt8).wait();
    // 3. server: average, add the server error, compress into our block.
    const size_t mine = real_in_chunk(rank_);
    float* acc = dev_acc_.get();
    cu::read_scales(scales, recv, block_, world_, stream);
    check(cudaMemsetAsync(acc, 0, mine * sizeof(float), s), "cudaMemsetAsync");
    const float inv_world = 1.0f / float(world_);
    for (size_t i = 0; i < world_; ++i) {
      cu::decompress_signs(recv + i * block_ + sizeof(float), scales + i, inv_world, acc, mine,
                           true, stream);
    }
    uint8_t* out = send + rank_ * block_;
    cu::rms_scale(acc, dev_server_.get(), mine, sum, server_scale, stream);
    cu::write_scales(out, block_, server_scale, 0, 1, stream);
    check(cudaMemsetAsync(out + sizeof(float), 0, chunk_ / 8, s), "cudaMemsetAsync");
    cu::compress_signs(acc, dev_server_.get(), server_scale, out + sizeof(float), mine, stream);
    // 4. every server's chunk to every rank, then decode.
    comm_.allgather(out, send, block_ * world_, DataType::UInt8).wait();
    cu::read_scales(scales, send, block_, world_, stream);
    for (size_t j = 0; j < world_; ++j) {
      cu::decompress_signs(send + j * block_ + sizeof(float), scales + j, 1.0f, data + j * chunk_,
                           real_in_chunk(j), false, stream);
    }
#else
    (void)data;
    (void)stream;
#endif
  }

  // The host mirrors of the error buffers (downloaded for a device object).
  const std::vector<float>& worker_error() {
    if (device_ >= 0) worker_error_ = dev_worker_.download();
    return worker_error_;
  }
  const std::vector<float>& server_error() {
    if (device_ >= 0) server_error_ = dev_server_.download();
    return server_error_;
  }
  void reset() {
    std::fill(worker_error_.begin(), worker_error_.end(), 0.0f);
    std::fill(server_error_.begin(), server_error_.end(), 0.0f);
    if (device_ >= 0) {
      dev_worker_.zero();
      dev_server_.zero();
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
    // One format for host and device objects.
    w.floats("worker_error", device_ >= 0 ? dev_worker_.download() : worker_error_);
    w.floats("server_error", device_ >= 0 ? dev_server_.download() : server_error_);
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
    if (device_ >= 0) {
      dev_worker_.upload(worker_error_);
      dev_server_.upload(server_error_);
    }
  }

  Communicator& comm_;
  const size_t world_, rank_, count_;
  const int device_;
  size_t chunk_ = 0, block_ = 0;
  std::vector<float> worker_error_, server_error_, acc_;
  std::vector<std::byte> send_, recv_;
  compress::DeviceFloats dev_worker_, dev_server_, dev_send_, dev_recv_, dev_acc_, dev_scales_;
};

OneBitAllreduce::OneBitAllreduce(Communicator& comm, size_t count, Device device)
    : impl_(std::make_unique<Impl>(comm, count, device.index())) {}
OneBitAllreduce::~OneBitAllreduce() = default;
OneBitAllreduce::OneBitAllreduce(OneBitAllreduce&&) noexcept = default;
OneBitAllreduce& OneBitAllreduce::operator=(OneBitAllreduce&&) noexcept = default;
void OneBitAllreduce::run(float* data, Stream stream) { impl_->run(data, stream.native()); }
size_t OneBitAllreduce::count() const { return impl_->count_; }
Device OneBitAllreduce::device() const { return Device::cuda(impl_->device_); }
size_t OneBitAllreduce::wire_bytes() const { return impl_->wire_bytes(); }
const std::vector<float>& OneBitAllreduce::worker_error() const { return impl_->worker_error(); }
const std::vector<float>& OneBitAllreduce::server_error() const { return impl_->server_error(); }
std::string OneBitAllreduce::save_state() const { return impl_->save(); }
void OneBitAllreduce::load_state(std::string_view state) { impl_->load(state); }
void OneBitAllreduce::reset_error_feedback() { impl_->reset(); }

}  // namespace gradwire
