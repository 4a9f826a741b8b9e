// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "perf_common.h"

namespace gwperf {

namespace {

size_t parse_size(const std::string& flag, const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s || v < 0) {
    std::fprintf(stderr, "gradwire-perf: %s '%s' is not a size (e.g. 8, 64K, 1M, 1G)\n",
                 flag.c_str(), s);
    std::exit(2);
  }
  switch (*end) {
    case 'K': case 'k': v *= 1024; break;
    case 'M': case 'm': v *= 1024.0 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
    default: break;
  }
  return size_t(v);
}

[[noreturn]] void usage(const std::string& msg) {
  std::fprintf(stderr,
               "gradwire-perf: %s\n"
               "usage: gradwire-perf [-b minbytes] [-e maxbytes] [-f factor] [-n iters] "
               "[-w warmup]\n"
               "         [-c 0|1] [-d dtype] [-o sum|avg|min|max|prod] [-z 0|1]\n"
               "         [--op allreduce|reduce_scatter|allgather|broadcast|alltoall|barrier|\n"
               "               sendrecv|pingpong]\n"
               "         [--provider NAME] [--compare mpi] [--json FILE] [--buffers private|shared|cuda]\n"
               "         [--probe-mib N (0: no memory bandwidth probe)]\n",
               msg.c_str());
  std::exit(2);
}

}  // namespace

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    if (k == "-h" || k == "--help") usage("collective bandwidth in the conventions of nccl-tests");
    if (i + 1 >= argc) usage("missing value for " + k);
    const char* v = argv[++i];
    try {
      if (k == "-b") a.min_bytes = parse_size(k, v);
      else if (k == "-e") a.max_bytes = parse_size(k, v);
      else if (k == "-f") a.factor = std::atof(v);
      else if (k == "-n") a.iters = std::atoi(v);
      else if (k == "-w") a.warmup = std::atoi(v);
      else if (k == "-c") a.check = std::atoi(v) != 0;
      else if (k == "-z") a.blocking = std::atoi(v) != 0;
      else if (k == "-d") a.dtype = gradwire::parse_data_type(v);
      else if (k == "-o") a.op = gradwire::parse_reduce_op(v);
      else if (k == "--op") a.coll = v;
      else if (k == "--provider") setenv("GRADWIRE_OFI_PROVIDER", v, 1);
      else if (k == "--compare") a.compare = v;
      else if (k == "--json") a.json = v;
      else if (k == "--buffers") a.buffers = v;
      else if (k == "--probe-mib") a.probe_mib = std::atoi(v);
      else usage("unknown flag " + k);
    } catch (const gradwire::Error& e) {
      usage(e.what());
    }
  }
  if (a.factor <= 1) usage("-f must be greater than 1");
  if (a.iters < 1 || a.warmup < 0) usage("-n must be at least 1 and -w at least 0");
  if (a.min_bytes > a.max_bytes) usage("-b must not exceed -e");
  if (a.coll != "allreduce" && a.coll != "reduce_scatter" && a.coll != "allgather" &&
      a.coll != "broadcast" && a.coll != "alltoall" && a.coll != "barrier" && !is_p2p(a.coll)) {
    usage("unknown collective " + a.coll);
  }
  if (!a.compare.empty() && a.compare != "mpi") usage("--compare takes 'mpi'");
  if (a.buffers != "private" && a.buffers != "shared" && a.buffers != "cuda") {
    usage("--buffers takes private, shared or cuda");
  }
  if (a.buffers == "cuda" && !a.compare.empty()) {
    usage("--buffers cuda cannot --compare mpi (this Open MPI is not CUDA-aware)");
  }
  if (is_p2p(a.coll) && !a.blocking) usage("-z 0 applies to collectives only");
  if (is_p2p(a.coll) && a.buffers == "cuda") usage("point-to-point takes host buffers only");
  return a;
}

double bus_factor(const std::string& coll, int n) {
  if (coll == "allreduce") return 2.0 * (n - 1) / n;
  if (coll == "broadcast" || is_p2p(coll)) return 1.0;
  return double(n - 1) / n;  // reduce_scatter, allgather, alltoall
}

}  // namespace gwperf
