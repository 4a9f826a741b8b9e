// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "gradwire/types.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "base/raise.h"

namespace gradwire {
namespace {

struct DataTypeName {
  DataType dtype;
  std::string_view names[4];  // canonical first; empty = unused
};
constexpr DataTypeName kDataTypeNames[] = {
    {DataType::Float32, {"float32", "f32", "float", "fp32"}},
    {DataType::Float64, {"float64", "f64", "double", "fp64"}},
    {DataType::Float16, {"float16", "f16", "half", "fp16"}},
    {DataType::BFloat16, {"bfloat16", "bf16", "", ""}},
    {DataType::Int32, {"int32", "i32", "int", ""}},
    {DataType::Int64, {"int64", "i64", "long", ""}},
    {DataType::UInt8, {"uint8", "u8", "byte", ""}},
    {DataType::Int8, {"int8", "i8", "char", ""}},
    {DataType::Int16, {"int16", "i16", "short", ""}},
    {DataType::Bool, {"bool", "", "", ""}},
};

struct ReduceOpName {
  ReduceOp op;
  std::string_view names[2];
};
constexpr ReduceOpName kReduceOpNames[] = {
    {ReduceOp::Sum, {"sum", ""}}, {ReduceOp::Avg, {"avg", "mean"}}, {ReduceOp::Min, {"min", ""}},
    {ReduceOp::Max, {"max", ""}}, {ReduceOp::Prod, {"prod", ""}},
};

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// "float32 (f32, float, fp32), float64 (...), ..."
template <typename Table>
std::string valid_names(const Table& table) {
  std::string out;
  for (const auto& entry : table) {
    if (!out.empty()) out += ", ";
    out += entry.names[0];
    std::string aliases;
    for (size_t i = 1; i < std::size(entry.names); ++i) {
      if (entry.names[i].empty()) continue;
      if (!aliases.empty()) aliases += ", ";
      aliases += entry.names[i];
    }
    if (!aliases.empty()) out += " (" + aliases + ")";
  }
  return out;
}

void check_shard_args(size_t count, int world, int rank) {
  if (world < 1)
    raise(ErrorCode::InvalidArgument, "sharding {} elements: world size {} must be >= 1", count, world);
  if (rank < 0 || rank >= world) {
    raise(ErrorCode::InvalidArgument, "sharding {} elements: rank {} is outside [0, {})", count, rank, world);
  }
}

}  // namespace

void invalid_data_type(DataType dtype) {
  raise(ErrorCode::InvalidArgument, "unknown DataType value {}", static_cast<int>(dtype));
}

bool is_floating(DataType dtype) {
  switch (dtype) {
    case DataType::Float32:
    case DataType::Float64:
    case DataType::Float16:
    case DataType::BFloat16:
      return true;
    case DataType::Int32:
    case DataType::Int64:
    case DataType::UInt8:
    case DataType::Int8:
    case DataType::Int16:
    case DataType::Bool:
      return false;
  }
  raise(ErrorCode::InvalidArgument, "unknown DataType value {}", static_cast<int>(dtype));
}

std::string_view to_string(DataType dtype) {
  for (const auto& entry : kDataTypeNames) {
    if (entry.dtype == dtype) return entry.names[0];
  }
  return "unknown";
}

std::string_view to_string(ReduceOp op) {
  for (const auto& entry : kReduceOpNames) {
    if (entry.op == op) return entry.names[0];
  }
  return "unknown";
}

DataType parse_data_type(std::string_view name) {
  std::string key = lower(name);
  for (const auto& entry : kDataTypeNames) {
    for (std::string_view n : entry.names) {
      if (!n.empty() && n == key) return entry.dtype;
    }
  }
  raise(ErrorCode::InvalidArgument, "unknown data type '{}'; valid names: {}", name,
        valid_names(kDataTypeNames));
}

ReduceOp parse_reduce_op(std::string_view name) {
  std::string key = lower(name);
  for (const auto& entry : kReduceOpNames) {
    for (std::string_view n : entry.names) {
      if (!n.empty() && n == key) return entry.op;
    }
  }
  raise(ErrorCode::InvalidArgument, "unknown reduce op '{}'; valid names: {}", name,
        valid_names(kReduceOpNames));
}

size_t shard_count(size_t count, int world, int rank) {
  check_shard_args(count, world, rank);
  size_t w = static_cast<size_t>(world), r = static_cast<size_t>(rank);
  return count / w + (r < count % w ? 1 : 0);
}

size_t shard_offset(size_t count, int world, int rank) {
  check_shard_args(count, world, rank);
  size_t w = static_cast<size_t>(world), r = static_cast<size_t>(rank);
  return r * (count / w) + std::min(r, count % w);
}

}  // namespace gradwire
