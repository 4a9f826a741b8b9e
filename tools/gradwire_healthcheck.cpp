// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// gradwire-healthcheck: run before training (or hourly on an idle cluster),
// launched like the job (mpirun, torchrun env, gwlaunch). Checks, in a few
// seconds:
//   version   every rank runs the same gradwire, provider, libfabric and NCCL
//   data      allreduce, allgather and reduce-scatter on known inputs give
//             exactly the known results on every rank
//   bandwidth each pair of ring neighbours (r, r+1 mod n) reaches a floor
// Prints a JSON report on rank 0 (stdout, or --output FILE) and exits 0 if
// everything passed, 1 naming the bad rank(s) and host(s) on stderr if not,
// 2 if the job could not even start (the message names the rank).
//
//   gradwire-healthcheck [--min-busbw-gbps X (0.05)] [--bytes N (4M)] [--output FILE]
//
// Test hook, GRADWIRE_HEALTHCHECK_INJECT=KIND:RANK with KIND one of
//   data     rank RANK contributes wrong data to every collective
//   version  rank RANK reports gradwire version "0.0.0-injected"
//   slow     pairs with rank RANK report a bandwidth a million times lower
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gradwire/gradwire.h"

using namespace gradwire;

namespace {

struct Inject {
  std::string kind;
  int rank = -1;
  bool on(const char* k, int me) const { return kind == k && rank == me; }
};

Inject parse_inject() {
  Inject in;
  const char* v = std::getenv("GRADWIRE_HEALTHCHECK_INJECT");
  if (!v || !*v) return in;
  std::string s(v);
  auto colon = s.find(':');
  in.kind = s.substr(0, colon);
  in.rank = colon == std::string::npos ? -1 : std::atoi(s.c_str() + colon + 1);
  return in;
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (static_cast<unsigned char>(c) < 0x20) o += ' ';
    else o += c;
  }
  return o + "\"";
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

// Fixed-size text field for allgather.
constexpr size_t kField = 128;
std::vector<std::string> allgather_text(Communicator& comm, const std::string& mine) {
  const int n = comm.size();
  std::vector<char> all(kField * size_t(n), 0);
  std::vector<char> buf(kField, 0);
  std::memcpy(buf.data(), mine.data(), std::min(mine.size(), kField - 1));
  std::memcpy(all.data() + kField * size_t(comm.rank()), buf.data(), kField);
  comm.allgather(all.data() + kField * size_t(comm.rank()), all.data(), kField * size_t(n),
                 DataType::UInt8)
      .wait();
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r) out.emplace_back(all.data() + kField * size_t(r));
  return out;
}

template <typename T>
std::vector<T> allgather_values(Communicator& comm, T mine, DataType dt) {
  std::vector<T> all(size_t(comm.size()));
  all[size_t(comm.rank())] = mine;
  comm.allgather(&all[size_t(comm.rank())], all.data(), all.size(), dt).wait();
  return all;
}

}  // namespace

int main(int argc, char** argv) {
  double min_busbw_gbps = 0.05;
  size_t bytes = 4 << 20;
  std::string output;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--min-busbw-gbps" && i + 1 < argc) min_busbw_gbps = std::atof(argv[++i]);
    else if (a == "--bytes" && i + 1 < argc) bytes = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--output" && i + 1 < argc) output = argv[++i];
    else {
      std::fprintf(stderr, "usage: gradwire-healthcheck [--min-busbw-gbps X] [--bytes N] "
                           "[--output FILE]\n");
      return 2;
    }
  }
  const Inject inject = parse_inject();
  std::unique_ptr<Communicator> comm;
  try {
    comm = Communicator::create();
  } catch (const Error& e) {
    // A real version or provider mismatch already fails here, naming ranks.
    std::fprintf(stderr, "gradwire-healthcheck: FAILED at start-up: %s\n", e.what());
    std::printf("{\"ok\": false, \"stage\": \"start-up\", \"error\": %s}\n", json_str(e.what()).c_str());
    return 2;
  }
  const int n = comm->size(), me = comm->rank();
  const auto t_start = std::chrono::steady_clock::now();
  std::set<int> bad;
  std::vector<std::string> problems, checks_json;

  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const auto hosts = allgather_text(*comm, host);
  auto who = [&](int r) { return "rank " + std::to_string(r) + " (" + hosts[size_t(r)] + ")"; };

  // ---- version handshake
  const std::string fab = libfabric_version();
  const std::string gw = inject.on("version", me) ? "0.0.0-injected" : version();
  // NCCL too (loading it takes a moment): a rank with another NCCL would
  // fail or hang in the first collective on CUDA buffers.
  const auto versions = allgather_text(*comm, gw + " " + comm->provider() + " libfabric " + fab +
                                                  " nccl " + nccl_version());
  std::map<std::string, int> votes;
  for (auto& v : versions) ++votes[v];
  std::string majority = versions[0];
  for (auto& [v, c] : votes)
    if (c > votes[majority]) majority = v;
  std::vector<int> odd;
  for (int r = 0; r < n; ++r)
    if (versions[size_t(r)] != majority) odd.push_back(r);
  for (int r : odd) {
    bad.insert(r);
    problems.push_back(who(r) + " runs '" + versions[size_t(r)] + "' where the others run '" +
                       majority + "'");
  }
  checks_json.push_back("{\"name\": \"version\", \"ok\": " + std::string(odd.empty() ? "true" : "false") +
                        ", \"expected\": " + json_str(majority) + ", \"odd_ranks\": [" + join(odd) + "]}");

  // ---- data: known inputs, exact expected results
  const bool corrupt = inject.on("data", me);
  auto data_check = [&](const char* name, int64_t wrong, std::vector<int> owners) {
    const auto all = allgather_values<int64_t>(*comm, wrong, DataType::Int64);
    std::vector<int> wrong_on;
    for (int r = 0; r < n; ++r)
      if (all[size_t(r)] != 0) wrong_on.push_back(r);
    for (int r : owners) bad.insert(r);
    if (!wrong_on.empty()) {
      std::string p = std::string(name) + " gave wrong results on ranks " + join(wrong_on);
      if (!owners.empty()) p += "; the data that was wrong came from " + join(owners).insert(0, "rank(s) ");
      else if (wrong_on.size() < size_t(n)) for (int r : wrong_on) bad.insert(r);
      problems.push_back(p);
    }
    checks_json.push_back("{\"name\": " + json_str(name) + ", \"ok\": " +
                          (wrong_on.empty() ? "true" : "false") + ", \"wrong_on_ranks\": [" +
                          join(wrong_on) + "], \"bad_senders\": [" + join(owners) + "]}");
  };
  {
    const size_t count = bytes / 4 + 3;
    std::vector<float> x(count);
    for (size_t i = 0; i < count; ++i) x[i] = float((me + 1) * int(i % 13 + 1)) + (corrupt ? 1.0f : 0.0f);
    comm->allreduce(x.data(), x.data(), count, DataType::Float32, ReduceOp::Sum).wait();
    const float s = float(n * (n + 1) / 2);
    int64_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += x[i] != s * float(i % 13 + 1);
    data_check("allreduce", wrong, {});
  }
  {
    const size_t count = 1000 * size_t(n) + 1;
    std::vector<int32_t> y(count, -1);
    const size_t off = shard_offset(count, n, me), cnt = shard_count(count, n, me);
    for (size_t j = 0; j < cnt; ++j) y[off + j] = int32_t(me * 1000000 + int(j)) + (corrupt ? 1 : 0);
    comm->allgather(y.data() + off, y.data(), count, DataType::Int32).wait();
    int64_t wrong = 0;
    int64_t owners_mask = 0;  // bit r: rank r's shard was wrong here
    for (int r = 0; r < n; ++r) {
      const size_t o = shard_offset(count, n, r), c = shard_count(count, n, r);
      for (size_t j = 0; j < c; ++j) {
        if (y[o + j] != int32_t(r * 1000000 + int(j))) {
          ++wrong;
          if (r < 63) owners_mask |= int64_t(1) << r;
        }
      }
    }
    // A shard wrong on every rank (its own included) was sent wrong.
    const auto masks = allgather_values<int64_t>(*comm, owners_mask, DataType::Int64);
    int64_t everywhere = ~int64_t(0);
    for (auto m : masks) everywhere &= m;
    std::vector<int> owners;
    for (int r = 0; r < std::min(n, 63); ++r)
      if (everywhere & (int64_t(1) << r)) owners.push_back(r);
    data_check("allgather", wrong, owners);
  }
  {
    const size_t count = 999 * size_t(n) + 2;
    std::vector<int64_t> z(count);
    for (size_t i = 0; i < count; ++i) z[i] = int64_t(me + 1) * int64_t(i) + (corrupt ? 1 : 0);
    std::vector<int64_t> out(shard_count(count, n, me));
    comm->reduce_scatter(z.data(), out.data(), count, DataType::Int64, ReduceOp::Sum).wait();
    const int64_t s = int64_t(n) * (n + 1) / 2;
    const size_t off = shard_offset(count, n, me);
    int64_t wrong = 0;
    for (size_t j = 0; j < out.size(); ++j) wrong += out[j] != s * int64_t(off + j);
    data_check("reduce_scatter", wrong, {});
  }

  // ---- bandwidth between ring neighbours, over a two-rank communicator each
  std::vector<std::string> bw_json;
  const int pairs = n == 1 ? 0 : n == 2 ? 1 : n;
  double my_busbw = -1;  // of pair (me, me+1)
  for (int k = 0; k < pairs; ++k) {
    const int a = k, b = (k + 1) % n;
    auto pair = comm->split({std::min(a, b), std::max(a, b)});
    if (!pair) continue;
    std::vector<float> buf(bytes / 4, 1.0f);
    for (int w = 0; w < 2; ++w)
      pair->allreduce(buf.data(), buf.data(), buf.size(), DataType::Float32, ReduceOp::Sum).wait();
    const int iters = 5;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i)
      pair->allreduce(buf.data(), buf.data(), buf.size(), DataType::Float32, ReduceOp::Sum).wait();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
    double busbw = double(buf.size() * 4) / secs / 1e9;  // 2(n-1)/n = 1 for two ranks
    if (inject.kind == "slow" && (inject.rank == a || inject.rank == b)) busbw /= 1e6;
    if (me == a) my_busbw = busbw;
  }
  const auto bws = allgather_values<double>(*comm, my_busbw, DataType::Float64);
  std::map<int, int> slow_count;
  for (int k = 0; k < pairs; ++k) {
    const int a = k, b = (k + 1) % n;
    const bool ok = bws[size_t(a)] >= min_busbw_gbps;
    if (!ok) {
      ++slow_count[a], ++slow_count[b];
      problems.push_back("the link between " + who(a) + " and " + who(b) + " reached " +
                         std::to_string(bws[size_t(a)]) + " GB/s, below the floor of " +
                         std::to_string(min_busbw_gbps) + " GB/s");
    }
    char line[256];
    std::snprintf(line, sizeof(line), "{\"ranks\": [%d, %d], \"busbw_gbps\": %.4f, \"ok\": %s}", a, b,
                  bws[size_t(a)], ok ? "true" : "false");
    bw_json.push_back(line);
  }
  // The rank in every slow pair is the suspect (both, with two ranks).
  int most = 0;
  for (auto& [r, c] : slow_count) most = std::max(most, c);
  for (auto& [r, c] : slow_count)
    if (c == most) bad.insert(r);

  const bool ok = problems.empty();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  std::vector<int> bad_v(bad.begin(), bad.end());
  if (me == 0) {
    std::string j = "{\"ok\": " + std::string(ok ? "true" : "false") + ", \"world_size\": " +
                    std::to_string(n) + ", \"seconds\": " + std::to_string(secs) + ",\n \"ranks\": [";
    for (int r = 0; r < n; ++r)
      j += std::string(r ? ", " : "") + "{\"rank\": " + std::to_string(r) + ", \"host\": " +
           json_str(hosts[size_t(r)]) + ", \"versions\": " + json_str(versions[size_t(r)]) + "}";
    j += "],\n \"checks\": [";
    for (size_t i = 0; i < checks_json.size(); ++i) j += (i ? ",\n  " : "") + checks_json[i];
    j += "],\n \"bandwidth\": [";
    for (size_t i = 0; i < bw_json.size(); ++i) j += (i ? ",\n  " : "") + bw_json[i];
    j += "],\n \"bad_ranks\": [" + join(bad_v) + "], \"problems\": [";
    for (size_t i = 0; i < problems.size(); ++i) j += (i ? ", " : "") + json_str(problems[i]);
    j += "]}\n";
    if (output.empty()) std::fputs(j.c_str(), stdout);
    else std::ofstream(output) << j;
  }
  if (!ok) {
    std::string names;
    for (int r : bad_v) names += (names.empty() ? "" : ", ") + who(r);
    std::fprintf(stderr, "gradwire-healthcheck: rank %d: FAILED: bad %s: %s\n", me,
                 names.empty() ? "rank unknown" : names.c_str(), problems[0].c_str());
    return 1;
  }
  if (me == 0) std::fprintf(stderr, "gradwire-healthcheck: %d ranks healthy (%.2f s)\n", n, secs);
  return 0;
}
