// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// The CPU kernels' public entry points, the scalar (reference) table and the
// choice of table (Note [cpu kernel dispatch] in dispatch.h).
#include "kernels/cpu/reduce.h"

#include <cstdint>
#include <cstdlib>
#include <string>

#include "base/raise.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/elem.h"

namespace gradwire::kernels {
namespace cpu {
namespace {

static_assert(static_cast<int>(DataType::Float32) == 0 && static_cast<int>(DataType::Float64) == 1 &&
                  static_cast<int>(DataType::Float16) == 2 && static_cast<int>(DataType::BFloat16) == 3 &&
                  static_cast<int>(DataType::Int32) == 4 && static_cast<int>(DataType::Int64) == 5 &&
                  static_cast<int>(DataType::UInt8) == 6 && static_cast<int>(DataType::Int8) == 7 &&
                  static_cast<int>(DataType::Int16) == 8 && static_cast<int>(DataType::Bool) == 9,
              "KernelTable rows follow the DataType order");
static_assert(static_cast<int>(Op::Sum) == 0 && static_cast<int>(Op::Min) == 1 &&
                  static_cast<int>(Op::Max) == 2 && static_cast<int>(Op::Prod) == 3,
              "KernelTable columns follow the Op order");

// ---- the scalar table: plain loops over reduce_math.h ----

template <DataType dt, Op op>
void reduce_kernel(void* dst, const void* a, const void* b, size_t n) {
  reduce_elems<dt, op>(dst, a, b, 0, n);
}
template <DataType dt>
void divide_kernel(void* dst, size_t n, int divisor) {
  divide_elems<dt>(dst, divisor, 0, n);
}
void half_to_float_kernel(float* dst, const uint16_t* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = kernels::half_to_float(src[i]);
}
void float_to_half_kernel(uint16_t* dst, const float* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = kernels::float_to_half(src[i]);
}
void bf16_to_float_kernel(float* dst, const uint16_t* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = kernels::bf16_to_float(src[i]);
}
void float_to_bf16_kernel(uint16_t* dst, const float* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = kernels::float_to_bf16(src[i]);
}

constexpr KernelTable kScalarTable = GW_KERNEL_TABLE();

bool cpu_has(Isa isa) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();  // may run before libgcc's constructor (static init)
  switch (isa) {
    case Isa::Scalar:
      return true;
    case Isa::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    case Isa::Avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("f16c");
  }
  return false;
#else
  return isa == Isa::Scalar;
#endif
}

const KernelTable* table_of(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return scalar_kernels();
    case Isa::Avx2:
      return avx2_kernels();
    case Isa::Avx512:
      return avx512_kernels();
  }
  return nullptr;
}

// GRADWIRE_CPU_KERNELS=auto|scalar|avx2|avx512; unset or auto: the widest
// the CPU runs.
Isa choose_isa() {
  const char* env = std::getenv("GRADWIRE_CPU_KERNELS");
  std::string want = env ? env : "";
  if (want.empty() || want == "auto") {
    for (Isa isa : {Isa::Avx512, Isa::Avx2}) {
      if (cpu_supports(isa)) return isa;
    }
    return Isa::Scalar;
  }
  for (Isa isa : kAllIsas) {
    if (want != to_string(isa)) continue;
    if (!cpu_supports(isa)) {
      raise(ErrorCode::InvalidArgument,
            "GRADWIRE_CPU_KERNELS={} but this CPU or build cannot run the {} kernels; use auto or scalar",
            want, want);
    }
    return isa;
  }
  raise(ErrorCode::InvalidArgument, "GRADWIRE_CPU_KERNELS={} is not one of auto, scalar, avx2, avx512", want);
}

const KernelTable& active_table() {
  static const KernelTable* table = &kernels_for(choose_isa());
  return *table;
}

Op elem_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return Op::Sum;  // the caller divides afterwards
    case ReduceOp::Min:
      return Op::Min;
    case ReduceOp::Max:
      return Op::Max;
    case ReduceOp::Prod:
      return Op::Prod;
  }
  raise(ErrorCode::InvalidArgument, "reduce: unknown ReduceOp value {}", static_cast<int>(op));
}

int dtype_index(DataType dtype, const char* what) {
  int i = static_cast<int>(dtype);
  if (i < 0 || i >= kNumDataTypes)
    raise(ErrorCode::InvalidArgument, "{}: unknown DataType value {}", what, i);
  return i;
}

// dst may be a or b exactly, or disjoint from them; a partial overlap would
// read elements this call already overwrote.
bool overlaps_partially(const void* dst, const void* src, size_t bytes) {
  auto d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
  return d != s && d < s + bytes && s < d + bytes;
}

}  // namespace

const KernelTable* scalar_kernels() { return &kScalarTable; }

std::string_view to_string(Isa isa) {
  switch (isa) {
    case Isa::Scalar:
      return "scalar";
    case Isa::Avx2:
      return "avx2";
    case Isa::Avx512:
      return "avx512";
  }
  return "unknown";
}

bool cpu_supports(Isa isa) { return table_of(isa) != nullptr && cpu_has(isa); }

Isa active_isa() {
  const KernelTable* t = &active_table();
  for (Isa isa : kAllIsas) {
    if (table_of(isa) == t) return isa;
  }
  return Isa::Scalar;
}

const KernelTable& kernels_for(Isa isa) {
  if (!cpu_supports(isa)) {
    raise(ErrorCode::InvalidArgument, "the {} CPU kernels are not available on this CPU or build",
          to_string(isa));
  }
  return *table_of(isa);
}

}  // namespace cpu

void reduce(void* dst, const void* a, const void* b, size_t count, DataType dtype, ReduceOp op) {
  int dt = cpu::dtype_index(dtype, "reduce");
  Op eop = cpu::elem_op(op);
  if (count == 0) return;
  if (!dst || !a || !b) raise(ErrorCode::InvalidArgument, "reduce: null buffer for {} elements", count);
  size_t bytes = count * element_size(dtype);
  if (cpu::overlaps_partially(dst, a, bytes) || cpu::overlaps_partially(dst, b, bytes)) {
    raise(ErrorCode::InvalidArgument,
          "reduce: dst partially overlaps an input ({} elements of {}); it may only alias one exactly", count,
          to_string(dtype));
  }
  cpu::active_table().reduce[dt][static_cast<int>(eop)](dst, a, b, count);
}

void divide(void* dst, size_t count, DataType dtype, int divisor) {
  int dt = cpu::dtype_index(dtype, "divide");
  if (divisor < 1) raise(ErrorCode::InvalidArgument, "divide: divisor {} must be >= 1", divisor);
  if (count == 0 || divisor == 1) return;
  if (!dst) raise(ErrorCode::InvalidArgument, "divide: null buffer for {} elements", count);
  cpu::active_table().divide[dt](dst, count, divisor);
}

void half_to_float(float* dst, const uint16_t* src, size_t count) {
  if (count) cpu::active_table().half_to_float(dst, src, count);
}
void float_to_half(uint16_t* dst, const float* src, size_t count) {
  if (count) cpu::active_table().float_to_half(dst, src, count);
}
void bf16_to_float(float* dst, const uint16_t* src, size_t count) {
  if (count) cpu::active_table().bf16_to_float(dst, src, count);
}
void float_to_bf16(uint16_t* dst, const float* src, size_t count) {
  if (count) cpu::active_table().float_to_bf16(dst, src, count);
}

}  // namespace gradwire::kernels
