// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The PowerSGD comm hook (include/gradwire/compress.h), the mathematics of
// torch's powerSGD_hook on gradwire's Buckets and CPU kernels.
//
// Note [composite operations]: PowerSGD needs two allreduces per Bucket with
// computation between them that depends on the first one's result. Issuing
// the second allreduce from a completion callback would let ranks submit it
// at different points relative to the next Buckets' collectives, and the
// engine runs collectives in submission order, so ranks would disagree on
// the order: a hang. Instead the hook submits both operations at once, in
// Bucket order, and the second one's engine task does the in-between work
// (orthonormalise P, Q = M^T P) itself before its allreduce, and the
// decompression after it. The engine runs the first to completion before
// the second starts, so the data dependency holds, and every rank's sequence
// of collectives is the same.
//
// Scaling: the Reducer divides gradients by the world size before the hook,
// so sums over ranks are averages. P and Q are linear in M, so P = M Q summed
// is (mean M) Q, the same matrix torch gets after its division (and P is
// orthonormalised anyway). The error buffers hold values in the divided
// scale: this rank's input x (its gradient / world plus its error) against
// its share of the result, M_hat / world. (Comparing x with M_hat itself,
// as an earlier version did, subtracts world x the average every step: the
// error then grows without bound and SGD with momentum diverged, 89 % -> 64 %
// on Fashion-MNIST; Adam's per-element normalisation hid most of it.)
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>

#include "base/state_io.h"
#include "base/raise.h"
#include "base/logging.h"
#include "gradwire/compress.h"
#include "compress/lowrank_ops.h"
#include "kernels/cpu/compress.h"

namespace gradwire {
namespace {

// A compressed gradient: its matrix view and where its P and Q live.
struct Matrix {
  size_t offset = 0;  // elements into the Bucket
  size_t rows = 0, cols = 0, rank = 0;
  size_t p_offset = 0, q_offset = 0;  // into P memory (rank x rows), Q memory (rank x cols)
};
struct Span {
  size_t offset = 0, elements = 0;
};

// splitmix64: a fixed, portable generator, so every rank (whatever its
// standard library) draws the same initial Q.
uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Standard normal values (Box-Muller on 53-bit uniforms).
void fill_normal(float* out, size_t n, uint64_t seed) {
  uint64_t s = seed;
  for (size_t i = 0; i < n; i += 2) {
    const double u1 = (double(splitmix(s) >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = double(splitmix(s) >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    out[i] = float(r * std::cos(2 * M_PI * u2));
    if (i + 1 < n) out[i + 1] = float(r * std::sin(2 * M_PI * u2));
  }
}

}  // namespace

// Hidden, as Reducer::Impl (src/reducer/reducer_impl.h).
class __attribute__((visibility("hidden"))) PowerSGDState::Impl {
 public:
  struct Bucket {
    // Layout (rebuilt when the Bucket's shape changes).
    size_t count = 0;
    std::vector<BucketContext::Tensor> layout;  // the tensors it was built for
    std::vector<Matrix> matrices;
    std::vector<Span> uncompressed;
    size_t uncompressed_elements = 0, p_elements = 0, q_elements = 0;
    // State kept across steps (saved). For a host Bucket it lives here; for
    // a device Bucket in `dev` (these then hold what load_state() gave
    // until the first step uploads it).
    std::vector<float> error;
    std::vector<float> q;  // Q^T of every matrix: rank rows of cols
    bool q_valid = false;
    // Per step.
    std::vector<float> comm1;  // [uncompressed tensors | P^T of every matrix]
    std::vector<float> input_copy;
    // Note [where PowerSGD's buffers live]: the same four in device memory.
    int device = -1;  // -1: the host vectors above are the state
    struct Device {
      compress::DeviceFloats error, q, comm1, input_copy, scratch;
    } dev;
    std::vector<float> q_init;  // host: a fresh random Q to upload

    float* error_p() { return device >= 0 ? dev.error.get() : error.data(); }
    float* q_p() { return device >= 0 ? dev.q.get() : q.data(); }
    float* comm1_p() { return device >= 0 ? dev.comm1.get() : comm1.data(); }
    float* input_p() { return device >= 0 ? dev.input_copy.get() : input_copy.data(); }
    void* scratch_p() { return device >= 0 ? static_cast<void*>(dev.scratch.get()) : nullptr; }
    size_t comm1_size() const { return uncompressed_elements + p_elements; }
  };

  explicit Impl(PowerSGDOptions o) : o_(o) {
    if (o_.matrix_approximation_rank < 1) {
      raise(ErrorCode::InvalidArgument, "PowerSGD: matrix_approximation_rank must be >= 1");
    }
    if (!(o_.min_compression_rate >= 0)) {
      raise(ErrorCode::InvalidArgument, "PowerSGD: min_compression_rate must be >= 0");
    }
  }

  // The Bucket's state, with its layout for this context's tensors.
  Bucket& bucket(const BucketContext& c) {
    std::lock_guard<std::mutex> lk(mu_);
    Bucket& b = buckets_[c.index];
    // The common case, every step: the same tensors as last time (compared
    // in place, nothing allocated).
    if (b.count == c.count && same_tensors(b.layout, c.tensors)) return b;
    const bool loaded = b.count != 0 && b.layout.empty();  // from load_state
    build_layout(b, c);
    if (loaded) {
      if (b.count != c.count || b.error.size() != (o_.use_error_feedback ? c.count : 0) ||
          (b.q_valid && b.q.size() != b.q_elements)) {
        raise(ErrorCode::InvalidArgument, "rank {}: PowerSGD: the loaded state of Bucket {} "
              "holds {} elements ({} error, {} Q), the Bucket has {} elements and needs {} Q "
              "(a different model or bucket plan?)", c.comm.rank(), c.index, b.count,
              b.error.size(), b.q.size(), c.count, b.q_elements);
      }
      if (!b.q_valid) b.q.assign(b.q_elements, 0.0f);
    } else {
      if (b.count != 0) {
        log().info("rank {}: PowerSGD: Bucket {} changed shape; its error and Q start afresh",
                   c.comm.rank(), c.index);
      }
      b.error.assign(o_.use_error_feedback ? c.count : 0, 0.0f);
      b.q.assign(b.q_elements, 0.0f);
      b.q_valid = false;
      b.dev = {};  // the fresh host zeros above are the state
      b.device = -1;
    }
    b.count = c.count;
    place(b, c.device.index());
    return b;
  }

  // Puts the Bucket's state where its buffers live (Note [where PowerSGD's
  // buffers live]): host vectors, or device memory on `device`, carrying
  // error and Q across (after load_state(), or when a model moved).
  void place(Bucket& b, int device) {
    const size_t ef = o_.use_error_feedback ? b.count : 0;
    if (device < 0) {
      if (b.device >= 0) {
        b.error = b.dev.error.download();
        b.q = b.dev.q.download();
        b.dev = {};
        b.device = -1;
      }
      b.comm1.resize(b.comm1_size());
      b.input_copy.resize(ef);
      return;
    }
    if (b.device == device && b.dev.comm1.size() == b.comm1_size() && b.dev.error.size() == ef &&
        b.dev.q.size() == b.q.size()) {
      return;
    }
    std::vector<float> error = b.device >= 0 ? b.dev.error.download() : b.error;
    std::vector<float> q = b.device >= 0 ? b.dev.q.download() : b.q;
    error.resize(ef, 0.0f);
    q.resize(b.q_elements, 0.0f);
    b.dev.error = compress::DeviceFloats(device, ef);
    b.dev.q = compress::DeviceFloats(device, q.size());
    b.dev.comm1 = compress::DeviceFloats(device, b.comm1_size());
    b.dev.input_copy = compress::DeviceFloats(device, ef);
    b.dev.scratch = compress::DeviceFloats(
        device, (compress::device_scratch_bytes() + sizeof(float) - 1) / sizeof(float));
    b.dev.error.upload(error);
    b.dev.q.upload(q);
    b.device = device;
    // The device copy is the state now; the host vectors keep only their
    // sizes' meaning for save() (which downloads).
    b.error.assign(ef, 0.0f);
    b.q.assign(q.size(), 0.0f);
    b.comm1.clear();
    b.input_copy.clear();
  }

  static bool same_tensors(const std::vector<BucketContext::Tensor>& a,
                           const std::vector<BucketContext::Tensor>& b) {
    if (a.empty() || a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].offset != b[i].offset || a[i].rows != b[i].rows || a[i].cols != b[i].cols) return false;
    }
    return true;
  }

  void build_layout(Bucket& b, const BucketContext& c) {
    b.layout = c.tensors;
    b.matrices.clear();
    b.uncompressed.clear();
    b.uncompressed_elements = b.p_elements = b.q_elements = 0;
    for (const auto& t : c.tensors) {
      if (t.elements == 0) continue;
      const size_t rank = std::min({t.rows, t.cols, o_.matrix_approximation_rank});
      const double uncompressed = double(t.rows) * double(t.cols);
      const double compressed = double(t.rows + t.cols) * double(rank);
      if (compressed * o_.min_compression_rate < uncompressed) {
        b.matrices.push_back({t.offset, t.rows, t.cols, rank, b.p_elements, b.q_elements});
        b.p_elements += rank * t.rows;
        b.q_elements += rank * t.cols;
      } else {
        b.uncompressed.push_back({t.offset, t.elements});
        b.uncompressed_elements += t.elements;
      }
    }
  }

  // torch's state.iter: the number of synchronised steps this state has
  // seen before the current one. Kept here (and saved) rather than taken
  // from the Reducer's step, so a state loaded into a new Reducer resumes
  // its schedule (start_powersgd_iter, the random seeds) where it stopped.
  uint64_t iteration(const BucketContext& c) {
    std::lock_guard<std::mutex> lk(mu_);
    if (!have_step_ || c.step != step_key_) {
      have_step_ = true;
      step_key_ = c.step;
      iter_ = steps_seen_++;
    }
    return iter_;
  }

  // Note [composite operations] and [where PowerSGD's buffers live]: one
  // orchestration for host and device Buckets.
  //  stage 1 (the hook's thread; on a device Bucket, on its stream): error
  //    feedback in, P = M Q, the uncompressed tensors beside P;
  //  allreduce of [uncompressed | P];
  //  stage 2 (before the second allreduce, where it runs): the averaged
  //    uncompressed tensors out, orthonormalise P, Q = M^T P;
  //  allreduce of Q;
  //  stage 3 (after it): M = P Q^T, the new error.
  // Without matrices there is no Q: stages 2 and 3 follow the first
  // allreduce.
  Work run(BucketContext& c, uint64_t iter) {
    Bucket& b = bucket(c);
    float* buf = static_cast<float*>(c.buffer);
    const size_t n = c.count;
    std::unique_ptr<compress::LowRankOps> device_ops;
    if (b.device >= 0) device_ops = compress::device_ops(b.device, c.stream.native(), b.scratch_p());
    compress::LowRankOps& ops = device_ops ? *device_ops : compress::host_ops();
    if (o_.use_error_feedback) {
      ops.add(buf, b.error_p(), n);
      ops.copy(b.input_p(), buf, n);
    }
    uint64_t before = 0, after = 0;
    for (const Matrix& m : b.matrices) {
      before += m.rows * m.cols;
      after += (m.rows + m.cols) * m.rank;
    }
    before += b.uncompressed_elements;
    after += b.uncompressed_elements;
    numel_before_ += before;
    numel_after_ += after;

    // Q: random on the first compressed step (or every step without warm
    // start), else last step's; orthonormalised either way, as torch does.
    // Drawn on the host (the same generator on every rank and device).
    if (!o_.warm_start || !b.q_valid) {
      uint64_t seed = o_.random_seed ^ (iter * 0x9e3779b97f4a7c15ull) ^ (uint64_t(c.index) << 40);
      b.q_init.resize(b.q_elements);
      fill_normal(b.q_init.data(), b.q_init.size(), splitmix(seed));
      ops.upload(b.q_p(), b.q_init.data(), b.q_init.size());
      b.q_valid = true;
    }
    float* comm1 = b.comm1_p();
    float* p_mem = comm1 + b.uncompressed_elements;
    float* q_mem = b.q_p();
    for (const Matrix& m : b.matrices) {
      float* qt = q_mem + m.q_offset;
      ops.orthonormalize(qt, m.rank, m.cols, o_.orthogonalization_epsilon);
      ops.project(buf + m.offset, m.rows, m.cols, qt, m.rank, p_mem + m.p_offset);
    }
    size_t at = 0;
    for (const Span& s : b.uncompressed) {
      ops.copy(comm1 + at, buf + s.offset, s.elements);
      at += s.elements;
    }

    const std::string detail = fmt::format("PowerSGD Bucket {}, {} matrices, rank {}", c.index,
                                           b.matrices.size(), o_.matrix_approximation_rank);
    Bucket* bp = &b;
    const PowerSGDOptions o = o_;
    auto stage2 = [bp, buf, o](compress::LowRankOps& ops) {
      Bucket& b = *bp;
      float* comm1 = b.comm1_p();
      size_t at = 0;
      for (const Span& s : b.uncompressed) {
        ops.copy(buf + s.offset, comm1 + at, s.elements);
        at += s.elements;
      }
      float* p_mem = comm1 + b.uncompressed_elements;
      for (const Matrix& m : b.matrices) {
        float* pt = p_mem + m.p_offset;
        ops.orthonormalize(pt, m.rank, m.rows, o.orthogonalization_epsilon);
        ops.project_transposed(buf + m.offset, m.rows, m.cols, pt, m.rank, b.q_p() + m.q_offset);
      }
    };
    auto stage3 = [bp, buf, n, o](compress::LowRankOps& ops, int world) {
      Bucket& b = *bp;
      const float* p_mem = b.comm1_p() + b.uncompressed_elements;
      for (const Matrix& m : b.matrices) {
        ops.expand(p_mem + m.p_offset, b.q_p() + m.q_offset, m.rows, m.cols, m.rank,
                   buf + m.offset);
      }
      if (o.use_error_feedback) {
        // Note at the top: the divided scale.
        ops.residual(b.input_p(), buf, 1.0f / float(world), n, b.error_p());
      }
    };
    if (!o_.warm_start) b.q_valid = false;  // the next step draws again
    const bool has_q = b.q_elements > 0;
    const int world = c.comm.size();
    if (b.device >= 0) {
      // Note [device steps]: stages 2 and 3 on the device path's stream.
      const int dev = b.device;
      auto steps_of = [dev, bp](auto fn) {
        return [dev, bp, fn](Stream stream) {
          auto ops = compress::device_ops(dev, stream.native(), bp->scratch_p());
          fn(*ops);
        };
      };
      DeviceSteps first;
      if (!has_q) {
        first.after = steps_of([stage2, stage3, world](compress::LowRankOps& ops) {
          stage2(ops);
          stage3(ops, world);
        });
      }
      Work w = c.comm.allreduce(comm1, comm1, b.comm1_size(), DataType::Float32, ReduceOp::Sum,
                                std::move(first));
      if (!has_q) return w;
      DeviceSteps second;
      second.before = steps_of(stage2);
      second.after = steps_of([stage3, world](compress::LowRankOps& ops) { stage3(ops, world); });
      return c.comm.allreduce(b.q_p(), b.q_p(), b.q_elements, DataType::Float32, ReduceOp::Sum,
                              std::move(second));
    }
    // Note [composite operations]: internal exchanges; the ranks'
    // fingerprints of the Bucket's own allreduce already covered them.
    const size_t n1 = b.comm1_size();
    c.comm.compose("allreduce", detail + ": P and uncompressed tensors",
                   [bp, n1](CompositeSteps& steps) {
                     steps.allreduce(bp->comm1_p(), bp->comm1_p(), n1, DataType::Float32,
                                     ReduceOp::Sum);
                   });
    return c.comm.compose("allreduce", detail + ": Q",
                          [bp, stage2, stage3](CompositeSteps& steps) {
      compress::LowRankOps& ops = compress::host_ops();
      stage2(ops);
      steps.allreduce(bp->q_p(), bp->q_p(), bp->q_elements, DataType::Float32, ReduceOp::Sum);
      stage3(ops, steps.size());
    });
  }

  std::string save() const {
    std::lock_guard<std::mutex> lk(mu_);
    compress::StateWriter w("PowerSGD");
    w.u64("rank", o_.matrix_approximation_rank);
    w.u64("error_feedback", o_.use_error_feedback);
    w.u64("numel_before", numel_before_);
    w.u64("numel_after", numel_after_);
    w.u64("steps_seen", steps_seen_);
    w.u64("buckets", buckets_.size());
    for (const auto& [index, b] : buckets_) {
      w.u64("index", index);
      w.u64("count", b.count);
      // Device-independent: a device Bucket's state comes to the host.
      const bool dev = b.device >= 0;
      w.floats("error", dev ? b.dev.error.download() : b.error);
      w.u64("q_valid", b.q_valid);
      w.floats("q", b.q_valid ? (dev ? b.dev.q.download() : b.q) : std::vector<float>{});
    }
    return w.finish();
  }

  void load(std::string_view state) {
    compress::StateReader r(state, "PowerSGD", "PowerSGDState::load_state");
    const uint64_t rank = r.u64("rank"), ef = r.u64("error_feedback");
    if (rank != o_.matrix_approximation_rank || bool(ef) != o_.use_error_feedback) {
      raise(ErrorCode::InvalidArgument, "PowerSGDState::load_state: the state was saved with "
            "matrix_approximation_rank {} and use_error_feedback {}, these options have {} and {}",
            rank, bool(ef), o_.matrix_approximation_rank, o_.use_error_feedback);
    }
    const uint64_t before = r.u64("numel_before"), after = r.u64("numel_after");
    const uint64_t steps_seen = r.u64("steps_seen");
    const uint64_t count = r.u64("buckets");
    std::map<size_t, Bucket> loaded;
    for (uint64_t k = 0; k < count; ++k) {
      const uint64_t index = r.u64("index");
      Bucket& b = loaded[index];
      b.count = r.u64("count");
      b.error = r.floats("error", r.peek_size("error") / sizeof(float));
      b.q_valid = r.u64("q_valid") != 0;
      b.q = r.floats("q", r.peek_size("q") / sizeof(float));
      // The layout is rebuilt at first use and checked against
      // these sizes there (Impl::bucket).
    }
    r.done();
    std::lock_guard<std::mutex> lk(mu_);
    buckets_ = std::move(loaded);
    numel_before_ = before;
    numel_after_ = after;
    steps_seen_ = steps_seen;
    have_step_ = false;
  }

  PowerSGDOptions o_;
  mutable std::mutex mu_;
  std::map<size_t, Bucket> buckets_;  // nodes are stable: engine tasks keep pointers
  std::atomic<uint64_t> numel_before_{0}, numel_after_{0};
  uint64_t steps_seen_ = 0, iter_ = 0, step_key_ = 0;  // guarded by mu_
  bool have_step_ = false;
};

PowerSGDState::PowerSGDState(PowerSGDOptions options) : impl_(std::make_unique<Impl>(options)) {}
PowerSGDState::~PowerSGDState() = default;
const PowerSGDOptions& PowerSGDState::options() const { return impl_->o_; }
uint64_t PowerSGDState::numel_before_compression() const { return impl_->numel_before_; }
uint64_t PowerSGDState::numel_after_compression() const { return impl_->numel_after_; }
std::string PowerSGDState::save_state() const { return impl_->save(); }
void PowerSGDState::load_state(std::string_view state) { impl_->load(state); }
void PowerSGDState::reset_error_feedback() {
  for (auto& [index, b] : impl_->buckets_) {
    std::fill(b.error.begin(), b.error.end(), 0.0f);
    if (b.device >= 0) b.dev.error.zero();
  }
}

CommHook powersgd_hook(std::shared_ptr<PowerSGDState> state) {
  if (!state) raise(ErrorCode::InvalidArgument, "powersgd_hook: the state is null");
  CommHook plain = allreduce_hook();
  return [state, plain](BucketContext& c) -> Work {
    const uint64_t iter = state->impl_->iteration(c);
    if (c.dtype != DataType::Float32 || c.count == 0 ||
        iter < state->options().start_powersgd_iter) {
      return plain(c);
    }
    return state->impl_->run(c, iter);
  };
}

}  // namespace gradwire
