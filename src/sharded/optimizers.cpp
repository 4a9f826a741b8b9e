// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The built-in shard optimizers: Adam/AdamW over the element formulas the
// 1-bit optimizers use (kernels/compress_math.h, Note [1-bit element math]),
// and SGD with momentum as torch.optim.SGD computes it. Each runs on one
// Bucket's shard; a Bucket of the whole model (world 1, or the unsharded
// reference of the tests) is the same code, so sharded and unsharded steps
// give the same bits wherever their gradients are the same.
#include <cmath>

#include "base/raise.h"
#include "gradwire/sharded.h"
#include "kernels/compress_math.h"

namespace gradwire {

namespace k = kernels;

ShardOptimizer::~ShardOptimizer() = default;

namespace {

void check_view(const ShardView& v, size_t states, const char* who) {
  if (v.count > 0 && (v.master == nullptr || v.grad == nullptr)) {
    raise(ErrorCode::InvalidArgument, "{}: bucket {}: null master or gradient shard", who, v.bucket);
  }
  if (v.state.size() != states) {
    raise(ErrorCode::InvalidArgument, "{}: bucket {}: {} state arrays, expected {}", who, v.bucket,
          v.state.size(), states);
  }
  if (v.step == 0) raise(ErrorCode::InvalidArgument, "{}: steps are counted from 1", who);
}

}  // namespace

// ---------------------------------------------------------------- Adam

ShardAdam::ShardAdam(AdamOptions options) : options_(options) {
  const auto& o = options_;
  if (!(o.lr >= 0) || !(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1) ||
      !(o.eps >= 0) || !(o.weight_decay >= 0)) {
    raise(ErrorCode::InvalidArgument, "ShardAdam: lr {}, betas ({}, {}), eps {}, weight_decay {}: "
          "need lr, eps, weight_decay >= 0 and betas in [0, 1)", o.lr, o.beta1, o.beta2, o.eps,
          o.weight_decay);
  }
}

std::shared_ptr<ShardAdam> ShardAdam::make(AdamOptions options) {
  return std::make_shared<ShardAdam>(options);
}

std::string ShardAdam::kind() const { return options_.decoupled ? "adamw" : "adam"; }

std::vector<std::string> ShardAdam::state_names() const { return {"exp_avg", "exp_avg_sq"}; }

void ShardAdam::step(const ShardView& v) {
  check_view(v, 2, "ShardAdam");
  const auto& o = options_;
  const float b1 = float(o.beta1), b2 = float(o.beta2);
  const float one_b1 = 1.0f - b1, one_b2 = 1.0f - b2;
  const float inv_bc1 = 1.0f / float(1.0 - std::pow(o.beta1, double(v.step)));
  const float inv_bc2 = 1.0f / float(1.0 - std::pow(o.beta2, double(v.step)));
  const float eps = float(o.eps), lr = float(o.lr), wd = float(o.weight_decay);
  const float l2 = o.decoupled ? 0.0f : wd, decay = o.decoupled ? wd : 0.0f;
  float* __restrict p = v.master;
  const float* __restrict g = v.grad;
  float* __restrict m = v.state[0];
  float* __restrict s = v.state[1];
  for (size_t i = 0; i < v.count; ++i) {
    float gi = g[i];
    if (l2 != 0.0f) gi = k::rn_add(gi, k::rn_mul(l2, p[i]));
    m[i] = k::adam_momentum(m[i], gi, b1, one_b1);
    s[i] = k::adam_variance(s[i], gi, b2, one_b2);
    const float d = k::adam_denominator(s[i], inv_bc2, eps);
    p[i] = k::apply_step(p[i], lr, k::adam_direction(m[i], inv_bc1, d, p[i], decay));
  }
}

// ---------------------------------------------------------------- SGD

ShardSgd::ShardSgd(SgdOptions options) : options_(options) {
  const auto& o = options_;
  if (!(o.lr >= 0) || !(o.momentum >= 0) || !(o.weight_decay >= 0) || !(o.dampening >= 0)) {
    raise(ErrorCode::InvalidArgument, "ShardSgd: lr {}, momentum {}, dampening {}, weight_decay "
          "{}: all must be >= 0", o.lr, o.momentum, o.dampening, o.weight_decay);
  }
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0)) {
    raise(ErrorCode::InvalidArgument, "ShardSgd: nesterov needs momentum > 0 and dampening 0");
  }
}

std::shared_ptr<ShardSgd> ShardSgd::make(SgdOptions options) {
  return std::make_shared<ShardSgd>(options);
}

std::string ShardSgd::kind() const { return options_.momentum > 0 ? "sgd_momentum" : "sgd"; }

std::vector<std::string> ShardSgd::state_names() const {
  if (options_.momentum > 0) return {"momentum_buffer"};
  return {};
}

void ShardSgd::step(const ShardView& v) {
  const auto& o = options_;
  const bool momentum = o.momentum > 0;
  check_view(v, momentum ? 1 : 0, "ShardSgd");
  const float lr = float(o.lr), wd = float(o.weight_decay), mu = float(o.momentum);
  const float damp = 1.0f - float(o.dampening);
  float* __restrict p = v.master;
  const float* __restrict g = v.grad;
  float* __restrict buf = momentum ? v.state[0] : nullptr;
  const bool first = v.step == 1;  // torch: the buffer starts as a copy of d
  for (size_t i = 0; i < v.count; ++i) {
    float d = g[i];
    if (wd != 0.0f) d = k::rn_add(d, k::rn_mul(wd, p[i]));
    if (momentum) {
      buf[i] = first ? d : k::rn_add(k::rn_mul(mu, buf[i]), k::rn_mul(damp, d));
      d = o.nesterov ? k::rn_add(d, k::rn_mul(mu, buf[i])) : buf[i];
    }
    p[i] = k::apply_step(p[i], lr, d);
  }
}

}  // namespace gradwire
