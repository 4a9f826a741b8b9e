// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// gradwire/torch/c10d_hooks.h: the kernels and the bucket adapter behind
// gradwire's comm hooks for c10d's DDP (Python: gradwire.torch.hooks).
#include "gradwire/torch/c10d_hooks.h"

#include <memory>
#include <string>
#include <vector>

#include "gradwire/device_stream.h"
#include "gradwire/error.h"
#include "kernels/cpu/reduce.h"
#include "tensors.h"

namespace gradwire::torch {

namespace {

using detail::invalid;

void check_pair(const at::Tensor& wide, const at::Tensor& narrow, const char* what) {
  if (!wide.device().is_cpu() || !narrow.device().is_cpu()) {
    invalid(std::string(what) + ": CPU tensors only (the CUDA kernels come with the NCCL work)");
  }
  if (wide.scalar_type() != at::kFloat || !wide.is_contiguous()) {
    invalid(std::string(what) + ": the bucket must be a contiguous float32 tensor");
  }
  if ((narrow.scalar_type() != at::kHalf && narrow.scalar_type() != at::kBFloat16) ||
      !narrow.is_contiguous()) {
    invalid(std::string(what) + ": the compressed tensor must be contiguous float16 or bfloat16");
  }
  if (wide.numel() != narrow.numel()) {
    invalid(std::string(what) + ": " + std::to_string(wide.numel()) + " vs " +
            std::to_string(narrow.numel()) + " elements");
  }
}

void check_bucket(const at::Tensor& buffer, const std::string& what) {
  if (buffer.scalar_type() != at::kFloat || !detail::supported_device(buffer.device()) ||
      !buffer.is_contiguous()) {
    invalid(what + ": the bucket is a " + std::string(c10::toString(buffer.scalar_type())) +
            " tensor on " + buffer.device().str() +
            "; gradwire's PowerSGD takes contiguous float32 CPU or CUDA buckets");
  }
}

// A torch future completed with `result` when `work` completes, or with its
// error (on the thread that completes the Work: Note [future callbacks on
// the engine thread] in c10d_work.cpp).
c10::intrusive_ptr<c10::ivalue::Future> future_of(Work work, at::Tensor result) {
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
  work.then([future, result](std::exception_ptr error) {
    if (error) {
      future->setError(error);
    } else {
      future->markCompleted(c10::IValue(result));
    }
  });
  return future;
}

}  // namespace

void compress(const at::Tensor& src, at::Tensor& dst, int divisor) {
  check_pair(src, dst, "gradwire compress");
  const size_t n = size_t(src.numel());
  auto* out = static_cast<uint16_t*>(dst.data_ptr());
  const auto* in = src.const_data_ptr<float>();
  const bool half = dst.scalar_type() == at::kHalf;
  if (half) {
    kernels::float_to_half(out, in, n);
  } else {
    kernels::float_to_bf16(out, in, n);
  }
  if (divisor != 1) kernels::divide(out, n, half ? DataType::Float16 : DataType::BFloat16, divisor);
}

void decompress(const at::Tensor& src, at::Tensor& dst) {
  check_pair(dst, src, "gradwire decompress");
  const size_t n = size_t(src.numel());
  const auto* in = static_cast<const uint16_t*>(src.const_data_ptr());
  auto* out = dst.data_ptr<float>();
  if (src.scalar_type() == at::kHalf) {
    kernels::half_to_float(out, in, n);
  } else {
    kernels::bf16_to_float(out, in, n);
  }
}

c10::intrusive_ptr<c10::ivalue::Future> run_comm_hook(
    const CommHook& hook, Communicator& comm, at::Tensor buffer,
    const std::vector<std::vector<int64_t>>& shapes, size_t index, uint64_t step,
    const std::string& what) {
  check_bucket(buffer, what);
  std::vector<size_t> gradients;
  std::vector<BucketContext::Tensor> tensors;
  size_t offset = 0;
  for (const auto& shape : shapes) {
    BucketContext::Tensor t;
    t.offset = offset;
    t.elements = 1;
    for (int64_t d : shape) t.elements *= size_t(d);
    t.rows = shape.empty() ? t.elements : size_t(shape[0]);
    t.cols = t.rows ? t.elements / t.rows : 0;
    offset += t.elements;
    gradients.push_back(gradients.size());
    tensors.push_back(t);
  }
  if (offset != size_t(buffer.numel())) {
    invalid(what + ": the bucket's gradients hold " + std::to_string(offset) +
            " elements, its buffer " + std::to_string(buffer.numel()));
  }
  buffer.div_(comm.size());  // on the current stream for a CUDA bucket
  std::vector<std::byte> scratch;  // PowerSGD keeps its own buffers

  // PyTorch's current stream on a CUDA bucket's device: where the bucket's
  // contents become ready and the hook's GPU work goes (Note [where
  // PowerSGD's buffers live]); its collectives follow it. The Work
  // completes once the GPU is done, so the future's value is readable by
  // any stream.
  const Stream stream = detail::current_stream(buffer);
  DeviceStreamScope scope(stream);
  BucketContext::Args args;
  args.comm = &comm;
  args.step = step;
  args.index = index;
  args.dtype = DataType::Float32;
  args.count = offset;
  args.buffer = buffer.data_ptr();
  args.result_count = offset;
  args.gradients = &gradients;
  args.tensors = &tensors;
  args.scratch = &scratch;
  args.device = detail::device_of(buffer);
  args.stream = stream;
  BucketContext ctx(args);
  return future_of(hook(ctx), buffer);
}

}  // namespace gradwire::torch
