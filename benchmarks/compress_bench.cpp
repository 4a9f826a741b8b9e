// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// gradwire-compress-bench: the CPU compression kernels against this
// machine's memory bandwidth, measured in the same run (the probe of
// gradwire-perf). Every figure is traffic: bytes read plus bytes written per
// second, so a memcpy of N bytes counts 2N and the fused pack pass counts
// 4n (x) + 8n (error read and written) + n/8 (signs) for n floats.
//
//   build/benchmarks/gradwire-compress-bench [--elements N] [--reps R] [--json FILE]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/compress_math.h"
#include "kernels/cpu/compress.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/reduce.h"
#include "perf_common.h"

namespace k = gradwire::kernels;

namespace {

struct Result {
  std::string name;
  double traffic_gbs;  // bytes read + written per second
  double fraction;     // of the memcpy traffic rate
};

}  // namespace

int main(int argc, char** argv) {
  size_t n = size_t(1) << 24;  // 16 Mi floats: 64 MiB per buffer, well past the caches
  int reps = 7;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--elements") n = std::stoull(next());
    else if (a == "--reps") reps = std::stoi(next());
    else if (a == "--json") json = next();
    else {
      std::fprintf(stderr, "usage: %s [--elements N] [--reps R] [--json FILE]\n", argv[0]);
      return 2;
    }
  }
  const double bytes = double(n) * 4;
  const auto bw = gwperf::probe_memory_bandwidth(size_t(bytes));
  const double memcpy_traffic = 2 * bw.memcpy_gbs, add_traffic = 3 * bw.add_gbs;
  std::printf("# gradwire-compress-bench: %zu float32 elements, best of %d, CPU kernels %s\n", n,
              reps, std::string(k::cpu::to_string(k::cpu::active_isa())).c_str());
  std::printf("# memory probe: memcpy %.2f GB/s traffic, a += b %.2f GB/s traffic\n",
              memcpy_traffic, add_traffic);

  std::mt19937 rng(1);
  std::normal_distribution<float> d;
  std::vector<float> x(n), err(n, 0.0f), out(n);
  for (auto& v : x) v = d(rng);
  std::vector<uint8_t> bits(k::packed_bytes(n));
  std::vector<uint16_t> half(n);
  std::vector<Result> results;
  auto report = [&](const std::string& name, double traffic_bytes, double seconds) {
    const double gbs = traffic_bytes / seconds / 1e9;
    results.push_back({name, gbs, gbs / memcpy_traffic});
    std::printf("%-34s %8.2f GB/s  %5.0f%% of memcpy\n", name.c_str(), gbs, 100 * gbs / memcpy_traffic);
  };

  float scale = 0;
  report("sum_squares(x + error)", 2 * bytes, gwperf::best_seconds(reps, [&] {
           scale = k::rms_scale(k::sum_squares(x.data(), err.data(), n), n);
         }));
  report("compress_signs (fused pack pass)", 3 * bytes + bytes / 32, gwperf::best_seconds(reps, [&] {
           k::compress_signs(x.data(), err.data(), scale, bits.data(), n);
         }));
  report("decompress_signs", bytes + bytes / 32, gwperf::best_seconds(reps, [&] {
           k::decompress_signs(bits.data(), scale, out.data(), n);
         }));
  report("accumulate_signs", 2 * bytes + bytes / 32, gwperf::best_seconds(reps, [&] {
           k::accumulate_signs(bits.data(), scale, out.data(), n);
         }));
  report("float_to_half", bytes * 1.5, gwperf::best_seconds(reps, [&] {
           k::float_to_half(half.data(), x.data(), n);
         }));
  report("float_to_bf16", bytes * 1.5, gwperf::best_seconds(reps, [&] {
           k::float_to_bf16(half.data(), x.data(), n);
         }));
  // PowerSGD on one rows x cols matrix of the same size, rank 4: each
  // product streams the matrix once (P and Q are small).
  const size_t rows = 4096, cols = n / rows, r = 4;
  std::vector<float> Pt(r * rows), Qt(r * cols);
  for (auto& v : Qt) v = d(rng);
  report("powersgd P = M Q (rank 4)", bytes, gwperf::best_seconds(reps, [&] {
           k::lowrank_project(x.data(), rows, cols, Qt.data(), r, Pt.data());
         }));
  report("powersgd Q = M^T P (rank 4)", bytes, gwperf::best_seconds(reps, [&] {
           k::lowrank_project_transposed(x.data(), rows, cols, Pt.data(), r, Qt.data());
         }));
  report("powersgd M = P Q^T (rank 4)", bytes, gwperf::best_seconds(reps, [&] {
           k::lowrank_expand(Pt.data(), Qt.data(), rows, cols, r, out.data());
         }));
  report("powersgd orthonormalise P (4 x 4096)", 2.0 * r * r * rows * 4, gwperf::best_seconds(reps, [&] {
           k::orthonormalize_rows(Pt.data(), r, rows, 0.0f);
         }));
  if (!json.empty()) {
    std::ofstream f(json);
    f << "{\"elements\": " << n << ", \"memcpy_traffic_gbs\": " << memcpy_traffic
      << ", \"add_traffic_gbs\": " << add_traffic << ", \"kernels\": [";
    for (size_t i = 0; i < results.size(); ++i) {
      f << (i ? ", " : "") << "{\"name\": \"" << results[i].name << "\", \"traffic_gbs\": "
        << results[i].traffic_gbs << ", \"fraction_of_memcpy\": " << results[i].fraction << "}";
    }
    f << "]}\n";
  }
  return 0;
}
