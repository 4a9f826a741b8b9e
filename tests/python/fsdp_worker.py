"""torch's own sharded training on backend "gradwire" against gloo: the
coalesced collectives, FSDP2 (fully_shard) with DTensor.full_tensor(),
torch.distributed.checkpoint (DCP) of an FSDP2 model's sharded and full
state dicts, and ZeroRedundancyOptimizer. Run under torchrun
(test_fsdp.py) with the checkpoint directory as argument; one launched
world does every check, so the suite costs one start per world size.

Each process holds two replicas of everything: one over the default
(gradwire) group, one over a gloo group of the same ranks, fed the same
data. Gradients are averaged by reduce-scatter (FSDP2) or allreduce (DDP
under ZeRO); at 2 ranks a sum of two terms does not depend on the order,
so the replicas must agree bit for bit. At 3 ranks gloo and gradwire may
associate the three terms differently (ring vs. tree), one rounding of the
float32 sum each step: the tolerance then is rtol = atol = 1e-6, a few
float32 ulps of the O(1) parameters over the few steps run here; whatever
the replicas differ by is printed. Values moved without arithmetic
(allgather, full_tensor(), checkpoints) must match bit for bit always.
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
from torch.distributed.checkpoint.state_dict import (StateDictOptions, get_model_state_dict,
                                                     get_state_dict, set_model_state_dict,
                                                     set_state_dict)
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel as DDP

import gradwire.torch  # noqa: F401 - registers backend "gradwire"

RANK = WORLD = 0
TOL = 0.0


def log(msg):
    print(f"rank {RANK}: {msg}", flush=True)


def same(name, got, want, tol=None):
    """Bit for bit, or within `tol` (rtol = atol) when the sums may associate differently."""
    tol = TOL if tol is None else tol
    if got.shape != want.shape or got.dtype != want.dtype:
        raise AssertionError(f"rank {RANK}: {name}: {got.shape}/{got.dtype} vs {want.shape}/{want.dtype}")
    if torch.equal(got, want):
        return 0.0
    diff = (got.double() - want.double()).abs().max().item()
    if tol == 0.0:
        raise AssertionError(f"rank {RANK}: {name}: gradwire and gloo differ by {diff:.3e} "
                             f"(bit for bit expected)")
    torch.testing.assert_close(got, want, rtol=tol, atol=tol, msg=lambda m: f"rank {RANK}: {name}: {m}")
    return diff


def local(t):
    return t.to_local() if isinstance(t, DTensor) else t


# --- the coalesced collectives -------------------------------------------

def coalesced(gw, gloo):
    # Shapes not divisible into equal rows of the world size, odd counts,
    # an empty tensor; small integers, so every sum is exact.
    shapes = [(3, 5), (7,), (0,), (2, 2, 3)]
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        ins = [((torch.arange(torch.Size(s).numel()) * 3 + RANK * 7) % 11).to(dtype).reshape(s)
               for s in shapes]
        # gloo's reference: one all_gather_into_tensor / reduce_scatter_tensor
        # per pair (its coalesced allgather wants other output shapes).
        o = [torch.full((WORLD * t.shape[0], *t.shape[1:]), -1, dtype=dtype) for t in ins]
        gw.allgather_into_tensor_coalesced(o, [t.clone() for t in ins]).wait()
        for i, t in enumerate(ins):
            want = torch.empty_like(o[i])
            dist.all_gather_into_tensor(want, t.clone(), group=gloo)
            same(f"allgather_into_tensor_coalesced {dtype} tensor {i}", o[i], want, 0.0)
        big = [((torch.arange(WORLD * torch.Size(s).numel()) * 5 + RANK) % 13).to(dtype)
               for s in shapes]
        got = [torch.full((t.numel() // WORLD,), -1, dtype=dtype) for t in big]
        gw.reduce_scatter_tensor_coalesced(got, [t.clone() for t in big]).wait()
        for i, t in enumerate(big):
            want = torch.empty_like(got[i])
            dist.reduce_scatter_tensor(want, t.clone(), group=gloo)
            same(f"reduce_scatter_tensor_coalesced {dtype} tensor {i}", got[i], want, 0.0)
    # The same through torch's coalescing manager (the functional
    # collectives' path), async, with avg (gradwire only: gloo has no avg).
    a = [torch.arange(6, dtype=torch.float32) + RANK, torch.ones(3 * WORLD) * (RANK + 1)]
    o = [torch.empty(WORLD * t.numel()) for t in a]
    with dist._coalescing_manager(group=gw, async_ops=True) as cm:
        for x, y in zip(o, a):
            dist.all_gather_into_tensor(x, y, group=gw)
    cm.wait()
    for x, y in zip(o, a):
        want = torch.cat([y - RANK + r if y.numel() == 6 else y / (RANK + 1) * (r + 1)
                          for r in range(WORLD)])
        same("all_gather_into_tensor under _coalescing_manager", x, want, 0.0)
    r = [torch.empty(t.numel() // WORLD) for t in o]
    with dist._coalescing_manager(group=gw, async_ops=True) as cm:
        for x, y in zip(r, o):
            dist.reduce_scatter_tensor(x, y, op=dist.ReduceOp.AVG, group=gw)
    cm.wait()
    for x, y in zip(r, o):
        n = x.numel()
        same("reduce_scatter_tensor avg under _coalescing_manager", x, y[RANK * n:(RANK + 1) * n])
    # all_to_all with unequal blocks (DTensor redistributes uneven shards
    # so): rank r sends (r + j) % 3 + 1 rows of 2 to rank j.
    def rows(src, dst):
        return (src + dst) % 3 + 1
    for dtype in (torch.float32, torch.int64):
        send = [torch.full((rows(RANK, j), 2), 100 * RANK + j, dtype=dtype) for j in range(WORLD)]
        want = [torch.full((rows(i, RANK), 2), 100 * i + RANK, dtype=dtype) for i in range(WORLD)]
        got = {}
        for tag, g in (("gw", gw), ("gloo", gloo)):
            out = torch.full((sum(rows(i, RANK) for i in range(WORLD)), 2), -1, dtype=dtype)
            dist.all_to_all_single(out, torch.cat(send), [t.shape[0] for t in want],
                                   [t.shape[0] for t in send], group=g)
            got[tag] = out
        same(f"all_to_all_single unequal splits {dtype}", got["gw"], got["gloo"], 0.0)
        same(f"all_to_all_single unequal splits {dtype} (values)", got["gw"], torch.cat(want), 0.0)
        outs = [torch.full_like(t, -1) for t in want]
        dist.all_to_all(outs, send, group=gw)  # gloo has no list all_to_all
        for i, (a, b) in enumerate(zip(outs, want)):
            same(f"all_to_all unequal sizes {dtype} from rank {i}", a, b, 0.0)
    # Split sizes that disagree between ranks: refused on every rank.
    try:
        n = WORLD + (1 if RANK == 0 else 0)
        splits = [1] * WORLD
        if RANK == 0:
            splits[-1] = 2
        dist.all_to_all_single(torch.empty(WORLD), torch.ones(n), [1] * WORLD, splits, group=gw)
    except ValueError as e:
        assert "split sizes" in str(e), str(e)
    else:
        raise AssertionError(f"rank {RANK}: all_to_all_single accepted split sizes that disagree")
    # Bad input: a clear error on every rank (no collective started).
    for call, outs_, ins_ in (("allgather_into_tensor_coalesced", [torch.empty(WORLD * 4)] * 2,
                               [torch.ones(4)]),
                              ("reduce_scatter_tensor_coalesced", [torch.empty(4)],
                               [torch.ones(4 * WORLD)] * 2),
                              ("allgather_into_tensor_coalesced", [torch.empty(WORLD * 4 + 1)] * 2,
                               [torch.ones(4)] * 2)):
        try:
            getattr(gw, call)(outs_, ins_).wait()
        except ValueError as e:
            assert "rank" in str(e) and call in str(e), str(e)
            if RANK == 0:
                log(f"refused as expected: {e}")
        else:
            raise AssertionError(f"rank {RANK}: {call} accepted mismatched tensors")
    dist.barrier(group=gw)
    log("coalesced collectives OK")


# --- FSDP2 ---------------------------------------------------------------

class Mlp(nn.Module):
    # Dims not divisible by 2 or 3: FSDP2 pads the last shard.
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(13, 17)
        self.b = nn.Linear(17, 11)
        self.c = nn.Linear(11, 5, bias=False)

    def forward(self, x):
        return self.c(torch.tanh(self.b(torch.relu(self.a(x)))))


def fsdp_model(group, **kwargs):
    torch.manual_seed(0)
    m = Mlp()
    mesh = DeviceMesh.from_group(group, "cpu")
    for sub in (m.a, m.b):
        fully_shard(sub, mesh=mesh, **kwargs)
    fully_shard(m, mesh=mesh, **kwargs)
    return m


def batch(step):
    g = torch.Generator().manual_seed(1000 * step + RANK)
    return torch.randn(8, 13, generator=g), torch.randn(8, 5, generator=g)


def train(m, opt, steps, first=0):
    for step in range(first, first + steps):
        x, y = batch(step)
        loss = ((m(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()


def compare_models(tag, m_gw, m_gloo, tol=None):
    worst = 0.0
    for (name, p), (_, q) in zip(m_gw.named_parameters(), m_gloo.named_parameters()):
        worst = max(worst, same(f"{tag}: shard of {name}", local(p), local(q), tol))
        full_p, full_q = p.full_tensor(), q.full_tensor()
        # Each replica's full tensor is its own shards, bit for bit.
        # FSDP2 shards dim 0 as torch.chunk does (trailing ranks may hold none).
        chunks = full_p.chunk(WORLD, 0)
        mine = chunks[RANK] if RANK < len(chunks) else full_p[:0]
        same(f"{tag}: full_tensor() of {name} holds this rank's shard", mine, local(p), 0.0)
        worst = max(worst, same(f"{tag}: full_tensor() of {name}", full_p, full_q, tol))
    return worst


def fsdp(gw, gloo, ckpt):
    m_gw, m_gloo = fsdp_model(gw), fsdp_model(gloo)
    for p in m_gw.parameters():
        assert isinstance(p, DTensor), "fully_shard left a parameter unsharded"
    compare_models("FSDP2 initial", m_gw, m_gloo, 0.0)
    o_gw = torch.optim.Adam(m_gw.parameters(), lr=1e-2)
    o_gloo = torch.optim.Adam(m_gloo.parameters(), lr=1e-2)
    train(m_gw, o_gw, 4)
    train(m_gloo, o_gloo, 4)
    worst = compare_models("FSDP2 after 4 Adam steps", m_gw, m_gloo)
    log(f"FSDP2 training OK (largest difference from gloo {worst:.3e})")

    # Mixed precision: bf16 parameters gathered (bf16 allgathers), float32
    # gradients reduce-scattered into the float32 shards.
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    mixed = {}
    for tag, g in (("gw", gw), ("gloo", gloo)):
        m = fsdp_model(g, mp_policy=mp)
        train(m, torch.optim.SGD(m.parameters(), lr=1e-2, momentum=0.9), 3)
        mixed[tag] = m
    worst = compare_models("FSDP2 bf16 mixed precision", mixed["gw"], mixed["gloo"])
    log(f"FSDP2 bf16 mixed precision OK (largest difference from gloo {worst:.3e})")

    # DCP, sharded: model and optimizer state, saved by each replica into its
    # own directory, loaded into fresh replicas, which continue.
    for tag, m, o, g in (("gw", m_gw, o_gw, gw), ("gloo", m_gloo, o_gloo, gloo)):
        msd, osd = get_state_dict(m, o)
        dcp.save({"model": msd, "optim": osd}, checkpoint_id=os.path.join(ckpt, f"sharded-{tag}"),
                 process_group=g)
    dist.barrier(group=gw)
    fresh = {}
    for tag, g in (("gw", gw), ("gloo", gloo)):
        m = fsdp_model(g)
        o = torch.optim.Adam(m.parameters(), lr=1e-2)
        msd, osd = get_state_dict(m, o)
        sd = {"model": msd, "optim": osd}
        dcp.load(sd, checkpoint_id=os.path.join(ckpt, f"sharded-{tag}"), process_group=g)
        set_state_dict(m, o, model_state_dict=sd["model"], optim_state_dict=sd["optim"])
        fresh[tag] = (m, o)
    compare_models("DCP sharded load (gradwire)", fresh["gw"][0], m_gw, 0.0)
    compare_models("DCP sharded load (gloo)", fresh["gloo"][0], m_gloo, 0.0)
    for tag, (m, o), (m0, o0) in (("gw", fresh["gw"], (m_gw, o_gw)),
                                  ("gloo", fresh["gloo"], (m_gloo, o_gloo))):
        train(m, o, 2, first=4)
        train(m0, o0, 2, first=4)
        compare_models(f"DCP sharded load ({tag}) continued 2 steps", m, m0, 0.0)
    # A checkpoint written over gradwire loads over gloo: the same files.
    m = fsdp_model(gloo)
    sd = {"model": get_model_state_dict(m)}
    dcp.load(sd, checkpoint_id=os.path.join(ckpt, "sharded-gw"), process_group=gloo)
    set_model_state_dict(m, sd["model"])
    saved = fsdp_model(gw)
    sd2 = {"model": get_model_state_dict(saved)}
    dcp.load(sd2, checkpoint_id=os.path.join(ckpt, "sharded-gw"), process_group=gw)
    set_model_state_dict(saved, sd2["model"])
    compare_models("DCP checkpoint of gradwire loaded over gloo", saved, m, 0.0)
    log("DCP sharded state dict OK")

    # Full state dicts: every rank gathers whole tensors (full_tensor()
    # inside); equal between backends; loaded back, from every rank's copy
    # and broadcast from rank 0's; saved and loaded through DCP too.
    full = StateDictOptions(full_state_dict=True)
    f_gw, f_gloo = get_model_state_dict(m_gw, options=full), get_model_state_dict(m_gloo, options=full)
    assert f_gw.keys() == f_gloo.keys()
    for k in f_gw:
        assert not isinstance(f_gw[k], DTensor), f"{k} still a DTensor in a full state dict"
        same(f"full state dict {k}", f_gw[k], f_gloo[k])
        same(f"full state dict {k} against full_tensor()", f_gw[k],
             dict(m_gw.named_parameters())[k].full_tensor(), 0.0)
    dcp.save(f_gw, checkpoint_id=os.path.join(ckpt, "full-gw"), process_group=gw)
    off = StateDictOptions(full_state_dict=True, cpu_offload=True)
    f_off = get_model_state_dict(m_gw, options=off)
    if RANK == 0:
        for k in f_gw:
            same(f"full state dict (cpu_offload, rank 0) {k}", f_off[k], f_gw[k], 0.0)
    else:
        assert not f_off, "cpu_offload full state dict should be empty off rank 0"
    for tag, opts, sd in (("every rank's copy", full, f_gw),
                          ("broadcast from rank 0", StateDictOptions(full_state_dict=True,
                                                                      broadcast_from_rank0=True),
                           f_off)):
        m = fsdp_model(gw)
        set_model_state_dict(m, sd, options=opts)
        compare_models(f"full state dict loaded ({tag})", m, m_gw, 0.0)
    m = fsdp_model(gw)
    sd = get_model_state_dict(m, options=full)
    dcp.load(sd, checkpoint_id=os.path.join(ckpt, "full-gw"), process_group=gw)
    set_model_state_dict(m, sd, options=full)
    compare_models("full state dict through DCP", m, m_gw, 0.0)
    # A sharded load of the full checkpoint (DCP reshards on load).
    m = fsdp_model(gw)
    sd = get_model_state_dict(m)
    dcp.load(sd, checkpoint_id=os.path.join(ckpt, "full-gw"), process_group=gw)
    set_model_state_dict(m, sd)
    compare_models("full checkpoint loaded sharded", m, m_gw, 0.0)
    log("DCP full state dict OK")


# --- ZeroRedundancyOptimizer ---------------------------------------------

def zero(gw, gloo):
    for bucket_view in (False, True):
        replicas = {}
        for tag, g in (("gw", gw), ("gloo", gloo)):
            torch.manual_seed(0)
            m = DDP(Mlp(), process_group=g)
            o = ZeroRedundancyOptimizer(m.parameters(), optimizer_class=torch.optim.Adam,
                                        process_group=g, parameters_as_bucket_view=bucket_view,
                                        lr=1e-2)
            train(m, o, 4)
            replicas[tag] = (m, o)
        (m_gw, o_gw), (m_gloo, o_gloo) = replicas["gw"], replicas["gloo"]
        worst = 0.0
        for (name, p), (_, q) in zip(m_gw.named_parameters(), m_gloo.named_parameters()):
            worst = max(worst, same(f"ZeRO (bucket view {bucket_view}) {name}", p.detach(),
                                    q.detach()))
        # Each rank steps only its partition: the partitions must differ
        # by rank and cover every parameter once.
        mine = sum(p.numel() for p in o_gw.optim.param_groups[0]["params"])
        counts = [0] * WORLD
        dist.all_gather_object(counts, mine, group=gw)
        assert sum(counts) == sum(p.numel() for p in m_gw.parameters()), counts
        for o in (o_gw, o_gloo):
            o.consolidate_state_dict(to=0)
        if RANK == 0:
            s_gw, s_gloo = o_gw.state_dict(), o_gloo.state_dict()
            for i in s_gw["state"]:
                for k, v in s_gw["state"][i].items():
                    same(f"ZeRO consolidated state {i}.{k}", v, s_gloo["state"][i][k])
        log(f"ZeroRedundancyOptimizer (parameters_as_bucket_view={bucket_view}) OK "
            f"(largest difference from gloo {worst:.3e})")


def main():
    global RANK, WORLD, TOL
    ckpt = sys.argv[1]
    dist.init_process_group(backend="gradwire")
    RANK, WORLD = dist.get_rank(), dist.get_world_size()
    TOL = 0.0 if WORLD <= 2 else 1e-6
    gw = dist.group.WORLD
    gloo = dist.new_group(backend="gloo")
    coalesced(gw, gloo)
    fsdp(gw, gloo, ckpt)
    zero(gw, gloo)
    dist.barrier()
    log("fsdp OK")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
