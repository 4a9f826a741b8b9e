// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// gradwire-perf: collective bandwidth and latency in the conventions of
// nccl-tests, launched with `mpirun -np N` or `gwlaunch -n N`.
//
//   -b min bytes  -e max bytes  -f step factor  -n iterations  -w warm-up
//   -c check (0/1)  -d dtype  -o redop  -z blocking (0/1)
//   --op allreduce|reduce_scatter|allgather|broadcast|alltoall|barrier|sendrecv|pingpong
//   --provider NAME  --compare mpi  --json FILE
//
// time is the slowest rank's mean per iteration; algbw = size / time;
// busbw = algbw x 2(n-1)/n (allreduce), x (n-1)/n (reduce_scatter,
// allgather, alltoall), x 1 (broadcast), as nccl-tests defines them.
// Point-to-point: sendrecv is nccl-tests' ring exchange (each rank receives
// from rank-1 and sends to rank+1, both posted before either is waited for:
// torch's batch_isend_irecv ring; busbw = algbw); pingpong is OSU's
// osu_latency (rank 0 sends, rank 1 sends it back; time is half the round
// trip; other ranks idle).
// With -z 0 all iterations are submitted before waiting (gradwire only).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>

#include "perf_common.h"

using namespace gradwire;
using namespace gwperf;

namespace {

Row run_gradwire(Communicator& comm, const Args& a, Buffers& b) {
  void* send = b.send_ptr();
  void* recv = b.recv_ptr();
  const int rank = comm.rank(), n = comm.size();
  const Coll kind = coll_kind(a.coll);
  const bool p2p = is_p2p(a.coll);
  // Point-to-point steps wait inside.
  auto p2p_step = [&] {
    if (kind == Coll::Sendrecv) {
      Work r = comm.recv(recv, b.count, a.dtype, (rank + n - 1) % n);
      Work s = comm.send(send, b.count, a.dtype, (rank + 1) % n);
      s.wait();
      r.wait();
    } else if (rank == 0 && n > 1) {
      comm.send(send, b.count, a.dtype, 1).wait();
      comm.recv(recv, b.count, a.dtype, 1).wait();
    } else if (rank == 1) {
      comm.recv(recv, b.count, a.dtype, 0).wait();
      comm.send(send, b.count, a.dtype, 0).wait();
    }
  };
  auto launch = [&]() -> Work {
    switch (kind) {
      case Coll::Allreduce: return comm.allreduce(send, recv, b.count, a.dtype, a.op);
      case Coll::ReduceScatter: return comm.reduce_scatter(send, recv, b.count, a.dtype, a.op);
      case Coll::Allgather: return comm.allgather(send, recv, b.count, a.dtype);
      case Coll::Broadcast: return comm.broadcast(send, recv, b.count, a.dtype, 0);
      case Coll::Barrier: return comm.barrier();
      default: return comm.alltoall(send, recv, b.send_count / comm.size(), a.dtype);
    }
  };
  auto step = [&] {
    if (p2p) {
      p2p_step();
    } else {
      launch().wait();
    }
  };
  Row row;
  row.impl = "gradwire";
  if (a.check) {
    std::fill(b.recv.begin(), b.recv.end(), std::byte{0});
    if (b.recv_dev) clear_device_recv(b);
    step();
    if (b.recv_dev) download_recv(b);
    row.wrong = count_wrong(a, b, comm.rank(), comm.size());
  }
  for (int i = 0; i < a.warmup; ++i) step();
  comm.barrier().wait();
  const auto t0 = std::chrono::steady_clock::now();
  if (a.blocking) {
    for (int i = 0; i < a.iters; ++i) step();
  } else {
    std::vector<Work> works;
    for (int i = 0; i < a.iters; ++i) works.push_back(launch());
    for (auto& w : works) w.wait();
  }
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
              a.iters;
  if (a.coll == "pingpong") us /= 2;  // one way
  double slowest = 0;
  comm.allreduce(&us, &slowest, 1, DataType::Float64, ReduceOp::Max).wait();
  int64_t wrong = 0;
  comm.allreduce(&row.wrong, &wrong, 1, DataType::Int64, ReduceOp::Sum).wait();
  row.time_us = slowest;
  row.wrong = wrong;
  return row;
}

void finish_row(Row& r, size_t bytes, size_t count, const Args& a, int n) {
  r.bytes = bytes;
  r.count = count;
  if (r.available && r.time_us > 0) {
    r.algbw = double(bytes) / (r.time_us * 1e-6) / 1e9;
    r.busbw = r.algbw * bus_factor(a.coll, n);
  }
}

void print_row(const Row& r, const Args& a) {
  if (!r.available) {
    std::printf(" %12zu %12zu %9s %7s %11s %9s %9s %7s  %s\n", r.bytes, r.count,
                std::string(to_string(a.dtype)).c_str(), std::string(to_string(a.op)).c_str(), "n/a",
                "n/a", "n/a", "n/a", r.impl.c_str());
    return;
  }
  std::printf(" %12zu %12zu %9s %7s %11.2f %9.3f %9.3f %7lld  %s\n", r.bytes, r.count,
              std::string(to_string(a.dtype)).c_str(), std::string(to_string(a.op)).c_str(),
              r.time_us, r.algbw, r.busbw, (long long)r.wrong, r.impl.c_str());
}

std::string json_row(const Row& r, const Args& a, int n, const std::string& provider) {
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "{\"impl\": \"%s\", \"coll\": \"%s\", \"ranks\": %d, \"provider\": \"%s\", "
                "\"dtype\": \"%s\", \"op\": \"%s\", \"bytes\": %zu, \"count\": %zu, "
                "\"available\": %s, \"time_us\": %.3f, \"algbw_gbs\": %.6f, \"busbw_gbs\": %.6f, "
                "\"wrong\": %lld}",
                r.impl.c_str(), a.coll.c_str(), n, provider.c_str(),
                std::string(to_string(a.dtype)).c_str(), std::string(to_string(a.op)).c_str(),
                r.bytes, r.count, r.available ? "true" : "false", r.time_us, r.algbw, r.busbw,
                (long long)r.wrong);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse_args(argc, argv);
  std::unique_ptr<Communicator> comm;
  try {
    comm = Communicator::create();
  } catch (const Error& e) {
    std::fprintf(stderr, "gradwire-perf: %s\n", e.what());
    return 1;
  }
  const int n = comm->size(), rank = comm->rank();
  const bool root = rank == 0;
  if (a.compare == "mpi" && !mpi_available()) {
    if (root) std::fprintf(stderr, "gradwire-perf: --compare mpi needs a launch with mpirun\n");
    return 2;
  }
  const MemoryBandwidth mem =
      a.probe_mib > 0 ? probe_memory_bandwidth(size_t(a.probe_mib) << 20) : MemoryBandwidth{};
  const double round_trip_ns = cacheline_round_trip_ns(rank);  // every rank takes part
  const std::string provider = comm->provider();
  if (root) {
    std::printf("# gradwire-perf: %s, %d ranks, provider %s, dtype %s, op %s, %d iterations "
                "(%d warm-up)%s%s\n",
                a.coll.c_str(), n, provider.c_str(), std::string(to_string(a.dtype)).c_str(),
                std::string(to_string(a.op)).c_str(), a.iters, a.warmup,
                a.compare.empty() ? "" : ", compared with Open MPI",
                a.buffers == "shared" ? ", buffers from allocate_shared"
                : a.buffers == "cuda" ? ", buffers in CUDA device memory" : "");
    if (a.probe_mib > 0) {
      std::printf("# memory bandwidth probe (one core, %d MiB): memcpy %.2f GB/s, a += b %.2f GB/s\n",
                  a.probe_mib, mem.memcpy_gbs, mem.add_gbs);
    }
    if (round_trip_ns > 0) {
      std::printf("# cache-line round trip between ranks 0 and 1: %.0f ns\n", round_trip_ns);
    }
    std::printf("#%12s %12s %9s %7s %11s %9s %9s %7s  %s\n", "size", "count", "type", "redop",
                "time", "algbw", "busbw", "#wrong", "impl");
    std::printf("#%12s %12s %9s %7s %11s %9s %9s %7s\n", "(B)", "(elements)", "", "", "(us)",
                "(GB/s)", "(GB/s)", "");
  }
  const size_t es = element_size(a.dtype);
  std::vector<size_t> sizes;
  for (double s = double(a.min_bytes); s <= double(a.max_bytes) * 1.0000001; s *= a.factor) {
    sizes.push_back(std::max(es, (size_t(s) / es) * es));
  }
  // A progress line on a terminal only; logs get the table alone.
  const bool progress = isatty(STDERR_FILENO) != 0;
  std::vector<std::string> json_rows;
  int64_t wrong_all = 0;
  const auto start = std::chrono::steady_clock::now();
  try {
    for (size_t k = 0; k < sizes.size(); ++k) {
      Buffers b = make_buffers(a, sizes[k], *comm);
      std::vector<Row> rows{run_gradwire(*comm, a, b)};
      if (a.compare == "mpi") rows.push_back(run_mpi(a, b, rank, n));
      for (auto& r : rows) {
        finish_row(r, sizes[k], b.count, a, n);
        wrong_all += r.wrong;
        if (root) print_row(r, a);
        // compare.py and plot.py tell the direct path apart by this label.
        json_rows.push_back(json_row(r, a, n, a.buffers == "shared" ? provider + "+direct"
                                              : a.buffers == "cuda"  ? provider + "+cuda"
                                                                     : provider));
      }
      if (rows.size() == 2 && rows[0].available && rows[1].available && root) {
        std::printf("#%12s gradwire/mpi busbw ratio %.2fx\n", "", rows[0].busbw / rows[1].busbw);
      }
      if (root && progress) {
        std::fflush(stdout);
        const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::fprintf(stderr, "\r[gradwire-perf] %zu/%zu sizes, %.0f s", k + 1, sizes.size(), el);
        if (k + 1 == sizes.size()) std::fprintf(stderr, "\n");
      }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "gradwire-perf: %s\n", e.what());
    return 1;
  }
  if (root) {
    std::printf("# out of bounds values: %lld %s\n", (long long)wrong_all, wrong_all ? "FAILED" : "OK");
    if (!a.json.empty()) {
      std::ofstream out(a.json);
      out << "{\"memory\": {\"memcpy_gbs\": " << mem.memcpy_gbs << ", \"add_gbs\": " << mem.add_gbs
          << "},\n \"rows\": [\n  ";
      for (size_t i = 0; i < json_rows.size(); ++i) out << (i ? ",\n  " : "") << json_rows[i];
      out << "\n]}\n";
    }
  }
  return wrong_all ? 1 : 0;
}
