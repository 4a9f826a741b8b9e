// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Internal: the per-ISA tables behind kernels/cpu/reduce.h.
//
// Note [cpu kernel dispatch]
// Every (dtype, op) pair has its own loop, instantiated from a template so the
// inner loop holds no switch. The loops exist once per instruction set:
//   Scalar  plain loops over reduce_math.h (the reference, and the fallback)
//   Avx2    avx2 + f16c, 32-byte vectors
//   Avx512  avx512f/bw/vl + f16c, 64-byte vectors
// each compiled in its own translation unit under `#pragma GCC target`, and
// gathered in a KernelTable of function pointers. reduce()/divide() pick the
// table once (cpuid via __builtin_cpu_supports; GRADWIRE_CPU_KERNELS=
// scalar|avx2|avx512|auto overrides) and then do one indexed call.
// The SIMD loops are bit-identical to the scalar ones (the tests check it):
// same operations, same rounding, F16C conversions equal to half_to_float /
// float_to_half including NaN, inf and subnormals. The one thing that is not
// pinned down is which payload a Sum/Prod of two NaNs carries: the compiler
// may commute a+b, so only "it is a NaN" is guaranteed there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gradwire/types.h"

namespace gradwire::kernels::cpu {

enum class Isa : uint8_t { Scalar, Avx2, Avx512 };
inline constexpr Isa kAllIsas[] = {Isa::Scalar, Isa::Avx2, Isa::Avx512};
inline constexpr int kNumDataTypes = 10;  // DataType values 0..9
inline constexpr int kNumElemOps = 4;    // reduce_math.h Op: Sum, Min, Max, Prod

using ReduceFn = void (*)(void* dst, const void* a, const void* b, size_t count);
using DivideFn = void (*)(void* dst, size_t count, int divisor);
using WidenFn = void (*)(float* dst, const uint16_t* src, size_t count);
using NarrowFn = void (*)(uint16_t* dst, const float* src, size_t count);

struct KernelTable {
  ReduceFn reduce[kNumDataTypes][kNumElemOps];  // [DataType][Op]
  DivideFn divide[kNumDataTypes];
  WidenFn half_to_float;
  NarrowFn float_to_half;
  WidenFn bf16_to_float;
  NarrowFn float_to_bf16;
};

// The tables; nullptr where the build has no such variant (non-x86).
const KernelTable* scalar_kernels();
const KernelTable* avx2_kernels();
const KernelTable* avx512_kernels();

std::string_view to_string(Isa isa);
bool cpu_supports(Isa isa);  // compiled in and the CPU can run it
// The table reduce()/divide() use (chosen once per process).
Isa active_isa();
// Whether AVX2 loops may run: the active table is a vector one (so
// GRADWIRE_CPU_KERNELS=scalar turns every hand-written vector loop off,
// the copy and compression loops included). Cached after the first call.
inline bool vector_isa_active() {
  static const bool yes = active_isa() != Isa::Scalar;
  return yes;
}
// A specific table; throws InvalidArgument if this CPU or build cannot run it.
const KernelTable& kernels_for(Isa isa);

}  // namespace gradwire::kernels::cpu
