#!/usr/bin/env python3
# Copyright 2026 The gradwire authors. SPDX-License-Identifier: Apache-2.0
"""gradwire's PowerSGD against PyTorch's powerSGD_hook mathematics.

Runs tests/ranks/powersgd_dump on 1, 2 and 3 ranks (different gradients
on every rank) from a known initial Q, then recomputes every step with the
installed torch: the hook's own _orthogonalize (Gram-Schmidt for rank <= 2,
QR above), torch matrix products, error feedback and warm start exactly as
powerSGD_hook applies them to undivided gradients, with its allreduces as
sums over the ranks (P summed; Q and the uncompressed tensors summed and
divided by the world size). Every rank's outputs must agree within float32
rounding; with several ranks this also checks each rank's error feedback
(it shapes the later steps).

usage: powersgd_reference.py GWLAUNCH DUMP_EXE
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from torch.distributed.algorithms.ddp_comm_hooks.powerSGD_hook import (
    _orthogonalize,
    _should_compress,
)

SHAPES = [(16, 3, 2, 2), (20,), (30, 10), (8, 40)]  # as in powersgd_dump.cpp
STEPS = 4


def load(d, name):
    return torch.from_numpy(np.fromfile(os.path.join(d, name), dtype=np.float32))


def reference(d, rank, world):
    order = [int(x) for x in load(d, "order.bin").tolist()]
    shapes = [SHAPES[g] for g in order]
    numels = [int(np.prod(s)) for s in shapes]
    q0 = load(d, "q0.bin")
    # Per-tensor state as powerSGD_hook keeps it: the Bucket's error and Qs.
    errors = [torch.zeros(sum(numels)) for _ in range(world)]
    qs, at = {}, 0
    for k, s in enumerate(shapes):
        rows, cols = s[0], int(np.prod(s)) // s[0]
        r = min(rows, cols, rank)
        if _should_compress(rows, cols, r, 1)[0]:
            qs[k] = q0[at : at + cols * r].view(1, cols, r).clone()
            at += cols * r
    worst = 0.0
    for t in range(STEPS):
        # powerSGD_hook on every rank: its gradients (gradwire's Reducer
        # divides them by the world size; torch's hook sees them undivided).
        inps = [load(d, f"in{t}.r{i}.bin") + errors[i] for i in range(world)]
        out = sum(inps) / world  # the uncompressed tensors' allreduce + div_
        off = 0
        for k, s in enumerate(shapes):
            n = numels[k]
            if k in qs:
                ms = [inp[off : off + n].view(1, s[0], -1) for inp in inps]
                q = qs[k]
                _orthogonalize(q, 0)
                p = sum(torch.bmm(m, q) for m in ms)  # allreduce(P), no division
                _orthogonalize(p, 0)
                q = sum(torch.bmm(m.transpose(1, 2), p) for m in ms) / world
                qs[k] = q
                out[off : off + n] = torch.bmm(p, q.transpose(1, 2)).reshape(-1)
            off += n
        errors = [inp - out for inp in inps]
        for i in range(world):
            got = load(d, f"out{t}.r{i}.bin")
            diff = (got - out).abs().max().item()
            scale = out.abs().max().item()
            worst = max(worst, diff / max(scale, 1e-30))
            print(f"world {world} rank {i}, PowerSGD rank {rank}, step {t}: "
                  f"max |gradwire - torch| = {diff:.3g} (max |value| {scale:.3g})")
    return worst


def main():
    gwlaunch, exe = sys.argv[1], sys.argv[2]
    failures = 0
    for world in (1, 2, 3):
        for rank in (1, 2, 4):
            with tempfile.TemporaryDirectory() as d:
                subprocess.run([gwlaunch, "-n", str(world), "--timeout", "120", "--", exe, d,
                                str(rank), str(STEPS)], check=True)
                worst = reference(d, rank, world)
                # float32 products of a few hundred terms, and QR vs Gram-Schmidt
                # at rank 4 (the same span; P P^T M is sign-invariant).
                if not worst < 2e-4:
                    print(f"FAIL: world {world}, rank {rank}: relative difference "
                          f"{worst:.3g} >= 2e-4")
                    failures += 1
    if failures:
        sys.exit(1)
    print("PowerSGD matches torch's powerSGD_hook mathematics")


if __name__ == "__main__":
    main()
