// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Gradient compression: the 1-bit compressed allreduce with two-sided error
// feedback, the 1-bit Adam and 1-bit LAMB optimizers built on it (flat
// float32 buffers; the libtorch adapter wraps them as torch::optim-style
// optimizers), and the PowerSGD comm hook of the Reducer.
//
// Every object here holds state between steps (error buffers, Q matrices,
// moments, step counters). save_state() captures all of it, and
// load_state() restores it exactly, so a resumed run continues bit for bit
// (DeepSpeed resets the error buffers on load; we do not; an elastic
// generation change is the exception, see OneBitOptimizer::rebind). The state is a
// byte string with a versioned header and a checksum; a corrupt, truncated
// or mismatched one is refused with InvalidArgument naming what is wrong.
#pragma once

#include "gradwire/export.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gradwire/communicator.h"
#include "gradwire/reducer.h"

namespace gradwire {

// ---------------------------------------------------------------- 1-bit allreduce

// Averages a float32 buffer over the ranks, sending 1 bit per element plus a
// scale (Tang et al. 2021, "1-bit Adam"; DeepSpeed's compressed_allreduce):
//  1. worker: c = data + worker_error; scale = rms(c); signs of c; worker_error = c - scale*sign;
//  2. the packed signs are split into size() chunks, chunk j goes to rank j
//     (one alltoall, each block carrying its sender's scale);
//  3. server (rank j, for chunk j): s = mean over ranks of scale_i*sign_i +
//     server_error; compress s the same way, keeping its own error;
//  4. the compressed chunks are allgathered; data = decompressed result.
// Error feedback on both sides makes the running sum of the results track the
// running sum of the averaged inputs: after T calls,
//   sum_t result_t = sum_t mean_i(data_i,t) - mean_i(worker_error_i) - server_error
// (the invariant the tests check). Two collectives per call; about
// 2 (n/size + 32) bits per rank and element on the wire instead of 64.
// With one rank there is nothing to exchange: run() leaves data untouched.
class GRADWIRE_API OneBitAllreduce {
 public:
  // A CUDA device: data and the error buffers live there; the compression
  // runs there (the same formulas and wire layout) and the collectives take
  // the device path (NCCL or staged).
  OneBitAllreduce(Communicator& comm, size_t count, Device device = Device::host());
  ~OneBitAllreduce();
  OneBitAllreduce(OneBitAllreduce&&) noexcept;
  OneBitAllreduce& operator=(OneBitAllreduce&&) noexcept;

  // Synchronous: data (count float32) <- compressed average over ranks. On a
  // device, the work is enqueued on `stream` (Stream{}: the legacy default
  // stream), which may go on using `data` at once.
  void run(float* data, Stream stream = {});

  size_t count() const;
  Device device() const;
  // Bytes this rank sent in one run() (alltoall + allgather payloads).
  size_t wire_bytes() const;
  // This rank's error buffers: count elements (worker), and the chunk this
  // rank serves (server); copied to the host for a device object.
  const std::vector<float>& worker_error() const;
  const std::vector<float>& server_error() const;

  std::string save_state() const;
  void load_state(std::string_view state);
  // Zeroes both error buffers: what DeepSpeed does on load. Not needed
  // after load_state() (which restores them); for experiments and for the
  // checkpoint test that proves the buffers matter.
  void reset_error_feedback();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------- 1-bit Adam and LAMB

// The options 1-bit Adam and 1-bit LAMB share (OneBitAdamOptions and
// OneBitLambOptions derive from it; only LAMB's default eps differs).
struct GRADWIRE_API OneBitOptions {
  float lr = 1e-3f;
  float beta1 = 0.9f, beta2 = 0.999f;
  float eps = 1e-8f;  // OneBitLambOptions: 1e-6
  // Decoupled, as in DeepSpeed's OnebitAdam: update += weight_decay * param.
  float weight_decay = 0.0f;
  // Steps of exact Adam (LAMB) with uncompressed gradient averaging before
  // the variance is frozen and the momentum travels compressed.
  uint64_t freeze_step = 100;
  // Adam's bias correction of both moments (torch.optim.Adam's). In the
  // compression stage the variance's correction stays frozen with it.
  bool bias_correction = true;
  // Compress the preconditioned momentum m / (sqrt(v_hat) + eps) instead of
  // m itself (Note [preconditioned 1-bit compression] in
  // src/compress/onebit_optimizers.cpp). The variance is frozen and the same
  // on every rank, so the average is the same; what changes is where the
  // sign noise lands: in update units, so a parameter whose gradient (and
  // variance) is ~0 jitters by ~lr instead of taking steps of
  // lr * scale / eps. false: the papers' (and DeepSpeed's) variant.
  bool precondition_compression = true;
  // Compression stage: |m| <= momentum_clip * (sqrt(v_hat) + eps) per
  // element, so no update exceeds momentum_clip * lr (Note [the momentum
  // clip] in src/compress/onebit_optimizers.cpp); 0 disables the clip.
  float momentum_clip = 10.0f;
};

// What 1-bit Adam and 1-bit LAMB have in common: the two stages (Note
// [1-bit optimizer stages] in src/compress/onebit_optimizers.cpp), the
// step counter, the wire-byte count and the state. Made only as a
// OneBitAdam or a OneBitLamb.
class GRADWIRE_API OneBitOptimizer {
 public:
  virtual ~OneBitOptimizer();
  OneBitOptimizer(const OneBitOptimizer&) = delete;
  OneBitOptimizer& operator=(const OneBitOptimizer&) = delete;

  // params and grad: count() float32 in the memory of device(); grad is
  // this rank's local, unaveraged gradient and is used as scratch (its
  // contents are undefined afterwards). On a device the work is enqueued on
  // `stream` (Stream{}: the legacy default stream) and the collectives wait
  // for it; the step returns once they are done, with the update enqueued
  // after them. Every rank must call step() with the same count, in the
  // same order.
  void step(float* params, float* grad, Stream stream = {});
  Device device() const;

  OneBitOptions& options();  // the shared part of the derived class's options()
  uint64_t steps() const;       // completed steps
  bool compressing() const;     // the next step is a compression step
  size_t last_wire_bytes() const;  // bytes this rank sent in the last step
  size_t count() const;

  std::string save_state() const;
  // load_state() takes either state; after a replicated one the error
  // feedback restarts at zero.
  void load_state(std::string_view state);
  void reset_error_feedback();  // OneBitAllreduce::reset_error_feedback

  // For elastic training (Note [1-bit optimizers under elastic generations]
  // in src/compress/onebit_optimizers.cpp). The replicated state: what
  // every rank holds alike (moments, the frozen variance, the step counter
  // and so the stage, LAMB's coefficients), i.e. save_state() without this
  // rank's error-feedback buffers, whose layout depends on the world size.
  std::string save_replicated_state() const;
  // Moves the optimizer onto `comm` (a new generation's communicator, of
  // any size; it must outlive the optimizer or the next rebind): the
  // error feedback restarts at zero, laid out for comm's world; everything
  // else stays. Not collective.
  void rebind(Communicator& comm);

  // Opaque (src/compress/onebit_optimizers.cpp): Adam's and LAMB's math
  // derive from it there.
  class Impl;

 protected:
  explicit OneBitOptimizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct GRADWIRE_API OneBitAdamOptions : OneBitOptions {};

// 1-bit Adam over one flat float32 parameter buffer (Tang et al. 2021).
// step() takes this rank's local, unaveraged gradient:
//  warm-up (step < freeze_step): g = allreduce-average(grad); Adam on g;
//  compression: m = beta1 m + (1-beta1) grad (local); m = OneBitAllreduce(m)
//    (of m / (sqrt(v_hat) + eps) by default, see precondition_compression);
//    v stays frozen; param -= lr * (m_hat / (sqrt(v_hat) + eps) + wd * param).
// Params stay identical on every rank (the compressed result is the same
// bits everywhere).
class GRADWIRE_API OneBitAdam : public OneBitOptimizer {
 public:
  // A CUDA device: params, grad and the optimizer's state live there (Note
  // [1-bit optimizers on a device] in src/compress/onebit_optimizers.cpp);
  // the state saves in one format.
  OneBitAdam(Communicator& comm, size_t count, OneBitAdamOptions options = {},
             Device device = Device::host());
  ~OneBitAdam() override;

  OneBitAdamOptions& options();
};

struct GRADWIRE_API OneBitLambOptions : OneBitOptions {
  OneBitLambOptions() { eps = 1e-6f; }
  // LAMB's layer-wise scaling coefficient ||param|| / ||update||, clipped.
  float max_coeff = 10.0f, min_coeff = 0.01f;
  // The coefficient frozen for the compression stage is a running average
  // of the warm-up's coefficients with this factor.
  float coeff_beta = 0.9f;
  // Compression stage: the frozen coefficient is rescaled by how far a fresh
  // variance estimate (from the reconstructed global gradients) moved from
  // the frozen one, clipped to [factor_min, factor_max] and to
  // +-factor_threshold relative change per step (Li et al. 2021; DeepSpeed's
  // defaults).
  float factor_max = 4.0f, factor_min = 0.5f, factor_threshold = 0.1f;
  // Compression stage: LAMB's coefficient ||param|| / ||update|| computed
  // every step from the averaged (compressed) momentum, as in the warm-up,
  // instead of the frozen coefficient times the variance-drift factor above
  // (which then go unused). Applies with precondition_compression only; the
  // papers' variant keeps the frozen coefficients. Note [live LAMB
  // coefficients] in src/compress/onebit_optimizers.cpp says why this is
  // the default (the frozen ones lost 5.2 points to LAMB on Fashion-MNIST).
  bool live_coefficients = true;
};

// 1-bit LAMB over one flat float32 buffer made of layers (the segments
// `layer_sizes`, in order; the scaling coefficients are per layer).
class GRADWIRE_API OneBitLamb : public OneBitOptimizer {
 public:
  // A CUDA device: as OneBitAdam's, with the default (live-coefficient,
  // preconditioned) variant only: InvalidArgument otherwise.
  OneBitLamb(Communicator& comm, std::vector<size_t> layer_sizes, OneBitLambOptions options = {},
             Device device = Device::host());
  ~OneBitLamb() override;

  OneBitLambOptions& options();
  // The coefficient each layer used in the last step.
  const std::vector<float>& last_coefficients() const;
};

// ---------------------------------------------------------------- PowerSGD

// The options of PyTorch's powerSGD_hook.PowerSGDState, same names but in
// snake case (Python keeps torch's start_powerSGD_iter keyword).
struct GRADWIRE_API PowerSGDOptions {
  size_t matrix_approximation_rank = 1;
  // Synchronised steps with plain allreduce before compression starts.
  uint64_t start_powersgd_iter = 1000;
  // A tensor is compressed when (rows + cols) * rank * min_compression_rate <
  // rows * cols; the others (and 1-D tensors) are allreduced uncompressed.
  double min_compression_rate = 2.0;
  bool use_error_feedback = true;
  bool warm_start = true;
  float orthogonalization_epsilon = 0.0f;
  // Seeds the random initial Q matrices (the same on every rank).
  uint64_t random_seed = 0;
  // Accepted for PyTorch parity; the CPU products run per matrix either way,
  // so this changes only the order of P and Q in memory, never a result.
  bool batch_tensors_with_same_shape = false;
};

// PowerSGD's state across steps: per Bucket, the error-feedback buffer and
// the Q matrices (warm start), plus counters. Shared by the hook; keep it to
// save and load it.
class GRADWIRE_API PowerSGDState {
 public:
  explicit PowerSGDState(PowerSGDOptions options = {});
  ~PowerSGDState();

  const PowerSGDOptions& options() const;
  // Elements before and after compression, summed over every Bucket
  // reduced so far (torch's compression_stats()).
  uint64_t numel_before_compression() const;
  uint64_t numel_after_compression() const;

  std::string save_state() const;
  void load_state(std::string_view state);
  // Zeroes every Bucket's error-feedback buffer (Q and counters stay); see
  // OneBitAllreduce::reset_error_feedback.
  void reset_error_feedback();

 private:
  class Impl;
  // The hook runs the state's steps (src/compress/powersgd.cpp).
  friend GRADWIRE_API CommHook powersgd_hook(std::shared_ptr<PowerSGDState> state);
  std::unique_ptr<Impl> impl_;
};

// The Reducer comm hook (Vogels et al. 2019, as torch's powerSGD_hook): per
// float32 Bucket, with M the Bucket's matrices (+ error): P = M Q, allreduce
// P (together with the uncompressed tensors), orthonormalise P, Q = M^T P,
// allreduce Q, M = P Q^T, error = input - result. Two allreduces per Bucket.
// Gradients need their shape (GradientInfo::shape; matrices are viewed as
// shape[0] x rest). Other dtypes, and steps before start_powersgd_iter, use
// allreduce_hook(). Host and CUDA Buckets: on a device Bucket every product,
// the orthonormalisation and the error feedback run on the GPU (our own
// kernels, kernels/cuda/lowrank.cu) and both allreduces take the device
// path (NCCL or staged), with no host synchronisation inside the step; error
// and Q stay in device memory, and save_state() / load_state() use one
// format for both (a state saved from a CUDA run loads into a CPU run and
// the reverse).
GRADWIRE_API CommHook powersgd_hook(std::shared_ptr<PowerSGDState> state);

}  // namespace gradwire
