// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Fashion-MNIST loading (gzipped IDX from the Debian package
// dataset-fashion-mnist) and the small CNN, shared by the training example
// and benchmarks/ddp_bench.cpp so both train exactly the same thing.
#pragma once

#include <torch/torch.h>
#include <zlib.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace fashion_mnist {

// An IDX file (gzipped or not: gzread reads both): big-endian magic
// 0x000008TD (T = 0x08: unsigned bytes, D = number of dimensions), D
// big-endian uint32 sizes, then the bytes.
inline std::vector<uint8_t> read_idx(const std::string& path, std::vector<int64_t>& dims) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + path + " (install dataset-fashion-mnist)");
  std::unique_ptr<gzFile_s, int (*)(gzFile)> closer(f, gzclose);
  auto read_u32 = [&] {
    unsigned char b[4];
    if (gzread(f, b, 4) != 4) throw std::runtime_error(path + ": truncated header");
    return uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | b[3];
  };
  const uint32_t magic = read_u32();
  if ((magic >> 8) != 0x08) throw std::runtime_error(path + ": not an IDX file of bytes");
  dims.clear();
  size_t total = 1;
  for (uint32_t d = 0; d < (magic & 0xff); ++d) {
    dims.push_back(read_u32());
    total *= size_t(dims.back());
  }
  std::vector<uint8_t> bytes(total);
  if (size_t(gzread(f, bytes.data(), unsigned(total))) != total) {
    throw std::runtime_error(path + ": truncated data");
  }
  return bytes;
}

struct Dataset {
  torch::Tensor images;  // [N, 1, 28, 28] float, normalised
  torch::Tensor labels;  // [N] int64
  int64_t size() const { return labels.size(0); }
};

inline Dataset load(const std::string& dir, const std::string& split) {
  std::vector<int64_t> idims, ldims;
  auto img = read_idx(dir + "/" + split + "-images-idx3-ubyte.gz", idims);
  auto lab = read_idx(dir + "/" + split + "-labels-idx1-ubyte.gz", ldims);
  if (idims.size() != 3 || ldims.size() != 1 || idims[0] != ldims[0]) {
    throw std::runtime_error(dir + ": " + split + " images and labels do not match");
  }
  Dataset d;
  d.images = torch::from_blob(img.data(), {idims[0], 1, idims[1], idims[2]}, torch::kUInt8)
                 .to(torch::kFloat)
                 .div_(255.0)
                 .sub_(0.2860)  // Fashion-MNIST's mean and standard deviation
                 .div_(0.3530);
  d.labels = torch::from_blob(lab.data(), {ldims[0]}, torch::kUInt8).to(torch::kLong);
  return d;
}

// A 207k-parameter CNN: two 3x3 conv + pool stages, two linear layers.
struct CnnImpl : torch::nn::Module {
  CnnImpl()
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 3).padding(1)))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).padding(1)))),
        fc1(register_module("fc1", torch::nn::Linear(32 * 7 * 7, 128))),
        fc2(register_module("fc2", torch::nn::Linear(128, 10))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(conv1(x)), 2);  // 16 x 14 x 14
    x = torch::max_pool2d(torch::relu(conv2(x)), 2);  // 32 x 7 x 7
    x = torch::relu(fc1(x.flatten(1)));
    return fc2(torch::dropout(x, 0.25, is_training()));
  }
  torch::nn::Conv2d conv1, conv2;
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Cnn);

}  // namespace fashion_mnist
