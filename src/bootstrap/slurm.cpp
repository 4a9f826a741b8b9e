// Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
// Note [launching under Slurm]: a task that `srun` starts finds its place
// in srun's variables: SLURM_PROCID (rank), SLURM_STEP_NUM_TASKS (size; the
// step's, where SLURM_NTASKS is the job's in a batch script and a
// component's in a heterogeneous step), SLURM_LOCALID (local rank),
// SLURM_NODEID, SLURM_JOB_ID and SLURM_STEP_ID (who the job is), and
// SLURM_STEP_NODELIST (Slurm's hostlist syntax, hostlist.h). Rank 0 serves
// gradwire's TCP store on the step's first node, the node that block and
// cyclic distributions give task 0 (checked on rank 0 against
// SLURMD_NODENAME and SLURM_NODEID, so another layout is an error, not a
// wait), at the port of Note [Slurm store port] or GRADWIRE_STORE_PORT.
//
// What is a task: srun sets SLURM_STEP_ID in every task. A job's batch
// script (sbatch) also has SLURM_PROCID=0 and the job's SLURM_NTASKS, and
// an salloc shell has SLURM_JOB_ID, but neither is one of the tasks: read
// as a task, the batch script would be rank 0 of N waiting for N-1 ranks
// that never start. So without SLURM_STEP_ID a job of one task is a world
// of one and a job of more is an error saying to launch with srun.
//
// Never a silent world of one: a step of one task in a job of several
// nodes (a program run in salloc's interactive step, `srun -n1` in a
// multi-node batch script) is an error too; and every variable is read
// strictly (a malformed value is an InvalidArgument naming it).
//
// Slurm gives tasks no secret: the store is authenticated when the user
// exports GRADWIRE_JOB_SECRET before srun (srun passes the environment on),
// else unauthenticated with rank 0's warning (Note [job secret policy]).
#include "bootstrap/slurm.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <optional>
#include <vector>

#include "base/raise.h"
#include "bootstrap/env.h"
#include "bootstrap/hostlist.h"
#include "bootstrap/socket.h"
#include "bootstrap/store.h"

namespace gradwire::bootstrap {

namespace {

using env::get;

// Variables read in a Slurm task; `why` says what made us read them.
struct SlurmReader {
  std::string why;

  std::string require(const char* name, const char* expected) const {
    auto v = get(name);
    if (!v) {
      raise(ErrorCode::InvalidArgument,
            "{} is not set (expected {}); {}, so gradwire expects every variable srun gives "
            "its tasks: launch the program with srun, or give the rendezvous yourself (RANK, "
            "WORLD_SIZE, MASTER_ADDR, MASTER_PORT)",
            name, expected, why);
    }
    return *v;
  }

  uint64_t u64(const char* name, const std::string& text, uint64_t hi) const {
    auto v = env::parse_u64(text);
    if (!v || *v > hi) {
      raise(ErrorCode::InvalidArgument, "{}='{}' is not an integer in 0..{}; {}", name, text, hi,
            why);
    }
    return *v;
  }

  int integer(const char* name, const std::string& text, int lo, int hi) const {
    auto v = env::parse_int(text);
    if (!v || *v < lo || *v > hi) {
      raise(ErrorCode::InvalidArgument, "{}='{}' is not an integer in {}..{}; {}", name, text,
            lo, hi, why);
    }
    return *v;
  }

  std::optional<int> optional_int(const char* name, int lo, int hi) const {
    auto v = get(name);
    if (!v) return std::nullopt;
    return integer(name, *v, lo, hi);
  }
};

bool is_loopback(const SockAddr& a) {
  if (a.family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a.addr);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (a.family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a.addr);
    return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
  }
  return false;
}

// The job's batch script or salloc shell: not a task of a step.
Rendezvous outside_a_step() {
  auto ntasks = get("SLURM_NTASKS");
  if (!ntasks) return Rendezvous::single();
  SlurmReader r{fmt::format("this process is in Slurm job {}", get("SLURM_JOB_ID").value_or("?"))};
  const int n = r.integer("SLURM_NTASKS", *ntasks, 1, INT_MAX);
  if (n == 1) return Rendezvous::single();
  raise(ErrorCode::InvalidArgument,
        "SLURM_NTASKS={} is set but SLURM_STEP_ID is not: this process runs in the batch "
        "script or salloc shell of Slurm job {}, not as one of the {} tasks that srun starts, "
        "and would train alone; launch it with srun (e.g. srun --kill-on-bad-exit=1 prog), "
        "or unset SLURM_NTASKS to run one process here on purpose",
        n, get("SLURM_JOB_ID").value_or("?"), n);
}

// SLURM_STEP_NUM_TASKS, else SLURM_NTASKS; both set: they must agree.
int step_size(const SlurmReader& r) {
  auto step = get("SLURM_STEP_NUM_TASKS"), all = get("SLURM_NTASKS");
  if (!step && !all) {
    r.require("SLURM_STEP_NUM_TASKS", "the number of tasks in the step; or SLURM_NTASKS");
  }
  const int size = step ? r.integer("SLURM_STEP_NUM_TASKS", *step, 1, INT_MAX)
                        : r.integer("SLURM_NTASKS", *all, 1, INT_MAX);
  if (step && all) {
    const int n = r.integer("SLURM_NTASKS", *all, 1, INT_MAX);
    if (n != size) {
      raise(ErrorCode::InvalidArgument,
            "SLURM_STEP_NUM_TASKS={} but SLURM_NTASKS={}: the step's tasks and the job's "
            "disagree; srun sets both to the step's count, so something in the task's "
            "environment changed one: launch the program with srun directly ({})",
            size, n, r.why);
    }
  }
  return size;
}

}  // namespace

// Note [Slurm store port]: without GRADWIRE_STORE_PORT, the store listens
// on 16000 + 2 * ((mix(SLURM_JOB_ID) + SLURM_STEP_ID) mod 8000): even
// ports in [16000, 32000). Below Linux's ephemeral range (32768-60999), so
// no outgoing connection on rank 0's node can be holding it, and far from
// Slurm's own 6817-6819. Steps of one job take consecutive slots, so two
// steps of a job (concurrent `srun ... &`) never collide unless 8000 steps
// apart; jobs are spread by a 64-bit mix of the job id, so two jobs sharing
// a first node collide with odds of about 1 in 8000 per pair of steps, and
// then the later rank 0 fails to bind (naming GRADWIRE_STORE_PORT) and its
// other ranks are refused by the store they reached (Note [same job]). The
// odd port above is left for torch's own store when gradwire.torch fills
// torch's variables from Slurm's.
uint16_t slurm_store_port(uint64_t job, uint64_t step) {
  uint64_t z = job + 0x9e3779b97f4a7c15ull;  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  const uint64_t slot = (z % kSlurmPortSlots + step % kSlurmPortSlots) % kSlurmPortSlots;
  return uint16_t(kSlurmPortBase + 2 * slot);
}

bool in_slurm_job() {
  return get("SLURM_JOB_ID") || get("SLURM_PROCID") || get("SLURM_STEP_ID") ||
         get("SLURM_STEPID");
}

Rendezvous slurm_rendezvous() {
  const char* step_var = get("SLURM_STEP_ID") ? "SLURM_STEP_ID" : "SLURM_STEPID";
  const auto step_text = get(step_var);
  if (!step_text) return outside_a_step();
  SlurmReader r{fmt::format("this is a task that srun started ({}='{}')", step_var, *step_text)};
  if (auto het = get("SLURM_HET_SIZE")) {
    raise(ErrorCode::InvalidArgument,
          "SLURM_HET_SIZE='{}' is set: a heterogeneous Slurm step (srun ... : ...) is not "
          "supported, its components have job ids and task counts of their own; launch one "
          "homogeneous step, or give the rendezvous yourself (RANK, WORLD_SIZE, MASTER_ADDR, "
          "MASTER_PORT)",
          *het);
  }
  const uint64_t step = r.u64(step_var, *step_text, UINT32_MAX);
  const uint64_t job =
      r.u64("SLURM_JOB_ID", r.require("SLURM_JOB_ID", "the job's id"), UINT32_MAX);
  const int size = step_size(r);
  const int rank = r.integer("SLURM_PROCID", r.require("SLURM_PROCID", "the task's rank"), 0,
                             size - 1);
  const int local = r.optional_int("SLURM_LOCALID", 0, size - 1).value_or(-1);
  const auto node_id = r.optional_int("SLURM_NODEID", 0, size - 1);
  const char* list_var =
      get("SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST";
  const std::string list = r.require(list_var, "the step's nodes, e.g. node[01-04]; "
                                               "SLURM_STEP_NODELIST or SLURM_JOB_NODELIST");
  const std::vector<std::string> nodes = expand_hostlist(list, list_var);
  if (std::string_view(list_var) == "SLURM_STEP_NODELIST") {
    const auto n = r.optional_int("SLURM_STEP_NUM_NODES", 1, INT_MAX);
    if (n && size_t(*n) != nodes.size()) {
      raise(ErrorCode::InvalidArgument,
            "SLURM_STEP_NODELIST='{}' names {} nodes but SLURM_STEP_NUM_NODES={}; {}", list,
            nodes.size(), *n, r.why);
    }
    if (size < int(nodes.size())) {
      raise(ErrorCode::InvalidArgument,
            "SLURM_STEP_NODELIST='{}' names {} nodes for a step of {} tasks; a step runs at "
            "least one task on each of its nodes; {}",
            list, nodes.size(), size, r.why);
    }
  }
  if (node_id && size_t(*node_id) >= nodes.size()) {
    raise(ErrorCode::InvalidArgument, "SLURM_NODEID={} but {}='{}' names {} nodes; {}",
          *node_id, list_var, list, nodes.size(), r.why);
  }
  // A step of one task where the job has several nodes: most likely the
  // program was started in the allocation's shell instead of with srun.
  if (size == 1) {
    const auto job_nodes = r.optional_int("SLURM_JOB_NUM_NODES", 1, INT_MAX);
    if (job_nodes && *job_nodes > 1) {
      raise(ErrorCode::InvalidArgument,
            "SLURM_STEP_NUM_TASKS=1 in Slurm job {} of SLURM_JOB_NUM_NODES={} nodes: this step "
            "has one task, which would train alone on one node; launch the program on every "
            "node with srun (e.g. srun --ntasks-per-node=1 prog, or one task per GPU with "
            "--ntasks-per-node=<GPUs>), or unset SLURM_JOB_NUM_NODES to run one process on "
            "purpose",
            job, *job_nodes);
    }
  }
  const std::string& host = nodes[0];
  if (rank == 0) {
    auto here = get("SLURMD_NODENAME");
    if ((here && *here != host) || (node_id && *node_id != 0)) {
      raise(ErrorCode::InvalidArgument,
            "SLURM_PROCID=0 runs on node {} (SLURMD_NODENAME='{}', SLURM_NODEID={}), not on "
            "the step's first node {} where the other tasks will look for rank 0's store; "
            "launch with srun's default block (or cyclic) distribution, or give the "
            "rendezvous yourself (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)",
            here.value_or("?"), here.value_or(""), node_id.value_or(-1), host);
    }
  }
  int port = slurm_store_port(job, step);
  if (auto p = get("GRADWIRE_STORE_PORT")) port = r.integer("GRADWIRE_STORE_PORT", *p, 1, 65535);

  Rendezvous out = Rendezvous::tcp(host, uint16_t(port), rank, size);
  out.local_rank = local;
  out.job = fmt::format("Slurm job {} step {}", job, step);
  out.secret = env::job_secret();
  out.bind_host = env::store_bind();
  if (out.bind_host.empty() && rank == 0 && nodes.size() > 1) {
    // Debian's /etc/hosts names the host 127.0.1.1: a store bound there is
    // out of every other node's reach, and they would wait for it in vain.
    std::string ignored;
    auto addrs = resolve_tcp(host, uint16_t(port), &ignored);
    if (!addrs.empty() && std::all_of(addrs.begin(), addrs.end(), is_loopback)) {
      raise(ErrorCode::InvalidArgument,
            "the step's first node {} (from {}) resolves to {} on itself, a loopback address "
            "the step's other {} nodes cannot reach, so rank 0's store would be out of their "
            "reach; set GRADWIRE_STORE_BIND to this node's address (or 0.0.0.0), or fix the "
            "node's /etc/hosts",
            host, list_var, addrs[0].to_string(), nodes.size() - 1);
    }
  }
  return out;
}

// Note [same job]: ranks of one world must be of one job. Under Slurm a
// rank of another job reaches this store when two steps' stores share a
// node and a port (Note [Slurm store port]) and no GRADWIRE_JOB_SECRET
// tells them apart; a rank whose SLURM_STEP_NUM_TASKS differs from rank
// 0's would count another world. Rank 0 writes its identity first, the
// others read it before writing anything: a rank of another job stops
// there, leaving this job's store as it was, and a rank of this job that
// counts another size writes its own identity so that rank 0 stops too,
// and with it (its store gone) every other rank, instead of each waiting
// out its deadline for a rank that left.
void check_same_job(Store& store, const std::string& where, int rank, int size,
                    const std::string& job, Deadline deadline) {
  const std::string mine = fmt::format("{}\n{}", size, job);
  auto split = [](const std::string& v) {
    const auto nl = v.find('\n');
    return std::pair<std::string, std::string>{v.substr(0, nl),
                                               nl == std::string::npos ? "" : v.substr(nl + 1)};
  };
  if (rank != 0) {
    const auto [size0, job0] = split(store.get("job/0", deadline, "rank 0's job identity"));
    if (job0 != job) {
      raise(ErrorCode::InvalidArgument,
            "rank {} of {} reached the store at {} of another job: rank 0 there is of {}; two "
            "steps' stores share a node and a port: set GRADWIRE_STORE_PORT to a port of this "
            "step's own, and GRADWIRE_JOB_SECRET so that stores refuse other jobs",
            rank, job, where, job0);
    }
    store.set(fmt::format("job/{}", rank), mine);
    if (size0 != std::to_string(size)) {
      raise(ErrorCode::InvalidArgument,
            "rank {} counts {} ranks in {} but rank 0 counts {}: their SLURM_STEP_NUM_TASKS "
            "(or SLURM_NTASKS) differ; every task of a step must see srun's own values",
            rank, size, job, size0);
    }
    return;
  }
  store.set("job/0", mine);
  for (int r = 1; r < size; ++r) {
    const std::string theirs = store.get(fmt::format("job/{}", r), deadline,
                                         fmt::format("rank {}'s job identity", r));
    if (theirs != mine) {
      const auto [size_r, job_r] = split(theirs);
      raise(ErrorCode::InvalidArgument,
            "rank {} counts {} ranks in {} but rank 0 counts {} in {}: every task of a step "
            "must see srun's own SLURM_STEP_NUM_TASKS (or SLURM_NTASKS)",
            r, size_r, job_r, size, job);
    }
  }
}

}  // namespace gradwire::bootstrap
