// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// gradwire-perf: collective bandwidth and latency in the conventions of
// nccl-tests, launched with `mpirun -np N` or `gwlaunch -n N`.
//
//   -b min bytes  -e max bytes  -f step factor  -n iterations  -w warm-up
//   -c check (0/1)  -d dtype  -o redop  -z blocking (0/1)
//   --op allreduce|reduce_scatter|allgather|broadcast|alltoall
//   --provider NAME (sets GRADWIRE_OFI_PROVIDER)
//
// time is the slowest rank's mean per iteration; algbw = size / time;
// busbw = algbw x 2(n-1)/n (allreduce), x (n-1)/n (reduce_scatter,
// allgather, alltoall), x 1 (broadcast), as nccl-tests defines them.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gradwire/gradwire.h"

using namespace gradwire;

namespace {

struct Args {
  size_t min_bytes = 8, max_bytes = 64u << 20;
  double factor = 2;
  int iters = 20, warmup = 5;
  bool check = true, blocking = true;
  DataType dtype = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;
  std::string coll = "allreduce";
};

size_t parse_size(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  switch (end && *end ? *end : ' ') {
    case 'K': case 'k': v *= 1024; break;
    case 'M': case 'm': v *= 1024 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
    default: break;
  }
  return size_t(v);
}

[[noreturn]] void usage(const char* msg) {
  std::fprintf(stderr,
               "gradwire-perf: %s\nusage: gradwire-perf [-b min] [-e max] [-f factor] [-n iters] "
               "[-w warmup] [-c 0|1] [-d dtype] [-o sum|avg|min|max|prod] [-z 0|1]\n"
               "       [--op allreduce|reduce_scatter|allgather|broadcast|alltoall] "
               "[--provider NAME]\n",
               msg);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (i + 1 >= argc) usage(("missing value for " + k).c_str());
    const char* v = argv[++i];
    if (k == "-b") a.min_bytes = parse_size(v);
    else if (k == "-e") a.max_bytes = parse_size(v);
    else if (k == "-f") a.factor = std::atof(v);
    else if (k == "-n") a.iters = std::atoi(v);
    else if (k == "-w") a.warmup = std::atoi(v);
    else if (k == "-c") a.check = std::atoi(v) != 0;
    else if (k == "-z") a.blocking = std::atoi(v) != 0;
    else if (k == "-d") a.dtype = parse_data_type(v);
    else if (k == "-o") a.op = parse_reduce_op(v);
    else if (k == "--op") a.coll = v;
    else if (k == "--provider") setenv("GRADWIRE_OFI_PROVIDER", v, 1);
    else usage(("unknown flag " + k).c_str());
  }
  if (a.factor <= 1 || a.iters < 1 || a.min_bytes > a.max_bytes) usage("bad sweep parameters");
  if (a.coll != "allreduce" && a.coll != "reduce_scatter" && a.coll != "allgather" &&
      a.coll != "broadcast" && a.coll != "alltoall") {
    usage(("unknown collective " + a.coll).c_str());
  }
  return a;
}

double bus_factor(const std::string& coll, int n) {
  if (coll == "allreduce") return 2.0 * (n - 1) / n;
  if (coll == "broadcast") return 1.0;
  return double(n - 1) / n;
}

// Fills `count` elements with small integers that every dtype holds exactly
// (so sums of a few ranks are exact too): value = (rank + i) % 7.
void fill(std::vector<std::byte>& buf, DataType dt, size_t count, int rank) {
  std::vector<double> vals(count);
  for (size_t i = 0; i < count; ++i) vals[i] = double((rank + i) % 7);
  const size_t es = element_size(dt);
  for (size_t i = 0; i < count; ++i) {
    std::byte* p = buf.data() + i * es;
    double v = vals[i];
    switch (dt) {
      case DataType::Float32: { float f = float(v); std::memcpy(p, &f, 4); break; }
      case DataType::Float64: std::memcpy(p, &v, 8); break;
      case DataType::Float16: { uint16_t h = uint16_t(v == 0 ? 0 : 0x3c00 + 0); 
        // exact small integers in binary16: build from float bits
        float f = float(v); uint32_t b; std::memcpy(&b, &f, 4);
        h = v == 0 ? 0 : uint16_t(((b >> 16) & 0x8000) | ((((b >> 23) & 0xff) - 112) << 10) | ((b >> 13) & 0x3ff));
        std::memcpy(p, &h, 2); break; }
      case DataType::BFloat16: { float f = float(v); uint32_t b; std::memcpy(&b, &f, 4);
        uint16_t h = uint16_t(b >> 16); std::memcpy(p, &h, 2); break; }
      case DataType::Int32: { int32_t x = int32_t(v); std::memcpy(p, &x, 4); break; }
      case DataType::Int64: { int64_t x = int64_t(v); std::memcpy(p, &x, 8); break; }
      case DataType::UInt8: { uint8_t x = uint8_t(v); std::memcpy(p, &x, 1); break; }
    }
  }
}

double as_double(const std::byte* p, DataType dt) {
  switch (dt) {
    case DataType::Float32: { float f; std::memcpy(&f, p, 4); return f; }
    case DataType::Float64: { double d; std::memcpy(&d, p, 8); return d; }
    case DataType::Float16: { uint16_t h; std::memcpy(&h, p, 2);
      if ((h & 0x7fff) == 0) return 0;
      uint32_t b = (uint32_t(h & 0x8000) << 16) | ((((h >> 10) & 0x1f) + 112u) << 23) | (uint32_t(h & 0x3ff) << 13);
      float f; std::memcpy(&f, &b, 4); return f; }
    case DataType::BFloat16: { uint16_t h; std::memcpy(&h, p, 2); uint32_t b = uint32_t(h) << 16;
      float f; std::memcpy(&f, &b, 4); return f; }
    case DataType::Int32: { int32_t x; std::memcpy(&x, p, 4); return x; }
    case DataType::Int64: { int64_t x; std::memcpy(&x, p, 8); return double(x); }
    case DataType::UInt8: return double(uint8_t(*p));
  }
  return 0;
}

struct Row {
  double time_us;
  int64_t wrong;
};

Row run_size(Communicator& comm, const Args& a, size_t bytes) {
  const int n = comm.size(), rank = comm.rank();
  const size_t es = element_size(a.dtype);
  const size_t count = bytes / es;
  // Buffer sizes per collective (nccl-tests: size is the larger buffer).
  size_t send_count = count, recv_count = count;
  if (a.coll == "reduce_scatter") recv_count = shard_count(count, n, rank);
  if (a.coll == "allgather") send_count = shard_count(count, n, rank);
  if (a.coll == "alltoall") send_count = recv_count = (count / n) * n;
  std::vector<std::byte> send(send_count * es), recv(recv_count * es);
  fill(send, a.dtype, send_count, rank);

  auto launch = [&]() -> Work {
    if (a.coll == "allreduce") return comm.allreduce(send.data(), recv.data(), count, a.dtype, a.op);
    if (a.coll == "reduce_scatter")
      return comm.reduce_scatter(send.data(), recv.data(), count, a.dtype, a.op);
    if (a.coll == "allgather") return comm.allgather(send.data(), recv.data(), count, a.dtype);
    if (a.coll == "broadcast") return comm.broadcast(send.data(), recv.data(), count, a.dtype, 0);
    return comm.alltoall(send.data(), recv.data(), count / n, a.dtype);
  };

  Row row{0, 0};
  if (a.check) {
    launch().wait();
    // Expected values from the fill pattern.
    for (size_t i = 0; i < recv_count; ++i) {
      double expect = 0;
      if (a.coll == "allreduce" || a.coll == "reduce_scatter") {
        const size_t gi = i + (a.coll == "reduce_scatter" ? shard_offset(count, n, rank) : 0);
        double acc = double((0 + gi) % 7);
        for (int r = 1; r < n; ++r) {
          double x = double((r + gi) % 7);
          switch (a.op) {
            case ReduceOp::Sum: case ReduceOp::Avg: acc += x; break;
            case ReduceOp::Prod: acc *= x; break;
            case ReduceOp::Min: acc = std::min(acc, x); break;
            case ReduceOp::Max: acc = std::max(acc, x); break;
          }
        }
        if (a.op == ReduceOp::Avg) acc = is_floating(a.dtype) ? acc / n : std::trunc(acc / n);
        expect = acc;
      } else if (a.coll == "allgather") {
        int owner = 0;
        while (owner + 1 < n && shard_offset(count, n, owner + 1) <= i) ++owner;
        expect = double((owner + (i - shard_offset(count, n, owner))) % 7);
      } else if (a.coll == "broadcast") {
        expect = double(i % 7);
      } else {
        const size_t per = count / n, from = i / per, j = rank * per + (i % per);
        expect = double((from + j) % 7);
      }
      double got = as_double(recv.data() + i * es, a.dtype);
      const double tol = is_floating(a.dtype) ? std::fabs(expect) * 1e-2 + 1e-6 : 0;
      // Integer wrap-around of uint8/products is not checked (outside the pattern's range).
      if (std::fabs(got - expect) > tol && !(a.dtype == DataType::UInt8 && expect > 255)) ++row.wrong;
    }
  }
  for (int i = 0; i < a.warmup; ++i) launch().wait();
  comm.barrier().wait();
  const auto t0 = std::chrono::steady_clock::now();
  if (a.blocking) {
    for (int i = 0; i < a.iters; ++i) launch().wait();
  } else {
    std::vector<Work> works;
    for (int i = 0; i < a.iters; ++i) works.push_back(launch());
    for (auto& w : works) w.wait();
  }
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
              a.iters;
  double slowest = 0;
  comm.allreduce(&us, &slowest, 1, DataType::Float64, ReduceOp::Max).wait();
  int64_t wrong_total = 0;
  comm.allreduce(&row.wrong, &wrong_total, 1, DataType::Int64, ReduceOp::Sum).wait();
  row.time_us = slowest;
  row.wrong = wrong_total;
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  std::unique_ptr<Communicator> comm;
  try {
    comm = Communicator::create();
  } catch (const Error& e) {
    std::fprintf(stderr, "gradwire-perf: %s\n", e.what());
    return 1;
  }
  const int n = comm->size();
  const bool root = comm->rank() == 0;
  if (root) {
    std::printf("# gradwire-perf: %s, %d ranks, provider %s, dtype %s, op %s, %d iterations "
                "(%d warm-up)\n",
                a.coll.c_str(), n, comm->provider().c_str(), std::string(to_string(a.dtype)).c_str(),
                std::string(to_string(a.op)).c_str(), a.iters, a.warmup);
    std::printf("#%12s %12s %9s %7s %11s %9s %9s %7s\n", "size", "count", "type", "redop", "time",
                "algbw", "busbw", "#wrong");
    std::printf("#%12s %12s %9s %7s %11s %9s %9s %7s\n", "(B)", "(elements)", "", "", "(us)",
                "(GB/s)", "(GB/s)", "");
  }
  const size_t es = element_size(a.dtype);
  int64_t wrong_all = 0;
  try {
    for (double b = double(a.min_bytes); b <= double(a.max_bytes) * 1.0000001; b *= a.factor) {
      size_t bytes = std::max(es, (size_t(b) / es) * es);
      Row row = run_size(*comm, a, bytes);
      wrong_all += row.wrong;
      double algbw = double(bytes) / (row.time_us * 1e-6) / 1e9;
      if (root) {
        std::printf(" %12zu %12zu %9s %7s %11.2f %9.3f %9.3f %7lld\n", bytes, bytes / es,
                    std::string(to_string(a.dtype)).c_str(), std::string(to_string(a.op)).c_str(),
                    row.time_us, algbw, algbw * bus_factor(a.coll, n), (long long)row.wrong);
        std::fflush(stdout);
      }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "gradwire-perf: %s\n", e.what());
    return 1;
  }
  if (root) std::printf("# out of bounds values: %lld %s\n", (long long)wrong_all, wrong_all ? "FAILED" : "OK");
  return wrong_all ? 1 : 0;
}
