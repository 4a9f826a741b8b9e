// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// sharded_memory: what a ShardedEngine (gradwire/sharded.h) holds per rank,
// by kind, for a transformer-shaped parameter list in bf16 with fp32
// master weights and Adam, against ZeRO's formulas (bytes per parameter:
// stage 1 4 + 12/N, stage 2 2 + 14/N, stage 3 16/N), plus the peak RSS of
// the process. One launch measures one stage at the launch's world size;
// benchmarks/sharded-compare runs stages 1-3 at 1, 2 and 4 ranks and
// prints the table.
//
//   gwlaunch -n 4 -- sharded_memory --stage 2 [--layers 6] [--model 768]
//                   [--vocab 16384] [--steps 2] [--bucket-mib 25] [--in-flight 4]
//
// The defaults are a GPT-2-small-like decoder of 67.7 M parameters: token
// embedding, 6 blocks (layer norms, fused QKV, projection, 4x MLP), final
// layer norm and an untied head. No tensors are computed: each step feeds
// the engine a synthetic gradient for every parameter in reverse order, as
// backward would, and (stage 3) gathers and releases the units as a
// ZeRO-3 forward and backward do (gather the unit, prefetch the next,
// release after use), so every buffer the engine keeps for a real step is
// allocated and touched. The framework's own tensors (activations, the
// gradient autograd writes) are not the engine's and are not in these
// figures; only one gradient-sized scratch array stands for them here.
//
// Prints one line per launch, on rank 0, with the maximum over ranks of
// each figure (ranks differ by their share of the padding):
//   RESULT stage=S world=N params=P parameters=B gradients=B master=B
//     optimizer_state=B bucket_buffers=B bucket_count=K bucket_bytes=B
//     peak_gathered=B scratch=B rss_start=B rss_peak=B
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gradwire/gradwire.h"
#include "gradwire/sharded.h"

namespace {

// Resident set now (VmRSS) and its peak (VmHWM), bytes, from
// /proc/self/status; getrusage's ru_maxrss is the fallback for the peak.
size_t proc_status_kib(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(key);
  while (std::getline(in, line)) {
    if (line.compare(0, n, key) == 0 && line.size() > n && line[n] == ':') {
      return std::strtoull(line.c_str() + n + 1, nullptr, 10);
    }
  }
  return 0;
}
size_t rss_bytes() { return proc_status_kib("VmRSS") * 1024; }
size_t peak_rss_bytes() {
  size_t kib = proc_status_kib("VmHWM");
  if (kib == 0) {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    kib = size_t(u.ru_maxrss);
  }
  return kib * 1024;
}

struct Shape {
  size_t layers = 6, model = 768, vocab = 16384;
};

// Registration (= forward) order; units: 0 the embedding, 1..L the
// blocks, L+1 the final norm and the head.
std::vector<gradwire::ShardedParameter> transformer(const Shape& s) {
  std::vector<gradwire::ShardedParameter> p;
  auto add = [&](std::string name, size_t elements, size_t unit) {
    p.push_back({.elements = elements, .dtype = gradwire::DataType::BFloat16, .device = {},
                 .name = std::move(name), .unit = unit});
  };
  const size_t d = s.model;
  add("embed.weight", s.vocab * d, 0);
  add("pos", 1024 * d, 0);
  for (size_t l = 0; l < s.layers; ++l) {
    const std::string b = "block" + std::to_string(l) + ".";
    const size_t u = l + 1;
    add(b + "ln1.weight", d, u);
    add(b + "ln1.bias", d, u);
    add(b + "qkv.weight", 3 * d * d, u);
    add(b + "qkv.bias", 3 * d, u);
    add(b + "proj.weight", d * d, u);
    add(b + "proj.bias", d, u);
    add(b + "ln2.weight", d, u);
    add(b + "ln2.bias", d, u);
    add(b + "fc1.weight", 4 * d * d, u);
    add(b + "fc1.bias", 4 * d, u);
    add(b + "fc2.weight", 4 * d * d, u);
    add(b + "fc2.bias", d, u);
  }
  add("ln_f.weight", d, s.layers + 1);
  add("ln_f.bias", d, s.layers + 1);
  add("head.weight", s.vocab * d, s.layers + 1);
  return p;
}

void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s --stage 1|2|3 [--layers L] [--model D] [--vocab V] [--steps S] "
               "[--bucket-mib M] [--in-flight K]\n",
               argv0);
}

}  // namespace

int main(int argc, char** argv) try {
  int stage = 2, steps = 2;
  Shape shape;
  size_t bucket_mib = 25, in_flight = 4;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      usage(argv[0]);
      return 2;
    }
    const char* v = argv[++i];
    if (a == "--stage") stage = std::atoi(v);
    else if (a == "--layers") shape.layers = std::strtoull(v, nullptr, 10);
    else if (a == "--model") shape.model = std::strtoull(v, nullptr, 10);
    else if (a == "--vocab") shape.vocab = std::strtoull(v, nullptr, 10);
    else if (a == "--steps") steps = std::atoi(v);
    else if (a == "--bucket-mib") bucket_mib = std::strtoull(v, nullptr, 10);
    else if (a == "--in-flight") in_flight = std::strtoull(v, nullptr, 10);
    else {
      usage(argv[0]);
      return 2;
    }
  }
  auto comm = gradwire::Communicator::create();
  const size_t rss_start = rss_bytes();
  const auto params = transformer(shape);
  size_t total = 0, largest = 0;
  for (const auto& p : params) {
    total += p.elements;
    largest = std::max(largest, p.elements);
  }
  gradwire::ShardedOptions o;
  o.stage = stage;
  o.caps.bucket_bytes = bucket_mib << 20;
  o.max_buckets_in_flight = in_flight;
  // Zeros everywhere (null initial values): nothing to broadcast.
  o.broadcast_parameters = false;
  gradwire::ShardedEngine engine(*comm, params, gradwire::ShardAdam::make({.lr = 1e-4}), o);

  // The gradient autograd would have written: one array of the largest
  // parameter, bf16 1e-3 (0x3A83), reused for every parameter.
  std::vector<uint16_t> grad(largest, 0x3A83);
  gradwire::ShardedMemory peak;
  auto sample = [&] {
    const auto m = engine.memory();
    peak.parameters = std::max(peak.parameters, m.parameters);
    peak.gradients = std::max(peak.gradients, m.gradients);
    peak.master = std::max(peak.master, m.master);
    peak.optimizer_state = std::max(peak.optimizer_state, m.optimizer_state);
    peak.bucket_buffers = std::max(peak.bucket_buffers, m.bucket_buffers);
    peak.bucket_buffer_count = std::max(peak.bucket_buffer_count, m.bucket_buffer_count);
    peak.peak_gathered = std::max(peak.peak_gathered, m.peak_gathered);
    peak.scratch = std::max(peak.scratch, m.scratch);
  };
  const size_t units = engine.units();
  for (int s = 0; s < steps; ++s) {
    if (stage == 3) {
      for (size_t u = 0; u < units; ++u) {  // forward
        engine.gather(u);
        if (u + 1 < units) engine.prefetch(u + 1);
        sample();
        engine.release(u);
      }
      for (size_t u = units; u-- > 0;) {  // backward: the unit's gradients, last first
        engine.gather(u);
        if (u > 0) engine.prefetch(u - 1);
        for (size_t i = params.size(); i-- > 0;) {
          if (params[i].unit == u) engine.mark_ready(i, grad.data());
        }
        sample();
        engine.release(u);
      }
    } else {
      engine.wait_parameters();
      for (size_t i = params.size(); i-- > 0;) {
        engine.mark_ready(i, grad.data());
        if (i % 8 == 0) sample();
      }
    }
    engine.finalize();
    sample();
    engine.step();
    sample();
  }
  if (stage != 3) engine.wait_parameters();
  sample();

  size_t largest_bucket = 0;
  for (const auto& b : engine.plan().buckets) largest_bucket = std::max(largest_bucket, b.padded);
  std::vector<double> f = {double(peak.parameters),      double(peak.gradients),
                           double(peak.master),          double(peak.optimizer_state),
                           double(peak.bucket_buffers),  double(peak.bucket_buffer_count),
                           double(largest_bucket * 2),   double(peak.peak_gathered),
                           double(peak.scratch),         double(rss_start),
                           double(peak_rss_bytes())};
  comm->allreduce(f.data(), f.data(), f.size(), gradwire::DataType::Float64,
                  gradwire::ReduceOp::Max)
      .wait();
  if (comm->rank() == 0) {
    std::printf(
        "RESULT stage=%d world=%d params=%zu buckets=%zu parameters=%.0f gradients=%.0f "
        "master=%.0f optimizer_state=%.0f bucket_buffers=%.0f bucket_count=%.0f "
        "bucket_bytes=%.0f peak_gathered=%.0f scratch=%.0f rss_start=%.0f rss_peak=%.0f\n",
        stage, comm->size(), total, engine.plan().buckets.size(), f[0], f[1], f[2], f[3], f[4],
        f[5], f[6], f[7], f[8], f[9], f[10]);
    std::fflush(stdout);
  }
  comm->barrier().wait();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "sharded_memory: %s\n", e.what());
  return 1;
}
