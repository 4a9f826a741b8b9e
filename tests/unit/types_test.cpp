// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include "gradwire/types.h"

#include <gtest/gtest.h>

#include <string>

#include "gradwire/error.h"

namespace gradwire {
namespace {

TEST(TypesTest, ElementSizesAndFloating) {
  EXPECT_EQ(element_size(DataType::Float32), 4u);
  EXPECT_EQ(element_size(DataType::Float64), 8u);
  EXPECT_EQ(element_size(DataType::Float16), 2u);
  EXPECT_EQ(element_size(DataType::BFloat16), 2u);
  EXPECT_EQ(element_size(DataType::Int32), 4u);
  EXPECT_EQ(element_size(DataType::Int64), 8u);
  EXPECT_EQ(element_size(DataType::UInt8), 1u);
  EXPECT_TRUE(is_floating(DataType::BFloat16));
  EXPECT_TRUE(is_floating(DataType::Float64));
  EXPECT_FALSE(is_floating(DataType::Int64));
  EXPECT_FALSE(is_floating(DataType::UInt8));
}

TEST(TypesTest, ParseDataTypeNames) {
  struct Case {
    const char* name;
    DataType dtype;
  };
  const Case cases[] = {
      {"float32", DataType::Float32},   {"f32", DataType::Float32},     {"float", DataType::Float32},
      {"fp32", DataType::Float32},      {"FLOAT32", DataType::Float32}, {"float64", DataType::Float64},
      {"f64", DataType::Float64},       {"double", DataType::Float64},  {"float16", DataType::Float16},
      {"f16", DataType::Float16},       {"half", DataType::Float16},    {"fp16", DataType::Float16},
      {"bfloat16", DataType::BFloat16}, {"bf16", DataType::BFloat16},   {"int32", DataType::Int32},
      {"i32", DataType::Int32},         {"int", DataType::Int32},       {"int64", DataType::Int64},
      {"i64", DataType::Int64},         {"long", DataType::Int64},      {"uint8", DataType::UInt8},
      {"u8", DataType::UInt8},          {"byte", DataType::UInt8},
  };
  for (const auto& c : cases) EXPECT_EQ(parse_data_type(c.name), c.dtype) << c.name;
  for (DataType d : kAllDataTypes) EXPECT_EQ(parse_data_type(to_string(d)), d) << to_string(d);
}

TEST(TypesTest, ParseReduceOpNames) {
  EXPECT_EQ(parse_reduce_op("sum"), ReduceOp::Sum);
  EXPECT_EQ(parse_reduce_op("avg"), ReduceOp::Avg);
  EXPECT_EQ(parse_reduce_op("mean"), ReduceOp::Avg);
  EXPECT_EQ(parse_reduce_op("min"), ReduceOp::Min);
  EXPECT_EQ(parse_reduce_op("max"), ReduceOp::Max);
  EXPECT_EQ(parse_reduce_op("prod"), ReduceOp::Prod);
  for (ReduceOp op : kAllReduceOps) EXPECT_EQ(parse_reduce_op(to_string(op)), op);
}

TEST(TypesTest, BadNamesThrowInvalidArgumentListingValidNames) {
  try {
    parse_data_type("float8");
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    std::string msg = e.what();
    EXPECT_NE(msg.find("float8"), std::string::npos) << msg;
    for (DataType d : kAllDataTypes) EXPECT_NE(msg.find(to_string(d)), std::string::npos) << msg;
  }
  try {
    parse_reduce_op("average");
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    std::string msg = e.what();
    for (ReduceOp op : kAllReduceOps) EXPECT_NE(msg.find(to_string(op)), std::string::npos) << msg;
  }
  EXPECT_THROW(parse_data_type(""), Error);
  EXPECT_THROW(parse_reduce_op(""), Error);
}

TEST(TypesTest, ShardsCoverCountContiguously) {
  for (size_t count = 0; count <= 50; ++count) {
    for (int world = 1; world <= 9; ++world) {
      size_t next = 0;
      for (int rank = 0; rank < world; ++rank) {
        size_t n = shard_count(count, world, rank);
        EXPECT_EQ(shard_offset(count, world, rank), next) << count << "/" << world << "/" << rank;
        // The first count % world ranks get one element more.
        EXPECT_EQ(n, count / world + (static_cast<size_t>(rank) < count % world ? 1 : 0));
        next += n;
      }
      EXPECT_EQ(next, count) << count << "/" << world;
    }
  }
  EXPECT_EQ(shard_count(10, 4, 0), 3u);
  EXPECT_EQ(shard_count(10, 4, 3), 2u);
  EXPECT_EQ(shard_offset(10, 4, 3), 8u);
}

TEST(TypesTest, ShardArgumentsAreChecked) {
  for (auto call : {+[] { shard_count(10, 0, 0); }, +[] { shard_count(10, 4, 4); },
                    +[] { shard_offset(10, 4, -1); }, +[] { shard_offset(0, -2, 0); }}) {
    try {
      call();
      ADD_FAILURE() << "no exception";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::InvalidArgument);
    }
  }
}

}  // namespace
}  // namespace gradwire
