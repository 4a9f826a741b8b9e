// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// 1-bit Adam / 1-bit LAMB as torch::optim optimizers (gradwire/torch/optim.h):
// the parameters and gradients are gathered into flat float32 buffers, the
// core optimizer steps them, and the parameters are written back.
#include "gradwire/torch/optim.h"

#include <torch/optim/adam.h>
#include <torch/serialize/archive.h>

#include <cstring>
#include <string>

#include "gradwire/device_stream.h"
#include "gradwire/error.h"
#include "consistency.h"

namespace gradwire::torch {
namespace {

std::string where(const Communicator& comm, const char* who) {
  return "rank " + std::to_string(comm.rank()) + ": " + who;
}

// Dense float32 on the CPU or on one CUDA device (Note [1-bit optimizers on
// a device] in src/compress/onebit_optimizers.cpp); returns the total count
// and sets `device` (-1: CPU). Broadcasts the parameters from rank 0
// (replicas start equal) after checking every rank has the same number of
// elements.
size_t prepare(const std::vector<::torch::Tensor>& params, Communicator& comm, const char* who,
               int& device) {
  size_t n = 0;
  device = -1;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& p = params[i];
    const bool placed = p.device().is_cpu() || p.device().is_cuda();
    if (p.scalar_type() != ::torch::kFloat32 || !placed || p.layout() != ::torch::kStrided) {
      throw Error(ErrorCode::InvalidArgument,
                  where(comm, who) + ": parameter " + std::to_string(i) + " is " +
                      std::string(c10::toString(p.scalar_type())) + " on " + p.device().str() +
                      "; the optimizer keeps float32 state and needs dense float32 parameters on "
                      "the CPU or a CUDA device. For mixed precision keep float32 (master) "
                      "parameters and compute in 16 bits with torch.autocast");
    }
    const int d = p.device().is_cuda() ? int(p.device().index()) : -1;
    if (i > 0 && d != device) {
      throw Error(ErrorCode::InvalidArgument,
                  where(comm, who) + ": parameter " + std::to_string(i) + " is on " +
                      p.device().str() + ", parameter 0 on " + params[0].device().str() +
                      "; all parameters must be on one device");
    }
    device = d;
    n += size_t(p.numel());
  }
  std::vector<int64_t> counts(size_t(comm.size()));
  const int64_t mine = int64_t(n);
  comm.allgather(&mine, counts.data(), counts.size(), DataType::Int64).wait();
  for (int r = 0; r < comm.size(); ++r) {
    if (counts[size_t(r)] != mine) {
      throw Error(ErrorCode::Mismatch, where(comm, who) + ": this rank has " + std::to_string(n) +
                                           " parameter elements, rank " + std::to_string(r) +
                                           " has " + std::to_string(counts[size_t(r)]) +
                                           " (a different model?)");
    }
  }
  ::torch::NoGradGuard no_grad;
  for (const auto& p : params) {
    auto c = p.contiguous();
    // CUDA tensors take the device path after PyTorch's current stream.
    DeviceStreamScope scope(detail::current_stream(p.device()));
    comm.broadcast(c.data_ptr<float>(), c.data_ptr<float>(), size_t(c.numel()), DataType::Float32, 0)
        .wait();
    if (!c.is_same(p)) p.copy_(c);
  }
  return n;
}

// torch's view of the options (param_groups()[0] carries lr, which
// torch's LR schedulers change and step() passes on).
std::unique_ptr<::torch::optim::AdamOptions> adam_defaults(const gradwire::OneBitOptions& o) {
  auto defaults = std::make_unique<::torch::optim::AdamOptions>(o.lr);
  defaults->betas(std::make_tuple(double(o.beta1), double(o.beta2)))
      .eps(o.eps)
      .weight_decay(o.weight_decay);
  return defaults;
}

}  // namespace

OneBitOptimizer::OneBitOptimizer(std::vector<::torch::Tensor> params, Communicator& comm,
                                 const gradwire::OneBitOptions& options, const char* who)
    : Optimizer(params, adam_defaults(options)), params_(std::move(params)), comm_(&comm) {
  count_ = prepare(params_, comm, who, device_);
}
OneBitOptimizer::~OneBitOptimizer() = default;

void OneBitOptimizer::rebind(Communicator& comm) {
  int device = -1;
  const size_t n = prepare(params_, comm, "rebind", device);
  if (n != count_ || device != device_) {
    throw Error(ErrorCode::InvalidArgument,
                where(comm, "rebind") + ": the parameters changed (" + std::to_string(n) +
                    " elements on device " + std::to_string(device) + ", the optimizer has " +
                    std::to_string(count_) + " on device " + std::to_string(device_) + ")");
  }
  core_->rebind(comm);
  comm_ = &comm;
}

// Gathers parameters and gradients into flat buffers on their device, steps
// the core there (on PyTorch's current stream for CUDA) and writes the
// parameters back.
::torch::Tensor OneBitOptimizer::step(LossClosure closure) {
  ::torch::Tensor loss;
  if (closure) {
    ::torch::AutoGradMode enable(true);
    loss = closure();
  }
  ::torch::NoGradGuard no_grad;
  const int64_t n = int64_t(core_->count());
  const ::torch::Device device = core_->device().is_cuda()
      ? ::torch::Device(::torch::kCUDA, c10::DeviceIndex(core_->device().index()))
      : ::torch::Device(::torch::kCPU);
  if (!flat_params_.defined() || flat_params_.numel() != n) {
    const auto opts = ::torch::TensorOptions().dtype(::torch::kFloat32).device(device);
    flat_params_ = ::torch::empty({n}, opts);
    flat_grads_ = ::torch::empty({n}, opts);
  }
  int64_t at = 0;
  for (auto& p : params_) {
    const int64_t k = p.numel();
    if (k) {
      flat_params_.narrow(0, at, k).copy_(p.reshape({-1}));
      const auto& g = p.grad();
      // No gradient on this rank: it contributes zeros (every rank still
      // takes part in the collective).
      if (g.defined()) flat_grads_.narrow(0, at, k).copy_(g.reshape({-1}));
      else flat_grads_.narrow(0, at, k).zero_();
    }
    at += k;
  }
  core_->options().lr = float(param_groups().at(0).options().get_lr());
  const Stream stream = detail::current_stream(device);
  core_->step(flat_params_.data_ptr<float>(), flat_grads_.data_ptr<float>(), stream);
  at = 0;
  for (auto& p : params_) {
    const int64_t k = p.numel();
    if (k) p.copy_(flat_params_.narrow(0, at, k).view(p.sizes()));
    at += k;
  }
  return loss;
}

void OneBitOptimizer::save(::torch::serialize::OutputArchive& archive) const {
  const std::string state = core_->save_state();
  auto t = ::torch::empty({int64_t(state.size())}, ::torch::kUInt8);
  if (!state.empty()) std::memcpy(t.data_ptr<uint8_t>(), state.data(), state.size());
  archive.write("gradwire_state", t);
}

void OneBitOptimizer::load(::torch::serialize::InputArchive& archive) {
  ::torch::Tensor t;
  archive.read("gradwire_state", t);
  t = t.contiguous();
  core_->load_state(
      std::string(reinterpret_cast<const char*>(t.data_ptr<uint8_t>()), size_t(t.numel())));
}

OneBitAdam::OneBitAdam(std::vector<::torch::Tensor> params, Communicator& comm,
                       gradwire::OneBitAdamOptions options)
    : OneBitOptimizerOver(std::move(params), comm, options, "OneBitAdam") {
  core_ = std::make_unique<gradwire::OneBitAdam>(comm, count(), options,
                                                 Device::cuda(device()));
}

OneBitLamb::OneBitLamb(std::vector<::torch::Tensor> params, Communicator& comm,
                       gradwire::OneBitLambOptions options)
    : OneBitOptimizerOver(std::move(params), comm, options, "OneBitLamb") {
  std::vector<size_t> layers;
  for (const auto& p : params_) layers.push_back(size_t(p.numel()));
  core_ = std::make_unique<gradwire::OneBitLamb>(comm, std::move(layers), options,
                                                 Device::cuda(device()));
}

}  // namespace gradwire::torch
