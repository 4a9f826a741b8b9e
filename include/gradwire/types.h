// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#pragma once

#include "gradwire/export.h"

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string_view>

namespace gradwire {

enum class DataType : uint8_t {
  Float32,
  Float64,
  Float16,   // IEEE binary16; reductions accumulate in float32
  BFloat16,  // bfloat16; reductions accumulate in float32
  Int32,
  Int64,
  UInt8,
  Int8,
  Int16,
  // One byte, 0 or 1 (torch.bool, numpy's bool_): Sum and Max are logical
  // or, Prod and Min logical and; Avg is refused.
  Bool,
};

// Sum, Avg and Prod wrap around on integer overflow; Avg on integers divides
// with truncation toward zero (like C++ and NCCL).
enum class ReduceOp : uint8_t { Sum, Avg, Min, Max, Prod };

inline constexpr DataType kAllDataTypes[] = {
    DataType::Float32, DataType::Float64, DataType::Float16, DataType::BFloat16, DataType::Int32,
    DataType::Int64,   DataType::UInt8,   DataType::Int8,    DataType::Int16,    DataType::Bool};
inline constexpr ReduceOp kAllReduceOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Min,
                                             ReduceOp::Max, ReduceOp::Prod};

// Throws InvalidArgument naming the value (a DataType cast from an integer).
[[noreturn]] GRADWIRE_API void invalid_data_type(DataType dtype);
// Bytes per element. Inline: a small collective asks for it several times on
// its caller's thread (Note [the lean inline path]).
inline size_t element_size(DataType dtype) {
  static constexpr uint8_t kBytes[] = {4, 8, 2, 2, 4, 8, 1, 1, 2, 1};  // in the enum's order
  static_assert(std::size(kBytes) == std::size(kAllDataTypes));
  const auto i = static_cast<size_t>(dtype);
  if (i >= std::size(kBytes)) invalid_data_type(dtype);
  return kBytes[i];
}
GRADWIRE_API bool is_floating(DataType dtype);
GRADWIRE_API std::string_view to_string(DataType dtype);
GRADWIRE_API std::string_view to_string(ReduceOp op);
// Parse "float32"/"f32"/"float", "bf16", "int64", ...; throws InvalidArgument.
GRADWIRE_API DataType parse_data_type(std::string_view name);
GRADWIRE_API ReduceOp parse_reduce_op(std::string_view name);

// How a collective splits `count` elements among `world` ranks when it
// shards (reduce_scatter, allgather): the first count % world ranks get one
// element more. Every rank computes the same split, so no negotiation.
GRADWIRE_API size_t shard_count(size_t count, int world, int rank);
GRADWIRE_API size_t shard_offset(size_t count, int world, int rank);

}  // namespace gradwire
