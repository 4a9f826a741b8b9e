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
//
// Note [one 1-bit orchestration]: everything the two optimizers share is
// written once, in OneBitOptimizer::Impl: the two stages above, the step
// counter, the wire-byte count, the choice between host loops and device
// kernels, and the state's framing (count, units, step, moments, error
// buffers). AdamImpl and LambImpl supply only what their math adds: the
// update from the averaged momentum (Adam's, or LAMB's per-layer
// coefficients with its frozen-coefficient variant), and their own state
// fields.
//
// Note [1-bit optimizers under elastic generations]: when an elastic job's
// membership changes (gradwire/elastic.h), the optimizer moves to the new
// generation's communicator (rebind()) and restores the committed state.
// What carries over exactly, and why it can: the moments (m is the
// compressed average, the same bits on every rank; v is exact or frozen,
// the same everywhere), the step counter (so the stage: the warm-up or the
// frozen variance with its frozen bias correction goes on where it was),
// freeze_step, and LAMB's coefficients (running average, last factors and
// coefficients, the frozen variant's fresh variance). None of them depends
// on the world size, and they are replicated, so one rank's copy (the
// commit a survivor broadcasts: save_replicated_state()) is every rank's.
// What restarts at zero: both error-feedback buffers. The server's holds
// the residual of chunk `rank` of a layout cut for the old world size
// (Note [1-bit layout]), and after a change the ranks are renumbered, so
// it belongs to no chunk of the new layout. The worker's has the right
// size but the wrong meaning: it is this rank's residual owed to an average
// over the old members, whose other halves (the lost rank's worker
// residual, every server residual) are gone, so the error-feedback
// invariant cannot be kept anyway; and a joiner has none. Dropping them
// costs at most one step's compression error (each element's residual is
// below one scale), as PowerSGD's joiner reset; in return every member,
// survivor or joiner, continues from the same state, a function of the
// commit alone, and no per-rank buffers need committing.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>

#include "base/state_io.h"
#include "base/raise.h"
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

#if GRADWIRE_HAVE_CUDA
namespace cu = kernels::cuda;
#endif

// Bytes this rank sends in a ring allreduce of `bytes` over `world` ranks
// (reduce-scatter + allgather: 2 (world-1)/world of the buffer).
size_t ring_allreduce_bytes(size_t bytes, size_t world) {
  return world <= 1 ? 0 : 2 * (world - 1) * ((bytes + world - 1) / world);
}

float correction(float beta, uint64_t t, bool enabled) {
  return enabled ? float(1.0 - std::pow(double(beta), double(t))) : 1.0f;
}

double norm(const float* x, size_t n) {
  double s = 0;  // one fixed order: identical on every rank
  for (size_t i = 0; i < n; ++i) s += double(x[i]) * x[i];
  return std::sqrt(s);
}

// The error buffers' units depend on precondition_compression.
void check_units(uint64_t saved, bool now, const std::string& what) {
  if (bool(saved) != now) {
    raise(ErrorCode::InvalidArgument, "{}: the state was saved with precondition_compression = {}, "
          "these options have {} (the error buffers would be in the wrong units)", what,
          bool(saved), now);
  }
}

// Refuses what can never work, before anything is allocated; returns n.
size_t checked_count(const Communicator& comm, const char* who, size_t n, int device) {
  // The same count on every rank is the caller's contract (as for any
  // collective); the warm-up's allreduce would catch a mismatch only as a
  // Mismatch/timeout, so at least refuse what can never work.
  if (n == 0) {
    raise(ErrorCode::InvalidArgument, "rank {}: {}: there are no parameters (count 0)",
          comm.rank(), who);
  }
#if !GRADWIRE_HAVE_CUDA
  if (device >= 0) {
    raise(ErrorCode::InvalidArgument, "{}: device {} was asked for, but this gradwire was built "
          "without CUDA", who, device);
  }
#else
  (void)device;
#endif
  return n;
}

}  // namespace

// ---------------------------------------------------------------- the orchestration

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

// Both optimizers' stages, counters, state framing and host/device choice
// (Note [one 1-bit orchestration]); the subclasses below add their math.
// Hidden, as Reducer::Impl (src/reducer/reducer_impl.h).
class __attribute__((visibility("hidden"))) OneBitOptimizer::Impl {
 public:
  // What the update of one step needs besides the moments.
  struct Step {
    bool warmup;           // the gradient was averaged exactly (else: m was, compressed)
    float inv_bc1, inv_bc2;  // 1 / the moments' bias corrections
  };

  Impl(Communicator& comm, size_t n, int device, const char* who)
      : comm_(&comm), who_(who), n_(checked_count(comm, who, n, device)),
        device_(device), ar_(comm, n, Device::cuda(device)) {
    if (device < 0) {
      m_.assign(n, 0.0f);
      v_.assign(n, 0.0f);
    } else {
      dev_m_ = compress::DeviceFloats(device, n);
      dev_v_ = compress::DeviceFloats(device, n);
      dev_m_.zero();
      dev_v_.zero();
    }
  }
  virtual ~Impl() = default;

  // The derived class's options, of which this part is shared.
  virtual OneBitOptions& options() = 0;
  const OneBitOptions& options() const { return const_cast<Impl*>(this)->options(); }

  // Note [1-bit optimizer stages].
  void step(float* p, float* g, void* stream) {
    const OneBitOptions& o = options();
#if GRADWIRE_HAVE_CUDA
    std::optional<device::DeviceGuard> guard;
    if (device_ >= 0) guard.emplace(device_);
#endif
    const uint64_t t = t_ + 1;
    Step s;
    s.warmup = t_ < o.freeze_step;
    s.inv_bc1 = 1.0f / correction(o.beta1, t, o.bias_correction);
    // The variance's correction freezes with the variance.
    s.inv_bc2 = 1.0f / correction(o.beta2, s.warmup ? t : std::max<uint64_t>(o.freeze_step, 1),
                                  o.bias_correction);
    if (s.warmup) {
      warmup_moments(g, stream);
      wire_ = ring_allreduce_bytes(n_ * sizeof(float), size_t(comm_->size()));
    } else {
      before_compression();
      compressed_momentum(g, s.inv_bc2, stream);
      wire_ = ar_.wire_bytes();
    }
    if (device_ >= 0) {
      update_device(p, g, s, stream);
    } else {
      update(p, g, s);
    }
    t_ = t;
  }

  // error_feedback false: the replicated state (Note [1-bit optimizers
  // under elastic generations]): the "allreduce" field is left empty.
  std::string save(bool error_feedback = true) const {
    const OneBitOptions& o = options();
    compress::StateWriter w(who_);
    w.u64("count", n_);
    w.u64("preconditioned", o.precondition_compression);
    save_shape(w);
    w.u64("step", t_);
    w.u64("freeze_step", o.freeze_step);
    w.floats("exp_avg", device_ >= 0 ? dev_m_.download() : m_);
    w.floats("exp_avg_sq", device_ >= 0 ? dev_v_.download() : v_);
    save_extra(w);
    const std::string ar = error_feedback ? ar_.save_state() : std::string();
    w.bytes("allreduce", ar.data(), ar.size());
    return w.finish();
  }

  void load(std::string_view state) {
    const std::string what = fmt::format("rank {}: {}::load_state", comm_->rank(), who_);
    compress::StateReader r(state, who_, what);
    const uint64_t n = r.u64("count");
    check_units(r.u64("preconditioned"), options().precondition_compression, what);
    load_shape(r, n, what);
    const uint64_t t = r.u64("step");
    const uint64_t freeze = r.u64("freeze_step");
    auto m = r.floats("exp_avg", n_);
    auto v = r.floats("exp_avg_sq", n_);
    const std::function<void()> commit_extra = load_extra(r, what);
    const std::string ar(r.bytes("allreduce"));
    r.done();
    // A replicated state (save_replicated_state) carries no error feedback:
    // it restarts at zero. Otherwise this validates before anything below
    // changes.
    if (ar.empty()) ar_.reset_error_feedback();
    else ar_.load_state(ar);
    t_ = t;
    options().freeze_step = freeze;
    if (device_ >= 0) {
      dev_m_.upload(m);
      dev_v_.upload(v);
    } else {
      m_ = std::move(m);
      v_ = std::move(v);
    }
    if (commit_extra) commit_extra();
  }

  Communicator* comm_;  // another one after rebind()
  const char* const who_;  // the class, in messages and as the state's kind
  const size_t n_;
  const int device_;
  uint64_t t_ = 0;
  std::vector<float> m_, v_;              // the moments in host memory (device < 0)
  compress::DeviceFloats dev_m_, dev_v_;  // or on the device
  OneBitAllreduce ar_;
  size_t wire_ = 0;

 protected:
  // What the optimizer's math adds. Compression stage, before the local
  // gradient enters m (which still holds the last averaged momentum).
  virtual void before_compression() {}
  // p -= the update from the moments; g is scratch (n floats). In host
  // memory, or enqueued on `stream` for a device optimizer.
  virtual void update(float* p, float* g, const Step& s) = 0;
  virtual void update_device(float* p, float* g, const Step& s, void* stream) = 0;
  // The optimizer's state fields: the shape right after "preconditioned"
  // (load_shape reads and checks it against this optimizer; n: the saved
  // count), the rest after the moments (load_extra reads them and returns
  // what stores them once the whole state is known to be good).
  virtual void save_shape(compress::StateWriter&) const {}
  virtual void load_shape(compress::StateReader& r, uint64_t n, const std::string& what) = 0;
  virtual void save_extra(compress::StateWriter&) const {}
  virtual std::function<void()> load_extra(compress::StateReader&, const std::string&) {
    return {};
  }

 private:
  // Warm-up: g <- the exact average over the ranks; the moments take it in.
  void warmup_moments(float* g, void* stream) {
    const OneBitOptions& o = options();
    const bool single = comm_->size() == 1;
    const float inv_world = 1.0f / float(comm_->size());
    if (device_ >= 0) {
#if GRADWIRE_HAVE_CUDA
      if (!single) {
        {
          DeviceStreamScope scope{Stream(stream)};
          comm_->allreduce(g, g, n_, DataType::Float32, ReduceOp::Sum).wait();
        }
        cu::scale(g, n_, inv_world, stream);
      }
      cu::adam_moments(dev_m_.get(), dev_v_.get(), g, n_, o.beta1, o.beta2, stream);
#endif
      return;
    }
    if (!single) {
      comm_->allreduce(g, g, n_, DataType::Float32, ReduceOp::Sum).wait();
      for (size_t i = 0; i < n_; ++i) g[i] = kernels::rn_mul(g[i], inv_world);
    }
    for (size_t i = 0; i < n_; ++i) {
      m_[i] = kernels::adam_momentum(m_[i], g[i], o.beta1, 1.0f - o.beta1);
      v_[i] = kernels::adam_variance(v_[i], g[i], o.beta2, 1.0f - o.beta2);
    }
  }

  // Compression stage: the local g into m, then m <- its compressed average
  // over the ranks (Note [preconditioned 1-bit compression], Note [the
  // momentum clip]); g holds the denominators meanwhile.
  void compressed_momentum(float* g, float inv_bc2, void* stream) {
    const OneBitOptions& o = options();
    const bool precondition = o.precondition_compression;
    const float hi = o.momentum_clip > 0 ? o.momentum_clip : std::numeric_limits<float>::infinity();
    if (device_ >= 0) {
#if GRADWIRE_HAVE_CUDA
      float* m = dev_m_.get();
      cu::adam_momentum(m, g, n_, o.beta1, stream);
      cu::onebit_prepare(m, dev_v_.get(), g, n_, inv_bc2, o.eps, hi, precondition, stream);
      ar_.run(m, Stream(stream));
      if (precondition) cu::multiply(m, g, n_, stream);
#endif
      return;
    }
    for (size_t i = 0; i < n_; ++i) m_[i] = kernels::adam_momentum(m_[i], g[i], o.beta1, 1.0f - o.beta1);
    for (size_t i = 0; i < n_; ++i) {
      g[i] = kernels::adam_denominator(v_[i], inv_bc2, o.eps);
      m_[i] = kernels::onebit_send_value(m_[i], g[i], hi, precondition);
    }
    ar_.run(m_.data());
    if (precondition) {
      for (size_t i = 0; i < n_; ++i) m_[i] = kernels::rn_mul(m_[i], g[i]);
    }
  }
};

OneBitOptimizer::OneBitOptimizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OneBitOptimizer::~OneBitOptimizer() = default;
void OneBitOptimizer::step(float* params, float* grad, Stream stream) {
  impl_->step(params, grad, stream.native());
}
Device OneBitOptimizer::device() const { return Device::cuda(impl_->device_); }
OneBitOptions& OneBitOptimizer::options() { return impl_->options(); }
uint64_t OneBitOptimizer::steps() const { return impl_->t_; }
bool OneBitOptimizer::compressing() const { return impl_->t_ >= impl_->options().freeze_step; }
size_t OneBitOptimizer::last_wire_bytes() const { return impl_->wire_; }
size_t OneBitOptimizer::count() const { return impl_->n_; }
std::string OneBitOptimizer::save_state() const { return impl_->save(); }
std::string OneBitOptimizer::save_replicated_state() const { return impl_->save(false); }
void OneBitOptimizer::rebind(Communicator& comm) {
  // Note [1-bit optimizers under elastic generations]: a fresh allreduce
  // laid out for comm's world, its error buffers at zero.
  impl_->ar_ = OneBitAllreduce(comm, impl_->n_, Device::cuda(impl_->device_));
  impl_->comm_ = &comm;
}
void OneBitOptimizer::load_state(std::string_view state) { impl_->load(state); }
void OneBitOptimizer::reset_error_feedback() { impl_->ar_.reset_error_feedback(); }

// ---------------------------------------------------------------- 1-bit Adam

namespace {

class AdamImpl final : public OneBitOptimizer::Impl {
 public:
  AdamImpl(Communicator& comm, size_t n, const OneBitAdamOptions& o, int device)
      : Impl(comm, n, device, "OneBitAdam"), o_(o) {}

  OneBitAdamOptions& options() override { return o_; }

 private:
  void update(float* p, float*, const Step& s) override {
    for (size_t i = 0; i < n_; ++i) {
      const float d = kernels::adam_denominator(v_[i], s.inv_bc2, o_.eps);
      p[i] = kernels::apply_step(p[i], o_.lr,
                                 kernels::adam_direction(m_[i], s.inv_bc1, d, p[i], o_.weight_decay));
    }
  }

  void update_device(float* p, float* g, const Step& s, void* stream) override {
#if GRADWIRE_HAVE_CUDA
    cu::adam_direction(g, dev_m_.get(), dev_v_.get(), p, n_, s.inv_bc1, s.inv_bc2, o_.eps,
                       o_.weight_decay, o_.lr, stream);
#else
    (void)p, (void)g, (void)s, (void)stream;
#endif
  }

  void load_shape(compress::StateReader&, uint64_t n, const std::string& what) override {
    if (n != n_) {
      raise(ErrorCode::InvalidArgument, "{}: the state is for {} parameters, this optimizer has {}",
            what, n, n_);
    }
  }

  OneBitAdamOptions o_;
};

}  // namespace

OneBitAdam::OneBitAdam(Communicator& comm, size_t count, OneBitAdamOptions options,
                       Device device)
    : OneBitOptimizer(std::make_unique<AdamImpl>(comm, count, options, device.index())) {}
OneBitAdam::~OneBitAdam() = default;
OneBitAdamOptions& OneBitAdam::options() { return static_cast<AdamImpl&>(*impl_).options(); }

// ---------------------------------------------------------------- 1-bit LAMB

namespace {

class LambImpl final : public OneBitOptimizer::Impl {
 public:
  LambImpl(Communicator& comm, std::vector<size_t> layers, const OneBitLambOptions& o, int device)
      : Impl(comm, checked_total(comm, layers, o, device), device, "OneBitLamb"),
        layers_(std::move(layers)), o_(o) {
    coeff_freeze_.assign(layers_.size(), 0.0f);
    coeff_seen_.assign(layers_.size(), 0);
    last_factor_.assign(layers_.size(), 1.0f);
    last_coeff_.assign(layers_.size(), 1.0f);
  }

  OneBitLambOptions& options() override { return o_; }
  const std::vector<float>& last_coefficients() const { return last_coeff_; }

 private:
  // The parameter count; refuses the frozen-coefficient variant on a device.
  static size_t checked_total(const Communicator& comm, const std::vector<size_t>& layers,
                              const OneBitLambOptions& o, int device) {
    if (device >= 0 && !(o.live_coefficients && o.precondition_compression)) {
      raise(ErrorCode::InvalidArgument, "rank {}: OneBitLamb on CUDA device {} runs the default "
            "variant (live_coefficients and precondition_compression); the papers' frozen "
            "coefficients are implemented on the CPU only: keep the defaults, or keep the "
            "parameters in host memory", comm.rank(), device);
    }
    size_t n = 0;
    for (size_t s : layers) n += s;
    return n;
  }

  // Note [live LAMB coefficients]: with the preconditioned compression only.
  bool live_mode() const { return o_.live_coefficients && o_.precondition_compression; }

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

  void before_compression() override {
    if (live_mode()) return;
    if (v_fresh_.empty()) v_fresh_ = v_;  // the first compression step
    m_last_ = m_;
  }

  void update(float* p, float* g, const Step& s) override {
    const float b1 = o_.beta1, b2 = o_.beta2, eps = o_.eps, wd = o_.weight_decay;
    const bool frozen = !s.warmup && !live_mode();
    // g is scratch from here on: it receives the update.
    size_t first = 0;
    for (size_t l = 0; l < layers_.size(); ++l) {
      const size_t len = layers_[l];
      float* u = g + first;
      const float* pl = p + first;
      double prelim_sq = 0;
      float factor = 0.0f;  // compression: max over elements of denom / denom_real
      for (size_t i = first; i < first + len; ++i) {
        const float denom = kernels::adam_denominator(v_[i], s.inv_bc2, eps);
        float x = kernels::adam_direction(m_[i], s.inv_bc1, denom, p[i], 0.0f);
        if (frozen) {
          // The global gradient the averaged momentum implies, folded into a
          // fresh variance estimate to see how far the frozen one is off.
          const float gr = (m_[i] - b1 * m_last_[i]) / (1.0f - b1);
          v_fresh_[i] = b2 * v_fresh_[i] + (1.0f - b2) * gr * gr;
          factor = std::max(factor, denom / (std::sqrt(v_fresh_[i] * s.inv_bc2) + eps));
          prelim_sq += double(x) * x;
        }
        if (wd != 0.0f) x = kernels::rn_add(x, kernels::rn_mul(wd, p[i]));
        u[i - first] = x;
      }
      const double update_norm = norm(u, len);
      float coeff = 1.0f;
      if (!frozen) {
        // LAMB's trust ratio, ||p|| / ||u||. In the compression stage u is
        // the averaged momentum over the frozen variance (Note [live LAMB
        // coefficients]): the same on every rank, and so is the ratio. The
        // warm-up keeps a running average of it, started from the first one
        // (DeepSpeed starts from 0, which biases short warm-ups low).
        coeff = live_coefficient(l, s.warmup, norm(pl, len), update_norm);
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
  }

  // Note [1-bit optimizers on a device] (live coefficients only).
  void update_device(float* p, float* g, const Step& s, void* stream) override {
#if GRADWIRE_HAVE_CUDA
    // g receives the update; then every layer's two norms, in one batch.
    cu::adam_direction(g, dev_m_.get(), dev_v_.get(), p, n_, s.inv_bc1, s.inv_bc2, o_.eps,
                       o_.weight_decay, 0.0f, stream);
    const size_t layers = layers_.size();
    if (norms_.size() != 2 * (2 * layers + cu::onebit_partials())) {
      norms_ = compress::DeviceFloats(device_, 2 * (2 * layers + cu::onebit_partials()));
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
    const auto cs = static_cast<cudaStream_t>(stream);
    cudaError_t err = cudaMemcpyAsync(host.data(), sums, host.size() * sizeof(double),
                                      cudaMemcpyDeviceToHost, cs);
    if (err == cudaSuccess) err = cudaStreamSynchronize(cs);
    if (err != cudaSuccess) {
      cudaGetLastError();
      raise(ErrorCode::Internal, "rank {}: OneBitLamb on CUDA device {}: reading the layer norms "
            "failed: {}", comm_->rank(), device_, cudaGetErrorString(err));
    }
    first = 0;
    for (size_t l = 0; l < layers; ++l) {
      const float coeff = live_coefficient(l, s.warmup, std::sqrt(host[2 * l + 1]),
                                           std::sqrt(host[2 * l]));
      last_coeff_[l] = coeff;
      cu::apply_step(p + first, g + first, layers_[l], o_.lr * coeff, stream);
      first += layers_[l];
    }
#else
    (void)p, (void)g, (void)s, (void)stream;
#endif
  }

  void save_shape(compress::StateWriter& w) const override {
    w.u64("layers", layers_.size());
    w.bytes("layer_sizes", layers_.data(), layers_.size() * sizeof(size_t));
  }

  void load_shape(compress::StateReader& r, uint64_t n, const std::string& what) override {
    const uint64_t layers = r.u64("layers");
    const auto sizes = r.bytes("layer_sizes");
    if (n != n_ || layers != layers_.size() || sizes.size() != layers_.size() * sizeof(size_t) ||
        std::memcmp(sizes.data(), layers_.data(), sizes.size()) != 0) {
      raise(ErrorCode::InvalidArgument, "{}: the state is for {} parameters in {} layers, this "
            "optimizer has {} in {} (or the layer sizes differ)", what, n, layers, n_, layers_.size());
    }
  }

  void save_extra(compress::StateWriter& w) const override {
    w.floats("exp_avg_sq_fresh", v_fresh_);
    w.floats("coeff_freeze", coeff_freeze_);
    w.floats("last_factor", last_factor_);
    w.floats("last_coeff", last_coeff_);
    w.bytes("coeff_seen", coeff_seen_.data(), coeff_seen_.size());
  }

  std::function<void()> load_extra(compress::StateReader& r, const std::string& what) override {
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
    const auto* seen_bytes = reinterpret_cast<const uint8_t*>(seen.data());
    return [this, fresh = std::move(fresh), coeff = std::move(coeff),
            last_factor = std::move(last_factor), last_coeff = std::move(last_coeff),
            seen = std::vector<uint8_t>(seen_bytes, seen_bytes + seen.size())]() mutable {
      v_fresh_ = std::move(fresh);
      coeff_freeze_ = std::move(coeff);
      last_factor_ = std::move(last_factor);
      last_coeff_ = std::move(last_coeff);
      coeff_seen_ = std::move(seen);
    };
  }

  std::vector<size_t> layers_;
  OneBitLambOptions o_;
  std::vector<float> v_fresh_, m_last_;  // the frozen-coefficient variant (host)
  std::vector<float> coeff_freeze_, last_factor_, last_coeff_;
  std::vector<uint8_t> coeff_seen_;
  compress::DeviceFloats norms_;  // device: the layer norms and their partial sums
};

}  // namespace

OneBitLamb::OneBitLamb(Communicator& comm, std::vector<size_t> layer_sizes,
                       OneBitLambOptions options, Device device)
    : OneBitOptimizer(std::make_unique<LambImpl>(comm, std::move(layer_sizes), options,
                                                 device.index())) {}
OneBitLamb::~OneBitLamb() = default;
OneBitLambOptions& OneBitLamb::options() { return static_cast<LambImpl&>(*impl_).options(); }
const std::vector<float>& OneBitLamb::last_coefficients() const {
  return static_cast<const LambImpl&>(*impl_).last_coefficients();
}

}  // namespace gradwire
