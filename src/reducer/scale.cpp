// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "reducer/scale.h"

#include <cstdint>
#include <cstring>

#include "base/raise.h"
#include "kernels/cpu/reduce.h"
#include "kernels/reduce_math.h"

namespace gradwire::reducer {

namespace {

// True division (not multiplication by 1/n): the same bits as
// kernels::divide and as dividing after the collective, exact for
// power-of-two worlds. The loop is memory-bound either way.
template <typename T>
void divide_into(T* __restrict dst, const T* __restrict src, size_t count, T divisor) {
  for (size_t i = 0; i < count; ++i) dst[i] = src[i] / divisor;
}

template <uint16_t (*divide16)(uint16_t, int)>
void divide_into16(uint16_t* dst, const uint16_t* src, size_t count, int divisor) {
  for (size_t i = 0; i < count; ++i) dst[i] = divide16(src[i], divisor);
}

}  // namespace

void copy_divided(void* dst, const void* src, size_t count, DataType dtype, int divisor) {
  if (count == 0) return;
  if (divisor == 1) {
    if (dst != src) std::memcpy(dst, src, count * element_size(dtype));
    return;
  }
  if (dst == src) {
    kernels::divide(dst, count, dtype, divisor);  // the SIMD in-place kernel
    return;
  }
  switch (dtype) {
    case DataType::Float32:
      divide_into(static_cast<float*>(dst), static_cast<const float*>(src), count, float(divisor));
      return;
    case DataType::Float64:
      divide_into(static_cast<double*>(dst), static_cast<const double*>(src), count,
                  double(divisor));
      return;
    case DataType::Float16:
      divide_into16<kernels::divide_half>(static_cast<uint16_t*>(dst),
                                          static_cast<const uint16_t*>(src), count, divisor);
      return;
    case DataType::BFloat16:
      divide_into16<kernels::divide_bf16>(static_cast<uint16_t*>(dst),
                                          static_cast<const uint16_t*>(src), count, divisor);
      return;
    default:
      raise(ErrorCode::InvalidArgument, "the Reducer averages floating gradients only, not {}",
            to_string(dtype));
  }
}

}  // namespace gradwire::reducer
