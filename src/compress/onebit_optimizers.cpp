// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// 1-bit Adam and 1-bit LAMB over flat float32 buffers
// (include/gradwire/compress.h).
//
// Note [1-bit optimizer stages]: both optimizers run exact Adam/LAMB for
// freeze_step steps, with the gradients averaged by a plain allreduce; then
// the variance is frozen (Adam's v no longer changes, so the preconditioner
// is the same on every rank and the momentum alone must be averaged, which
// tolerates 1-bit compression thanks to error feedback). From then on each
// rank folds its *local* gradient into the momentum and the momentum is
// averaged with the OneBitAllreduce. Bias correction: the momentum's keeps
// running (1 - beta1^t); the variance's is frozen with the variance at
// 1 - beta2^freeze_step, so the step size does not jump at the switch.
// (DeepSpeed's OnebitAdam has no bias correction at all; with
// bias_correction = false ours matches its update.)
//
// Note [preconditioned 1-bit compression]: sign compression cannot send a
// zero: every element arrives as +-scale, with one scale per chunk of
// thousands of elements. Sent as the papers do (the momentum itself), an
// element whose gradient is ~0 through the warm-up (a dead ReLU unit, an
// unused embedding row) has v ~ 0, and its +-scale is then divided by
// sqrt(v) + eps ~ 1e-8: a step of lr * 1e5 that turns the model to NaN
// (observed on the Fashion-MNIST CNN with a short warm-up). Because v is
// frozen and identical on every rank, averaging m / d (d = sqrt(v_hat) +
// eps) and multiplying by d afterwards gives the same average, and error
// feedback keeps the same invariant in these units; but the sign noise is
// now of the size of a normal Adam update (~lr per element), bounded
// whatever v is. The error buffers hold values in these units.
//
// Note [the momentum clip]: with the variance frozen, a parameter that got
// (almost) no gradient during the warm-up (v ~ 0, so a denominator ~ eps)
// and gets one later would take steps of lr * m / eps, and through the
// shared scale of the 1-bit chunks it drags every other element along (a
// 2-rank Fashion-MNIST run with a 20-step warm-up went to NaN within 30
// steps). Exact Adam cannot do this: its v grows with the new gradient. So
// in the compression stage |m| is clipped to momentum_clip * denominator,
// i.e. no element's update exceeds momentum_clip * lr; a parameter that
// was silent through the warm-up stays (nearly) where it is.
//
// Note [live LAMB coefficients]: the paper's 1-bit LAMB freezes each layer's
// coefficient ||p|| / ||u|| at the warm-up's running average and rescales
// it by how far a fresh variance estimate, fed with gradients reconstructed
// from the compressed momentum, drifts from the frozen one. On the
// Fashion-MNIST CNN (2 ranks, one-epoch warm-up) that lost 5.2 points to
// LAMB (83.09 % against 88.27 %), for two reasons found by tracing the
// coefficients:
//  - the reconstructed gradient (m_t - beta1 m_{t-1}) / (1 - beta1) carries
//    the compression error of two momenta times 1 / (1 - beta1) = 10, so the
//    fresh variance is mostly noise, far above the frozen one: the factor
//    sat at factor_min (0.5) from the first compressed steps;
//  - with the factor pinned at 1 instead, the run reached 89.2 % after the
//    second epoch and then fell apart (50.7 % after the third, training
//    loss rising): with the variance frozen, ||u|| grows as training goes
//    on while the frozen coefficient does not shrink with it, so the steps
//    outgrow LAMB's lr * ||p||.
// So, with the preconditioned compression (the default), the coefficient
// is LAMB's own, recomputed every step from the averaged update: u is the
// averaged momentum over the frozen variance and p is the same on every
// rank, so the ratio is too, with no communication; every layer's step has
// LAMB's length lr * ||p|| (ctest: OneBitLamb.CompressedStepsHaveLambsLength).
// The paper's worry holds in part: the compressed momentum's sign noise
// inflates ||u||, so the coefficient runs lower than LAMB's (0.5-0.7x on
// the CNN) and steps point less at the optimum when the true update is
// small (a synthetic quadratic converges 3-4x less far in 800 steps than
// with frozen coefficients). Measured on Fashion-MNIST, 3 epochs, 2 ranks:
// CNN 90.42 / 90.69 / 90.51 % (seeds 1-3) against LAMB's 88.27 / 88.27 /
// 87.94 %; MLP 88.21 % against LAMB's 83.27 % (frozen: 87.29 %). Without the
// preconditioning (the papers' variant) the compressed momentum's noise is
// divided by small variances, ||u|| is dominated by it, and the live
// coefficient collapses (0.04 where LAMB's is 1-10): that variant keeps the
// paper's frozen coefficients.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/state_io.h"
#include "base/errors.h"
#include "compress/lowrank_ops.h"
#include "gradwire/compress.h"
#include "gradwire/device_stream.h"
#include "kernels/compress_math.h"

#if GRADWIRE_HAVE_CUDA
#include <cuda_runtime.h>

#include "device/cuda.h"
#include "kernels/cuda/onebit.h"
#endif

namespace gradwire {
namespace {

// Bytes this rank sends in a ring allreduce of `bytes` over `world` ranks
// (reduce-scatter + allgather: 2 (world-1)/world of the buffer).
size_t ring_allreduce_bytes(size_t bytes, size_t world) {
  return world <= 1 ? 0 : 2 * (world - 1) * ((bytes + world - 1) / world);
}

// Averages `grad` over the ranks (the warm-up's exact gradient averaging).
void average(Communicator& comm, float* grad, size_t n) {
  if (comm.size() == 1 || n == 0) return;
  comm.allreduce(grad, grad, n, DataType::Float32, ReduceOp::Sum).wait();
  const float inv = 1.0f / float(comm.size());
  for (size_t i = 0; i < n; ++i) grad[i] = kernels::rn_mul(grad[i], inv);
}

float correction(float beta, uint64_t t, bool enabled) {
  return enabled ? float(1.0 - std::pow(double(beta), double(t))) : 1.0f;
}

double norm(const float* x, size_t n) {
  double s = 0;  // one fixed order: identical on every rank
  for (size_t i = 0; i < n; ++i) s += double(x[i]) * x[i];
  return std::sqrt(s);
}

// The compression stage's averaging of the momentum (Note [preconditioned
// 1-bit compression], Note [the momentum clip]); `scratch` (n floats) holds
// the denominators.
void compressed_average(OneBitAllreduce& ar, std::vector<float>& m, const std::vector<float>& v,
                        float inv_bc2, float eps, bool precondition, float clip, float* scratch) {
  const size_t n = m.size();
  const float hi = clip > 0 ? clip : std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) {
    scratch[i] = kernels::adam_denominator(v[i], inv_bc2, eps);
    m[i] = kernels::onebit_send_value(m[i], scratch[i], hi, precondition);
  }
  ar.run(m.data());
  if (precondition) {
    for (size_t i = 0; i < n; ++i) m[i] = kernels::rn_mul(m[i], scratch[i]);
  }
}

// The error buffers' units depend on precondition_compression.
void check_units(uint64_t saved, bool now, const std::string& what) {
  if (bool(saved) != now) {
    raise(ErrorCode::InvalidArgument, "{}: the state was saved with precondition_compression = {}, "
          "these options have {} (the error buffers would be in the wrong units)", what,
          bool(saved), now);
  }
}

void check_count(const Communicator& comm, const char* who, size_t n) {
  // The same count on every rank is the caller's contract (as for any
  // collective); the warm-up's allreduce would catch a mismatch only as a
  // Mismatch/timeout, so at least refuse what can never work.
  if (n == 0) {
    raise(ErrorCode::InvalidArgument, "rank {}: {}: there are no parameters (count 0)",
          comm.rank(), who);
  }
}

// Note [1-bit optimizers on a device]: with device >= 0 the parameters,
// gradients, moments and error buffers are CUDA memory, and a step enqueues
// the CUDA twins of the CPU loops (kernels/cuda/onebit.h, the same element
// math) on the caller's stream; the collectives (the warm-up's allreduce,
// the 1-bit alltoall and allgather) take the device path after that stream
// and are waited for on the host, as on the CPU. LAMB's layer norms are
// summed on the device in an order fixed by the layer's size (the same bits
// on every rank) and come to the host once per step for the coefficients.
// Only what a step needs crosses to the host; save_state() downloads the
// state in the CPU's format, so checkpoints move between devices.
struct DeviceState {
  int device = -1;
  compress::DeviceFloats m, v;
  void init(int dev, size_t n) {
    device = dev;
    if (dev < 0) return;
    m = compress::DeviceFloats(dev, n);
    v = compress::DeviceFloats(dev, n);
    m.zero();
    v.zero();
  }
};

#if GRADWIRE_HAVE_CUDA
namespace cu = kernels::cuda;

void average_device(Communicator& comm, float* grad, size_t n, void* stream) {
  if (comm.size() == 1 || n == 0) return;
  {
    DeviceStreamScope scope(stream);
    comm.allreduce(grad, grad, n, DataType::Float32, ReduceOp::Sum).wait();
  }
  cu::scale(grad, n, 1.0f / float(comm.size()), stream);
}

void compressed_average_device(OneBitAllreduce& ar, float* m, const float* v, size_t n,
                               float inv_bc2, float eps, bool precondition, float clip,
                               float* scratch, void* stream) {
  const float hi = clip > 0 ? clip : std::numeric_limits<float>::infinity();
  cu::onebit_prepare(m, v, scratch, n, inv_bc2, eps, hi, precondition, stream);
  ar.run(m, stream);
  if (precondition) cu::multiply(m, scratch, n, stream);
}
#endif

[[noreturn]] void no_cuda(const char* who, int device) {
  raise(ErrorCode::InvalidArgument, "{}: device {} was asked for, but this gradwire was built "
        "without CUDA", who, device);
}

}  // namespace

// ---------------------------------------------------------------- 1-bit Adam

class OneBitAdam::Impl {
 public:
  Impl(Communicator& comm, size_t n, OneBitAdamOptions o, int device)
      : comm_(comm), n_(n), o_(o), ar_(comm, n, device) {
    check_count(comm, "OneBitAdam", n);
#if !GRADWIRE_HAVE_CUDA
    if (device >= 0) no_cuda("OneBitAdam", device);
#endif
    dev_.init(device, n);
    if (device < 0) {
      m_.assign(n, 0.0f);
      v_.assign(n, 0.0f);
    }
  }

  void step(float* p, float* g, void* stream) {
    if (dev_.device >= 0) return step_device(p, g, stream);
    const uint64_t t = t_ + 1;
    const float b1 = o_.beta1, b2 = o_.beta2;
    const float bc1 = correction(b1, t, o_.bias_correction);
    float bc2;
    if (t_ < o_.freeze_step) {
      average(comm_, g, n_);
      for (size_t i = 0; i < n_; ++i) {
        m_[i] = kernels::adam_momentum(m_[i], g[i], b1, 1.0f - b1);
        v_[i] = kernels::adam_variance(v_[i], g[i], b2, 1.0f - b2);
      }
      bc2 = correction(b2, t, o_.bias_correction);
      wire_ = ring_allreduce_bytes(n_ * sizeof(float), size_t(comm_.size()));
    } else {
      bc2 = correction(b2, std::max<uint64_t>(o_.freeze_step, 1), o_.bias_correction);
      for (size_t i = 0; i < n_; ++i) m_[i] = kernels::adam_momentum(m_[i], g[i], b1, 1.0f - b1);
      compressed_average(ar_, m_, v_, 1.0f / bc2, o_.eps, o_.precondition_compression,
                         o_.momentum_clip, g);
      wire_ = ar_.wire_bytes();
    }
    const float lr = o_.lr, eps = o_.eps, wd = o_.weight_decay;
    const float inv_bc1 = 1.0f / bc1, inv_bc2 = 1.0f / bc2;
    for (size_t i = 0; i < n_; ++i) {
      const float d = kernels::adam_denominator(v_[i], inv_bc2, eps);
      p[i] = kernels::apply_step(p[i], lr, kernels::adam_direction(m_[i], inv_bc1, d, p[i], wd));
    }
    t_ = t;
  }

  // Note [1-bit optimizers on a device]: the loops above as kernels.
  void step_device(float* p, float* g, void* stream) {
#if GRADWIRE_HAVE_CUDA
    device::DeviceGuard guard(dev_.device);
    const uint64_t t = t_ + 1;
    const float b1 = o_.beta1, b2 = o_.beta2;
    const float bc1 = correction(b1, t, o_.bias_correction);
    float bc2;
    float *m = dev_.m.get(), *v = dev_.v.get();
    if (t_ < o_.freeze_step) {
      average_device(comm_, g, n_, stream);
      cu::adam_moments(m, v, g, n_, b1, b2, stream);
      bc2 = correction(b2, t, o_.bias_correction);
      wire_ = ring_allreduce_bytes(n_ * sizeof(float), size_t(comm_.size()));
    } else {
      bc2 = correction(b2, std::max<uint64_t>(o_.freeze_step, 1), o_.bias_correction);
      cu::adam_momentum(m, g, n_, b1, stream);
      compressed_average_device(ar_, m, v, n_, 1.0f / bc2, o_.eps, o_.precondition_compression,
                                o_.momentum_clip, g, stream);
      wire_ = ar_.wire_bytes();
    }
    cu::adam_direction(g, m, v, p, n_, 1.0f / bc1, 1.0f / bc2, o_.eps, o_.weight_decay, o_.lr,
                       stream);
    t_ = t;
#else
    (void)p, (void)g, (void)stream;
#endif
  }

  std::string save() const {
    compress::StateWriter w("OneBitAdam");
    w.u64("count", n_);
    w.u64("preconditioned", o_.precondition_compression);
    w.u64("step", t_);
    w.u64("freeze_step", o_.freeze_step);
    w.floats("exp_avg", dev_.device >= 0 ? dev_.m.download() : m_);
    w.floats("exp_avg_sq", dev_.device >= 0 ? dev_.v.download() : v_);
    const std::string ar = ar_.save_state();
    w.bytes("allreduce", ar.data(), ar.size());
    return w.finish();
  }

  void load(std::string_view state) {
    const std::string what = fmt::format("rank {}: OneBitAdam::load_state", comm_.rank());
    compress::StateReader r(state, "OneBitAdam", what);
    const uint64_t n = r.u64("count");
    check_units(r.u64("preconditioned"), o_.precondition_compression, what);
    if (n != n_) {
      raise(ErrorCode::InvalidArgument, "{}: the state is for {} parameters, this optimizer has {}",
            what, n, n_);
    }
    const uint64_t t = r.u64("step");
    const uint64_t freeze = r.u64("freeze_step");
    auto m = r.floats("exp_avg", n_);
    auto v = r.floats("exp_avg_sq", n_);
    const std::string ar(r.bytes("allreduce"));
    r.done();
    ar_.load_state(ar);  // validates before anything below changes
    t_ = t;
    o_.freeze_step = freeze;
    if (dev_.device >= 0) {
      dev_.m.upload(m);
      dev_.v.upload(v);
    } else {
      m_ = std::move(m);
      v_ = std::move(v);
    }
  }

  Communicator& comm_;
  const size_t n_;
  OneBitAdamOptions o_;
  uint64_t t_ = 0;
  std::vector<float> m_, v_;  // host state (device < 0)
  DeviceState dev_;
  OneBitAllreduce ar_;
  size_t wire_ = 0;
};

OneBitAdam::OneBitAdam(Communicator& comm, size_t count, OneBitAdamOptions options, int device)
    : impl_(std::make_unique<Impl>(comm, count, options, device)) {}
OneBitAdam::~OneBitAdam() = default;
void OneBitAdam::step(float* params, float* grad, void* stream) {
  impl_->step(params, grad, stream);
}
int OneBitAdam::device() const { return impl_->dev_.device; }
OneBitAdamOptions& OneBitAdam::options() { return impl_->o_; }
uint64_t OneBitAdam::steps() const { return impl_->t_; }
bool OneBitAdam::compressing() const { return impl_->t_ >= impl_->o_.freeze_step; }
size_t OneBitAdam::last_wire_bytes() const { return impl_->wire_; }
size_t OneBitAdam::count() const { return impl_->n_; }
std::string OneBitAdam::save_state() const { return impl_->save(); }
void OneBitAdam::load_state(std::string_view state) { impl_->load(state); }
void OneBitAdam::reset_error_feedback() { impl_->ar_.reset_error_feedback(); }

// ---------------------------------------------------------------- 1-bit LAMB

class OneBitLamb::Impl {
 public:
  Impl(Communicator& comm, std::vector<size_t> layers, OneBitLambOptions o, int device)
      : comm_(comm), layers_(std::move(layers)), o_(o) {
    for (size_t s : layers_) n_ += s;
    check_count(comm, "OneBitLamb", n_);
#if !GRADWIRE_HAVE_CUDA
    if (device >= 0) no_cuda("OneBitLamb", device);
#endif
    if (device >= 0 && !(o_.live_coefficients && o_.precondition_compression)) {
      raise(ErrorCode::InvalidArgument, "rank {}: OneBitLamb on CUDA device {} runs the default "
            "variant (live_coefficients and precondition_compression); the papers' frozen "
            "coefficients are implemented on the CPU only: keep the defaults, or keep the "
            "parameters in host memory", comm.rank(), device);
    }
    dev_.init(device, n_);
    if (device < 0) {
      m_.assign(n_, 0.0f);
      v_.assign(n_, 0.0f);
    }
    coeff_freeze_.assign(layers_.size(), 0.0f);
    coeff_seen_.assign(layers_.size(), 0);
    last_factor_.assign(layers_.size(), 1.0f);
    last_coeff_.assign(layers_.size(), 1.0f);
    ar_ = std::make_unique<OneBitAllreduce>(comm, n_, device);
  }

  // LAMB's coefficient of layer l from its norms (warm-up, or the live
  // coefficients of the compression stage), and the warm-up's running
  // average of it: shared by the host and the device step.
  float live_coefficient(size_t l, bool warmup, double weight_norm, double update_norm) {
    float coeff = 1.0f;
    if (weight_norm > 0 && update_norm > 0) coeff = float(weight_norm / update_norm);
    coeff = std::clamp(coeff, o_.min_coeff, o_.max_coeff);
    if (warmup) {
      coeff_freeze_[l] = coeff_seen_[l] ? o_.coeff_beta * coeff_freeze_[l] + (1 - o_.coeff_beta) * coeff
                                        : coeff;
      coeff_seen_[l] = 1;
    }
    return coeff;
  }

  // Note [1-bit optimizers on a device] (live coefficients only).
  void step_device(float* p, float* g, void* stream) {
#if GRADWIRE_HAVE_CUDA
    device::DeviceGuard guard(dev_.device);
    const uint64_t t = t_ + 1;
    const float b1 = o_.beta1, b2 = o_.beta2, eps = o_.eps;
    const float inv_bc1 = 1.0f / correction(b1, t, o_.bias_correction);
    const bool warmup = t_ < o_.freeze_step;
    float *m = dev_.m.get(), *v = dev_.v.get();
    if (warmup) {
      average_device(comm_, g, n_, stream);
      cu::adam_moments(m, v, g, n_, b1, b2, stream);
      wire_ = ring_allreduce_bytes(n_ * sizeof(float), size_t(comm_.size()));
    } else {
      cu::adam_momentum(m, g, n_, b1, stream);
      const float frozen_bc2 = correction(b2, std::max<uint64_t>(o_.freeze_step, 1), o_.bias_correction);
      compressed_average_device(*ar_, m, v, n_, 1.0f / frozen_bc2, eps, true, o_.momentum_clip, g,
                                stream);
      wire_ = ar_->wire_bytes();
    }
    const float inv_bc2 =
        1.0f / correction(b2, warmup ? t : std::max<uint64_t>(o_.freeze_step, 1), o_.bias_correction);
    // g receives the update; then every layer's two norms, in one batch.
    cu::adam_direction(g, m, v, p, n_, inv_bc1, inv_bc2, eps, o_.weight_decay, 0.0f, stream);
    const size_t layers = layers_.size();
    if (norms_.size() != 2 * (2 * layers + cu::onebit_partials())) {
      norms_ = compress::DeviceFloats(dev_.device, 2 * (2 * layers + cu::onebit_partials()));
    }
    auto* sums = reinterpret_cast<double*>(norms_.get());
    double* partials = sums + 2 * layers;
    size_t first = 0;
    for (size_t l = 0; l < layers; ++l) {
      cu::sum_squares_fixed(g + first, layers_[l], partials, sums + 2 * l, stream);
      cu::sum_squares_fixed(p + first, layers_[l], partials, sums + 2 * l + 1, stream);
      first += layers_[l];
    }
    std::vector<double> host(2 * layers);
    const auto s = static_cast<cudaStream_t>(stream);
    cudaError_t err = cudaMemcpyAsync(host.data(), sums, host.size() * sizeof(double),
                                      cudaMemcpyDeviceToHost, s);
    if (err == cudaSuccess) err = cudaStreamSynchronize(s);
    if (err != cudaSuccess) {
      cudaGetLastError();
      raise(ErrorCode::Internal, "rank {}: OneBitLamb on CUDA device {}: reading the layer norms "
            "failed: {}", comm_.rank(), dev_.device, cudaGetErrorString(err));
    }
    first = 0;
    for (size_t l = 0; l < layers; ++l) {
      const float coeff = live_coefficient(l, warmup, std::sqrt(host[2 * l + 1]),
                                           std::sqrt(host[2 * l]));
      last_coeff_[l] = coeff;
      cu::apply_step(p + first, g + first, layers_[l], o_.lr * coeff, stream);
      first += layers_[l];
    }
    t_ = t;
#else
    (void)p, (void)g, (void)stream;
#endif
  }

  void step(float* p, float* g, void* stream) {
    if (dev_.device >= 0) return step_device(p, g, stream);
    const uint64_t t = t_ + 1;
    const float b1 = o_.beta1, b2 = o_.beta2, eps = o_.eps, wd = o_.weight_decay;
    const float inv_bc1 = 1.0f / correction(b1, t, o_.bias_correction);
    const bool warmup = t_ < o_.freeze_step;
    // Note [live LAMB coefficients]: with the preconditioned compression only.
    const bool live_mode = o_.live_coefficients && o_.precondition_compression;
    if (warmup) {
      average(comm_, g, n_);
      for (size_t i = 0; i < n_; ++i) {
        m_[i] = kernels::adam_momentum(m_[i], g[i], b1, 1.0f - b1);
        v_[i] = kernels::adam_variance(v_[i], g[i], b2, 1.0f - b2);
      }
      wire_ = ring_allreduce_bytes(n_ * sizeof(float), size_t(comm_.size()));
    } else {
      if (!live_mode) {
        if (v_fresh_.empty()) v_fresh_ = v_;  // the first compression step
        m_last_ = m_;
      }
      for (size_t i = 0; i < n_; ++i) m_[i] = kernels::adam_momentum(m_[i], g[i], b1, 1.0f - b1);
      const float frozen_bc2 = correction(b2, std::max<uint64_t>(o_.freeze_step, 1), o_.bias_correction);
      compressed_average(*ar_, m_, v_, 1.0f / frozen_bc2, eps, o_.precondition_compression,
                         o_.momentum_clip, g);
      wire_ = ar_->wire_bytes();
    }
    const float inv_bc2 =
        1.0f / correction(b2, warmup ? t : std::max<uint64_t>(o_.freeze_step, 1), o_.bias_correction);
    // g is scratch from here on: it receives the update.
    size_t first = 0;
    for (size_t l = 0; l < layers_.size(); ++l) {
      const size_t len = layers_[l];
      float* u = g + first;
      const float* pl = p + first;
      double prelim_sq = 0;
      float factor = 0.0f;  // compression: max over elements of denom / denom_real
      for (size_t i = first; i < first + len; ++i) {
        const float denom = kernels::adam_denominator(v_[i], inv_bc2, eps);
        float x = kernels::adam_direction(m_[i], inv_bc1, denom, p[i], 0.0f);
        if (!warmup && !live_mode) {
          // The global gradient the averaged momentum implies, folded into a
          // fresh variance estimate to see how far the frozen one is off.
          const float gr = (m_[i] - b1 * m_last_[i]) / (1.0f - b1);
          v_fresh_[i] = b2 * v_fresh_[i] + (1.0f - b2) * gr * gr;
          factor = std::max(factor, denom / (std::sqrt(v_fresh_[i] * inv_bc2) + eps));
          prelim_sq += double(x) * x;
        }
        if (wd != 0.0f) x = kernels::rn_add(x, kernels::rn_mul(wd, p[i]));
        u[i - first] = x;
      }
      const double update_norm = norm(u, len);
      float coeff = 1.0f;
      const bool live = !warmup && live_mode;
      if (warmup || live) {
        // LAMB's trust ratio, ||p|| / ||u||. In the compression stage u is
        // the averaged momentum over the frozen variance (Note [live LAMB
        // coefficients]): the same on every rank, and so is the ratio. The
        // warm-up keeps a running average of it, started from the first one
        // (DeepSpeed starts from 0, which biases short warm-ups low).
        coeff = live_coefficient(l, warmup, norm(pl, len), update_norm);
      } else {
        if (wd != 0.0f && update_norm > 0) {
          const float ratio = float(std::min(1.0, std::sqrt(prelim_sq) / update_norm));
          factor = factor * ratio + (1.0f - ratio);
        }
        factor = std::clamp(factor, o_.factor_min, o_.factor_max);
        factor = std::clamp(factor, last_factor_[l] * (1.0f - o_.factor_threshold),
                            last_factor_[l] * (1.0f + o_.factor_threshold));
        last_factor_[l] = factor;
        coeff = coeff_freeze_[l] * factor;
      }
      last_coeff_[l] = coeff;
      const float step_size = o_.lr * coeff;
      for (size_t i = 0; i < len; ++i) p[first + i] = kernels::apply_step(p[first + i], step_size, u[i]);
      first += len;
    }
    t_ = t;
  }

  std::string save() const {
    compress::StateWriter w("OneBitLamb");
    w.u64("count", n_);
    w.u64("preconditioned", o_.precondition_compression);
    w.u64("layers", layers_.size());
    w.bytes("layer_sizes", layers_.data(), layers_.size() * sizeof(size_t));
    w.u64("step", t_);
    w.u64("freeze_step", o_.freeze_step);
    w.floats("exp_avg", dev_.device >= 0 ? dev_.m.download() : m_);
    w.floats("exp_avg_sq", dev_.device >= 0 ? dev_.v.download() : v_);
    w.floats("exp_avg_sq_fresh", v_fresh_);
    w.floats("coeff_freeze", coeff_freeze_);
    w.floats("last_factor", last_factor_);
    w.floats("last_coeff", last_coeff_);
    w.bytes("coeff_seen", coeff_seen_.data(), coeff_seen_.size());
    const std::string ar = ar_->save_state();
    w.bytes("allreduce", ar.data(), ar.size());
    return w.finish();
  }

  void load(std::string_view state) {
    const std::string what = fmt::format("rank {}: OneBitLamb::load_state", comm_.rank());
    compress::StateReader r(state, "OneBitLamb", what);
    const uint64_t n = r.u64("count");
    check_units(r.u64("preconditioned"), o_.precondition_compression, what);
    const uint64_t layers = r.u64("layers");
    const auto sizes = r.bytes("layer_sizes");
    if (n != n_ || layers != layers_.size() || sizes.size() != layers_.size() * sizeof(size_t) ||
        std::memcmp(sizes.data(), layers_.data(), sizes.size()) != 0) {
      raise(ErrorCode::InvalidArgument, "{}: the state is for {} parameters in {} layers, this "
            "optimizer has {} in {} (or the layer sizes differ)", what, n, layers, n_, layers_.size());
    }
    const uint64_t t = r.u64("step"), freeze = r.u64("freeze_step");
    auto m = r.floats("exp_avg", n_);
    auto v = r.floats("exp_avg_sq", n_);
    // Empty until the first compression step, then one per parameter.
    const size_t fresh_bytes = r.peek_size("exp_avg_sq_fresh");
    auto fresh = r.floats("exp_avg_sq_fresh", fresh_bytes == 0 ? 0 : n_);
    auto coeff = r.floats("coeff_freeze", layers_.size());
    auto last_factor = r.floats("last_factor", layers_.size());
    auto last_coeff = r.floats("last_coeff", layers_.size());
    const auto seen = r.bytes("coeff_seen");
    if (seen.size() != layers_.size()) {
      raise(ErrorCode::InvalidArgument, "{}: field 'coeff_seen' has {} entries, not {}", what,
            seen.size(), layers_.size());
    }
    const std::string ar(r.bytes("allreduce"));
    r.done();
    ar_->load_state(ar);
    t_ = t;
    o_.freeze_step = freeze;
    if (dev_.device >= 0) {
      dev_.m.upload(m);
      dev_.v.upload(v);
    } else {
      m_ = std::move(m);
      v_ = std::move(v);
    }
    v_fresh_ = std::move(fresh);
    coeff_freeze_ = std::move(coeff);
    last_factor_ = std::move(last_factor);
    last_coeff_ = std::move(last_coeff);
    coeff_seen_.assign(reinterpret_cast<const uint8_t*>(seen.data()),
                       reinterpret_cast<const uint8_t*>(seen.data()) + seen.size());
  }

  Communicator& comm_;
  std::vector<size_t> layers_;
  OneBitLambOptions o_;
  size_t n_ = 0;
  uint64_t t_ = 0;
  std::vector<float> m_, v_, v_fresh_, m_last_;
  std::vector<float> coeff_freeze_, last_factor_, last_coeff_;
  std::vector<uint8_t> coeff_seen_;
  DeviceState dev_;
  compress::DeviceFloats norms_;  // device: the layer norms and their partial sums
  std::unique_ptr<OneBitAllreduce> ar_;
  size_t wire_ = 0;
};

OneBitLamb::OneBitLamb(Communicator& comm, std::vector<size_t> layer_sizes,
                       OneBitLambOptions options, int device)
    : impl_(std::make_unique<Impl>(comm, std::move(layer_sizes), options, device)) {}
OneBitLamb::~OneBitLamb() = default;
void OneBitLamb::step(float* params, float* grad, void* stream) {
  impl_->step(params, grad, stream);
}
int OneBitLamb::device() const { return impl_->dev_.device; }
OneBitLambOptions& OneBitLamb::options() { return impl_->o_; }
uint64_t OneBitLamb::steps() const { return impl_->t_; }
bool OneBitLamb::compressing() const { return impl_->t_ >= impl_->o_.freeze_step; }
size_t OneBitLamb::last_wire_bytes() const { return impl_->wire_; }
size_t OneBitLamb::count() const { return impl_->n_; }
const std::vector<float>& OneBitLamb::last_coefficients() const { return impl_->last_coeff_; }
std::string OneBitLamb::save_state() const { return impl_->save(); }
void OneBitLamb::load_state(std::string_view state) { impl_->load(state); }
void OneBitLamb::reset_error_feedback() {
  if (impl_->ar_) impl_->ar_->reset_error_feedback();
}

}  // namespace gradwire
