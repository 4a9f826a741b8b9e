#!/usr/bin/env python3
# Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
"""p2p_bench.py: torch.distributed point-to-point, gradwire against Gloo in one
job (issue 21). Two ranks; the default group is gradwire's and a second group
of the same ranks is Gloo's, so both run side by side on the same processes,
sizes alternating between the backends.

  - ping-pong: rank 0 sends, rank 1 receives and sends back; one-way latency
    is half the round trip (median over iterations);
  - exchange: both ranks batch_isend_irecv to each other at once (the ring
    exchange of pipeline parallelism at 2 ranks); bandwidth is the bytes one
    rank sends per second.

    mpirun --allow-run-as-root -np 2 python3 benchmarks/p2p_bench.py [--max 64M]
    mpirun --allow-run-as-root -np 2 python3 benchmarks/p2p_bench.py --idle 10
"""
import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "build", "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

import gradwire.torch  # noqa: E402,F401


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def ping_pong(group, buf, iters):
    rank = dist.get_rank()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        if rank == 0:
            dist.send(buf, 1, group=group)
            dist.recv(buf, 1, group=group)
        else:
            dist.recv(buf, 0, group=group)
            dist.send(buf, 0, group=group)
        times.append((time.perf_counter() - t0) / 2)
    return statistics.median(times)


def exchange(group, send, recv, iters):
    peer = 1 - dist.get_rank()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        ops = [dist.P2POp(dist.isend, send, peer, group=group),
               dist.P2POp(dist.irecv, recv, peer, group=group)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def idle_wait(groups, seconds):
    """CPU used by a rank blocked in recv for `seconds` (all its threads)."""
    import resource
    buf = torch.empty(1024, dtype=torch.float32)
    for name in ("gloo", "gradwire"):
        g = groups[name]
        dist.barrier(group=g)
        if dist.get_rank() == 0:
            time.sleep(seconds)
            dist.send(buf, 1, group=g)
            continue
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        dist.recv(buf, 0, group=g)
        r1, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - t0
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        print(f"{name}: recv blocked {wall:.1f} s, process CPU {cpu:.3f} s "
              f"({100 * cpu / wall:.1f} % of a core)", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min", default="1")
    ap.add_argument("--max", default="64M")
    ap.add_argument("--iters", type=int, default=0, help="0: by size")
    ap.add_argument("--idle", type=float, default=0,
                    help="instead: rank 1 waits this many seconds in recv while rank 0 "
                         "sleeps; prints the CPU time rank 1's process used meanwhile")
    a = ap.parse_args()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group(backend="gradwire")
    if dist.get_world_size() != 2:
        sys.exit("p2p_bench.py runs on exactly 2 ranks")
    groups = {"gradwire": dist.group.WORLD, "gloo": dist.new_group([0, 1], backend="gloo")}
    rank = dist.get_rank()
    if a.idle > 0:
        idle_wait(groups, a.idle)
        dist.destroy_process_group()
        return
    if rank == 0:
        print(f"{'bytes':>10} {'gloo us':>10} {'gradwire us':>12} {'lat ratio':>9} "
              f"{'gloo MB/s':>10} {'gradwire MB/s':>13} {'bw ratio':>8}")
    size = parse_size(a.min)
    while size <= parse_size(a.max):
        iters = a.iters or max(5, min(2000, (64 << 20) // max(size, 1) // 4))
        send = torch.full((size,), rank, dtype=torch.uint8)
        recv = torch.empty(size, dtype=torch.uint8)
        pong = torch.empty(size, dtype=torch.uint8)  # ping-pong overwrites its buffer
        row = {}
        for name in ("gloo", "gradwire", "gloo", "gradwire"):  # each twice, alternating
            g = groups[name]
            ping_pong(g, pong, max(2, iters // 10))  # warm-up
            lat = ping_pong(g, pong, iters)
            recv.fill_(255)
            bw_t = exchange(g, send, recv, iters)
            assert int(recv[0]) == 1 - rank and int(recv[-1]) == 1 - rank
            best = row.get(name, (float("inf"), float("inf")))
            row[name] = (min(best[0], lat), min(best[1], bw_t))
        if rank == 0:
            (gl, gb), (wl, wb) = row["gloo"], row["gradwire"]
            print(f"{size:>10} {gl * 1e6:>10.2f} {wl * 1e6:>12.2f} {wl / gl:>9.2f} "
                  f"{size / gb / 1e6:>10.1f} {size / wb / 1e6:>13.1f} {gb / wb:>8.2f}", flush=True)
        size *= 4
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
