// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Runs gradwire's PowerSGD hook through a Reducer for a few steps from a
// known initial Q and writes inputs, the initial Q and outputs as raw
// float32 files, for tests/ranks/powersgd_reference.py to recompute with
// PyTorch's powerSGD_hook mathematics (the installed torch's
// _orthogonalize and matrix products). Launched with gwlaunch -n N; every
// rank gets different gradients and writes in<step>.r<rank>.bin and
// out<step>.r<rank>.bin.
//
//   powersgd_dump OUT_DIR RANK STEPS
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "base/state_io.h"
#include "gradwire/gradwire.h"
#include "gradwire/compress.h"

namespace {

void write(const std::string& path, const std::vector<float>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
}

// A full-rank pseudo-random value in [-1, 1) (a smooth formula such as
// sin(j + k) gives low-rank matrices, for which QR and Gram-Schmidt
// legitimately complete the basis differently).
float noise(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t h = (a + 1) * 0x9e3779b97f4a7c15ull ^ (b + 1) * 0xbf58476d1ce4e5b9ull ^
               (c + 1) * 0x94d049bb133111ebull;
  h ^= h >> 31;
  h *= 0xd6e8feb86659fd93ull;
  h ^= h >> 32;
  return float(double(h >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

// The model: the same list the Python side builds.
std::vector<gradwire::GradientInfo> model() {
  std::vector<gradwire::GradientInfo> gs;
  for (auto shape : std::vector<std::vector<size_t>>{{16, 3, 2, 2}, {20}, {30, 10}, {8, 40}}) {
    gradwire::GradientInfo g;
    g.elements = 1;
    for (size_t d : shape) g.elements *= d;
    g.shape = shape;
    gs.push_back(g);
  }
  return gs;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s OUT_DIR RANK STEPS\n", argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  const size_t rank = std::stoul(argv[2]);
  const int steps = std::stoi(argv[3]);
  auto comm = gradwire::Communicator::create();
  const auto gs = model();

  gradwire::PowerSGDOptions o;
  o.matrix_approximation_rank = rank;
  o.start_powersgd_iter = 0;
  o.min_compression_rate = 1;
  auto state = std::make_shared<gradwire::PowerSGDState>(o);
  gradwire::ReducerOptions ro;
  ro.rebuild_buckets = false;
  ro.comm_hook = gradwire::powersgd_hook(state);
  gradwire::Reducer reducer(*comm, gs, ro);
  const auto& bucket = reducer.plan().buckets.at(0);  // one Bucket holds everything

  // Initial Q per compressed matrix, in Bucket order: Q[j][k] = sin(...)
  // (torch layout cols x rank); ours is kept transposed (rank rows of cols).
  std::vector<float> q_ours, q_torch;
  size_t bucket_elements = 0;
  for (size_t g : bucket.gradients) {
    const size_t rows = gs[g].shape[0], cols = gs[g].elements / rows;
    bucket_elements += gs[g].elements;
    const size_t r = std::min({rows, cols, rank});
    if ((rows + cols) * r >= rows * cols) continue;  // uncompressed (min_compression_rate 1)
    for (size_t k = 0; k < r; ++k)
      for (size_t j = 0; j < cols; ++j) q_ours.push_back(noise(j, k, g + 1000));
    for (size_t j = 0; j < cols; ++j)
      for (size_t k = 0; k < r; ++k) q_torch.push_back(noise(j, k, g + 1000));
  }
  gradwire::compress::StateWriter w("PowerSGD");
  w.u64("rank", rank);
  w.u64("error_feedback", 1);
  w.u64("numel_before", 0);
  w.u64("numel_after", 0);
  w.u64("steps_seen", 0);
  w.u64("buckets", 1);
  w.u64("index", 0);
  w.u64("count", bucket_elements);
  w.floats("error", std::vector<float>(bucket_elements, 0.0f));
  w.u64("q_valid", 1);
  w.floats("q", q_ours);
  state->load_state(w.finish());
  const std::string me = ".r" + std::to_string(comm->rank());
  if (comm->rank() == 0) write(out + "/q0.bin", q_torch);

  std::vector<float> order;
  for (size_t g : bucket.gradients) order.push_back(float(g));
  if (comm->rank() == 0) write(out + "/order.bin", order);
  for (int t = 0; t < steps; ++t) {
    std::vector<std::vector<float>> grads;
    std::vector<float> in_all, out_all;
    for (size_t g = 0; g < gs.size(); ++g) {
      std::vector<float> v(gs[g].elements);
      for (size_t e = 0; e < v.size(); ++e) {
        v[e] = noise(e, g + 100 * size_t(comm->rank()), uint64_t(t));
      }
      grads.push_back(v);
    }
    for (size_t g : bucket.gradients) in_all.insert(in_all.end(), grads[g].begin(), grads[g].end());
    for (size_t g = gs.size(); g-- > 0;) reducer.mark_ready(g, grads[g].data());
    reducer.finalize();
    for (size_t g : bucket.gradients) out_all.insert(out_all.end(), grads[g].begin(), grads[g].end());
    write(out + "/in" + std::to_string(t) + me + ".bin", in_all);
    write(out + "/out" + std::to_string(t) + me + ".bin", out_all);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "powersgd_dump: %s\n", e.what());
  return 1;
}
