#!/usr/bin/env python3
"""Tables for benchmarks/network-compare: reads OUT_DIR's JSON (gradwire-perf's
schema, gloo_perf.py's too), iperf3.json and the maxrss lines, prints markdown.

    python3 benchmarks/network_table.py OUT_DIR RATE
"""
import json
import os
import re
import sys


def rows(path, impl):
    if not os.path.exists(path):
        return {}
    return {r["bytes"]: r for r in json.load(open(path))["rows"] if r["impl"] == impl}


def size(n):
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k and n % k == 0:
            return f"{n // k} {unit}"
    return f"{n} B"


def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "-"


def print_table(heading, columns, rows):
    """A markdown table: the first column left as is, the others right-aligned."""
    print(f"### {heading}\n")
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join("---:" for _ in columns) + "|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print()


def main():
    out, rate = sys.argv[1], sys.argv[2]
    iperf = json.load(open(os.path.join(out, "iperf3.json")))["end"]["sum_received"]["bits_per_second"] / 8e6
    j = lambda name: os.path.join(out, name + ".json")
    net, mpi = rows(j("bw_net"), "gradwire"), rows(j("bw_mpi"), "mpi")
    sockets, rxm = rows(j("bw_sockets"), "gradwire"), rows(j("bw_tcp_ofi_rxm"), "gradwire")
    gloo = rows(j("bw_gloo"), "gloo")
    mb = lambda r, n: r[n]["busbw_gbs"] * 1e3 if n in r else 0.0
    print_table(f"Allreduce busbw (MB/s), 2 hosts x 1 rank, float32, link {rate}; iperf3 {iperf:.1f} MB/s",
                ["size", "net", "% of iperf3", "sockets", "tcp;ofi_rxm", "Gloo", "Open MPI",
                 "net / Gloo", "net / Open MPI"],
                [[size(n), f"{mb(net, n):.1f}", f"{100 * mb(net, n) / iperf:.0f} %", f"{mb(sockets, n):.1f}",
                  f"{mb(rxm, n):.1f}", f"{mb(gloo, n):.1f}", f"{mb(mpi, n):.1f}",
                  ratio(mb(net, n), mb(gloo, n)), ratio(mb(net, n), mb(mpi, n))] for n in sorted(net)])
    lnet, lmpi = rows(j("lat_net"), "gradwire"), rows(j("lat_mpi"), "mpi")
    lrxm, lgloo = rows(j("lat_tcp_ofi_rxm"), "gradwire"), rows(j("lat_gloo"), "gloo")
    us = lambda r, n: r[n]["time_us"] if n in r else 0.0
    print_table(f"Allreduce latency (us), link {rate}",
                ["size", "net", "tcp;ofi_rxm", "Gloo", "Open MPI", "net / Gloo", "net / Open MPI"],
                [[size(n), f"{us(lnet, n):.0f}", f"{us(lrxm, n):.0f}", f"{us(lgloo, n):.0f}",
                  f"{us(lmpi, n):.0f}", ratio(us(lnet, n), us(lgloo, n)), ratio(us(lnet, n), us(lmpi, n))]
                 for n in sorted(lnet)])
    print("### Peak RSS per rank in the bandwidth sweep (the benchmark's own buffers: 2 x 256 MiB = 512 MiB; the rest is the process, its libraries and the transport)\n")
    print("| provider | rank 0 MiB | rank 1 MiB |")
    print("|---|---:|---:|")
    for tag, name in (("bw_net", "net"), ("bw_sockets", "sockets"),
                      ("bw_tcp_ofi_rxm", "tcp;ofi_rxm")):
        path = os.path.join(out, tag + ".txt")
        if not os.path.exists(path):
            continue
        rss = dict(re.findall(r"rank (\d) maxrss_kb=(\d+)", open(path).read()))
        print(f"| {name} | {int(rss.get('0', 0)) / 1024:.0f} | {int(rss.get('1', 0)) / 1024:.0f} |")


if __name__ == "__main__":
    main()
