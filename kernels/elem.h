// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Storage type and element functions per DataType, over reduce_math.h. Used
// by the CPU kernels (kernels/cpu/) and the CUDA kernels (kernels/cuda/) alike
// (Note [shared element math]), so a dtype maps to the same formula on both.
#pragma once

#include <cstdint>

#include "gradwire/types.h"
#include "kernels/reduce_math.h"

namespace gradwire::kernels {

template <DataType dt>
struct Elem;

template <typename T>
struct NativeElem {
  using S = T;  // storage type
  template <Op op>
  GW_HD static S reduce(S a, S b) {
    return apply<op, T>(a, b);
  }
  GW_HD static S divide(S v, int divisor) { return divide_value<T>(v, divisor); }
};

template <>
struct Elem<DataType::Float32> : NativeElem<float> {};
template <>
struct Elem<DataType::Float64> : NativeElem<double> {};
template <>
struct Elem<DataType::Int32> : NativeElem<int32_t> {};
template <>
struct Elem<DataType::Int64> : NativeElem<int64_t> {};
template <>
struct Elem<DataType::UInt8> : NativeElem<uint8_t> {
  template <Op op>
  GW_HD static S reduce(S a, S b) {
    return apply_u8<op>(a, b);
  }
};
template <>
struct Elem<DataType::Int8> : NativeElem<int8_t> {};
template <>
struct Elem<DataType::Int16> : NativeElem<int16_t> {};
// Bool (types.h): 0/1 bytes; Sum is Max (or) and Prod is Min (and).
GW_HD constexpr Op bool_op(Op op) {
  return op == Op::Sum ? Op::Max : op == Op::Prod ? Op::Min : op;
}
template <>
struct Elem<DataType::Bool> {
  using S = uint8_t;
  template <Op op>
  GW_HD static S reduce(S a, S b) {
    return apply<bool_op(op), uint8_t>(a, b);
  }
  // Never called: validate() refuses Avg on bool. The identity keeps the
  // kernel tables whole.
  GW_HD static S divide(S v, int) { return v; }
};
template <>
struct Elem<DataType::Float16> {
  using S = uint16_t;
  template <Op op>
  GW_HD static S reduce(S a, S b) {
    return apply_half<op>(a, b);
  }
  GW_HD static S divide(S v, int divisor) { return divide_half(v, divisor); }
};
template <>
struct Elem<DataType::BFloat16> {
  using S = uint16_t;
  template <Op op>
  GW_HD static S reduce(S a, S b) {
    return apply_bf16<op>(a, b);
  }
  GW_HD static S divide(S v, int divisor) { return divide_bf16(v, divisor); }
};

}  // namespace gradwire::kernels
