#!/usr/bin/env python3
"""The alpha-beta model of allreduce time, fitted to benchmarks/hosts-bench's
measurements, checked against its emulated hosts, and extrapolated to EFA.

    benchmarks/alpha_beta.py [--rate 1gbit] results/hosts

Model (per allreduce of S bytes per rank; a message costs alpha + bytes*beta):
  flat ring over N = H*L ranks ordered host by host: 2(N-1) steps, each
  step's slowest hop is the host-to-host one, carrying S/N:
      T_flat = 2(N-1) * (alpha_net + S/N * beta_net)
  hierarchical (Note [hierarchical allreduce] in src/collectives/hierarchy.cpp):
  reduce-scatter and allgather inside the host, plus a ring of H ranks per
  local index, the L rings sharing the host's link (S/(L*H) each per step):
      T_hier = T_rs_local(S) + T_ag_local(S) + 2(H-1) * (alpha_net + S/H * beta_net)
alpha_net, beta_net: fitted to the 2-rank run over the link (T = 2 alpha + S beta);
the local phases: measured (2 ranks over shm), or for the extrapolation fitted
alpha/beta of those runs.
"""
import argparse
import json
import os
import sys


def rows(path):
    with open(path) as f:
        return {r["bytes"]: r["time_us"] * 1e-6 for r in json.load(f)["rows"] if r["impl"] == "gradwire"}


def fit(times, steps, volume):
    """T(S) = steps * alpha + volume(S) * beta: alpha from the fastest of the
    sizes up to 4 KiB (the least disturbed), beta the least-squares slope over
    the sizes from 1 MiB on."""
    sizes = sorted(times)
    alpha = min(times[s] for s in sizes if s <= 4096) / steps
    big = [s for s in sizes if s >= (1 << 20)] or sizes[-2:]
    xs = [volume(s) for s in big]
    ys = [times[s] - steps * alpha for s in big]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    beta = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return alpha, beta


def parse_rate(text):
    units = {"gbit": 1e9, "mbit": 1e6, "kbit": 1e3}
    for u, m in units.items():
        if text.endswith(u):
            return float(text[: -len(u)]) * m / 8
    return float(text) / 8


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--rate", default="1gbit")
    a = ap.parse_args()
    d = lambda name: os.path.join(a.dir, name + ".json")
    link, rs, ag = rows(d("link")), rows(d("local_rs")), rows(d("local_ag"))
    flat, hier = rows(d("flat")), rows(d("hierarchical"))
    # 2 ranks, allreduce: 2 messages of S/2 each way: T = 2 alpha + S beta.
    an, bn = fit(link, 2, lambda s: s)
    # 2 ranks over shm: reduce-scatter and allgather each 1 step of S/2.
    ar, br = fit(rs, 1, lambda s: s / 2)
    ag_a, ag_b = fit(ag, 1, lambda s: s / 2)
    print(f"# fitted: link alpha {an*1e6:.1f} us, beta {1/bn/1e6:.1f} MB/s "
          f"(tc rate {parse_rate(a.rate)/1e6:.1f} MB/s); shm reduce-scatter alpha {ar*1e6:.1f} us, "
          f"{1/br/1e9:.2f} GB/s; shm allgather alpha {ag_a*1e6:.1f} us, {1/ag_b/1e9:.2f} GB/s")
    H, L = 2, 2
    N = H * L
    print("\n# emulated hosts (2 x 2 ranks): measured against the model (time per allreduce)")
    print(f'{"bytes":>10} {"flat meas":>11} {"flat model":>11} {"err":>6} {"hier meas":>11} '
          f'{"hier model":>11} {"err":>6} {"flat/hier meas":>15} {"model":>7}')
    for s in sorted(set(flat) & set(hier) & set(rs) & set(ag)):
        if s < (64 << 10):
            continue
        tf = 2 * (N - 1) * (an + s / N * bn)
        th = rs[s] + ag[s] + 2 * (H - 1) * (an + s / H * bn)
        print(f"{s:>10} {flat[s]*1e3:>9.2f}ms {tf*1e3:>9.2f}ms {100*(tf/flat[s]-1):>5.0f}% "
              f"{hier[s]*1e3:>9.2f}ms {th*1e3:>9.2f}ms {100*(th/hier[s]-1):>5.0f}% "
              f"{flat[s]/hier[s]:>14.2f}x {tf/th:>6.2f}x")

    # 4 hosts x 1 rank on a switch (netns-link up RATE 0ms 4): the hierarchy
    # has nothing to do (one rank per host), so this checks the network part
    # of the model alone at H = 4, with the alpha and beta fitted on 2 hosts.
    if os.path.exists(d("four_hosts")):
        four = rows(d("four_hosts"))
        H4 = 4
        rate = parse_rate(a.rate)
        print("\n# 4 hosts x 1 rank: measured against the model (ring of 4 over the link)")
        print(f'{"bytes":>10} {"measured":>11} {"model":>11} {"err":>6} {"busbw MB/s":>11} '
              f'{"of tc rate":>10}')
        for s in sorted(four):
            if s < (64 << 10):
                continue
            t4 = 2 * (H4 - 1) * (an + s / H4 * bn)
            busbw = s * 2 * (H4 - 1) / H4 / four[s]
            print(f"{s:>10} {four[s]*1e3:>9.2f}ms {t4*1e3:>9.2f}ms {100*(t4/four[s]-1):>5.0f}% "
                  f"{busbw/1e6:>11.1f} {100*busbw/rate:>9.0f}%")

    # Extrapolation. Network alpha for EFA is NOT measured here: 20 us per
    # message is assumed (EFA's small-message latency is of that order);
    # beta_net from the line rate; 8 ranks per node. The local phases two
    # ways: this machine's fitted shm reduce-scatter/allgather (CPU buffers),
    # and an assumed NVLink-class intra-node fabric (5 us, 200 GB/s per rank)
    # as GPU nodes would use.
    alpha_efa, L = 20e-6, 8
    bucket, step = 25 << 20, 1 << 30

    def local(s, a_rs, b_rs, a_ag, b_ag):  # ring reduce-scatter + allgather over L ranks
        return (L - 1) * (a_rs + a_ag) + (L - 1) / L * s * (b_rs + b_ag)

    nb = step / bucket
    for gbit in (400, 3200):
        b = 8 / (gbit * 1e9)
        print(f"\n# prediction, {gbit} Gbit/s per node: one step's gradient exchange, "
              f"{step >> 20} MiB of gradients per rank in {bucket >> 20} MiB buckets, {L} ranks "
              f"per node, alpha_net = {alpha_efa*1e6:.0f} us (assumed)")
        print(f'{"nodes":>6} {"ranks":>6} {"flat ring":>12} {"hier, shm local":>16} '
              f'{"hier, NVLink local":>19}')
        for H in (8, 16, 32, 64, 128, 256, 512, 1024):
            N = H * L
            tf = 2 * (N - 1) * (alpha_efa + bucket / N * b)
            net = 2 * (H - 1) * (alpha_efa + bucket / H * b)
            th_shm = local(bucket, ar, br, ag_a, ag_b) + net
            th_nv = local(bucket, 5e-6, 1 / 200e9, 5e-6, 1 / 200e9) + net
            print(f"{H:>6} {N:>6} {tf*nb*1e3:>10.0f}ms {th_shm*nb*1e3:>14.0f}ms {th_nv*nb*1e3:>17.0f}ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
