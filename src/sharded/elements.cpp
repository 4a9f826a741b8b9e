// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "sharded/elements.h"

#include <cstdint>
#include <cstring>

#include "base/raise.h"
#include "kernels/cpu/reduce.h"
#include "kernels/reduce_math.h"
#include "reducer/scale.h"

namespace gradwire::sharded {

namespace k = kernels;

bool can_reduce_in(DataType param, DataType reduce) {
  if (param == reduce) return true;
  return reduce == DataType::Float32 &&
         (param == DataType::BFloat16 || param == DataType::Float16);
}

void copy_divided_into(void* dst, DataType reduce, const void* src, DataType param, size_t count,
                       int world) {
  if (count == 0) return;
  if (reduce == param) {
    reducer::copy_divided(dst, src, count, param, world);
    return;
  }
  GW_CHECK(can_reduce_in(param, reduce), "sharded: {} gradients reduced in {}", to_string(param),
           to_string(reduce));
  float* out = static_cast<float*>(dst);
  const auto* in = static_cast<const uint16_t*>(src);
  if (param == DataType::BFloat16) k::bf16_to_float(out, in, count);
  else k::half_to_float(out, in, count);
  if (world > 1) k::divide(out, count, DataType::Float32, world);
}

void widen_scaled(float* dst, const void* src, DataType dtype, size_t count, float factor) {
  if (count == 0) return;
  switch (dtype) {
    case DataType::Float32:
      if (factor == 1.0f) {
        std::memcpy(dst, src, count * 4);
        return;
      }
      {
        const float* in = static_cast<const float*>(src);
        for (size_t i = 0; i < count; ++i) dst[i] = in[i] * factor;
      }
      return;
    case DataType::BFloat16:
      k::bf16_to_float(dst, static_cast<const uint16_t*>(src), count);
      break;
    case DataType::Float16:
      k::half_to_float(dst, static_cast<const uint16_t*>(src), count);
      break;
    default:
      raise(ErrorCode::InvalidArgument, "sharded: cannot widen {} to float32", to_string(dtype));
  }
  if (factor != 1.0f) {
    for (size_t i = 0; i < count; ++i) dst[i] *= factor;
  }
}

void narrow(void* dst, DataType dtype, const float* src, size_t count) {
  if (count == 0) return;
  switch (dtype) {
    case DataType::Float32:
      if (dst != src) std::memcpy(dst, src, count * 4);
      return;
    case DataType::BFloat16:
      k::float_to_bf16(static_cast<uint16_t*>(dst), src, count);
      return;
    case DataType::Float16:
      k::float_to_half(static_cast<uint16_t*>(dst), src, count);
      return;
    default:
      raise(ErrorCode::InvalidArgument, "sharded: cannot narrow float32 to {}", to_string(dtype));
  }
}

double sum_squares(const void* src, DataType dtype, size_t count) {
  double s = 0;
  switch (dtype) {
    case DataType::Float32: {
      const float* in = static_cast<const float*>(src);
      for (size_t i = 0; i < count; ++i) s += double(in[i]) * double(in[i]);
      return s;
    }
    case DataType::BFloat16: {
      const auto* in = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < count; ++i) {
        const double v = k::bf16_to_float(in[i]);
        s += v * v;
      }
      return s;
    }
    case DataType::Float16: {
      const auto* in = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < count; ++i) {
        const double v = k::half_to_float(in[i]);
        s += v * v;
      }
      return s;
    }
    default:
      raise(ErrorCode::InvalidArgument, "sharded: no norm of {} gradients", to_string(dtype));
  }
}

}  // namespace gradwire::sharded
