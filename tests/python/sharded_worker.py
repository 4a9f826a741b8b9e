"""gradwire.torch.ShardedDataParallel (gradwire's own sharded engine from
Python) against torch DDP on gloo with torch.optim (test_sharded.py
launches it). Modes, several in one launch separated by "+" (run in order,
in one process group):

  match            stages 1, 2, 3 x float32, bfloat16 with Adam (and SGD
                   with momentum at stage 2): every step, every rank's whole
                   parameters against the DDP replica's; one step
                   accumulates two micro-batches under no_sync() on both.
  save DIR REF     stage S (argv[4]): trains 3 steps, saves a sharded
                   checkpoint in DIR, trains 3 more and writes the final
                   parameters to REF; then loads the checkpoint back and
                   retrains the 3 steps: bit for bit the same; its
                   full_state() loads into another stage's engine.
  load DIR REF     stage S, at another world size: a model of the same
                   sizes under other names is refused (InvalidArgumentError
                   naming the parameter, nothing changed); a freshly
                   initialised model loads DIR, trains the same 3 steps,
                   ends at REF.
  mismatch         rank 1's module differs: gradwire.MismatchError on
                   every rank, naming the parameter.
  features         float16 with dynamic loss scaling (an inf gradient on
                   the last rank only: the step is skipped on every rank,
                   the parameters unchanged, the scale halved everywhere);
                   clipping by global norm at stages 1-3 against DDP with
                   torch.nn.utils.clip_grad_norm_ (the norm too); a
                   parameter without a gradient on one rank, then on every
                   rank (find_unused_parameters) at stages 2 and 3 against
                   DDP with find_unused_parameters.
  reshard          stage 3, 6 units: reshard_after_forward (Note [reshard
                   after forward]) gives the bits of the run that keeps the
                   units gathered, with at most half the gathered bytes.

Tolerances. The engine's Adam rounds its float32 formula as written
(gradwire/sharded.h) and torch's uses lerp/addcdiv: a few float32 ulps of
each update, lr * 1e-6 or so, per step; at 3 ranks gloo and gradwire may
also add the three gradient terms in another order. Float32: atol = rtol =
1e-5 over the 5 steps run (the updates are lr = 1e-2 times O(1)); what
differs is printed. Bfloat16 parameters (float32 master weights on both
sides): a master that differs by an ulp may round to the neighbouring
bfloat16, so rtol = 2**-7 (at least one bfloat16 ulp at every magnitude),
atol = 1e-3 (measured: at most one ulp, 9.8e-4 on values in [0.125, 0.25),
at 3 ranks; bit for bit at 1 and 2).
The model has 53 parameters (prime: no world size divides it) and small
bucket caps, so there are several buckets, each padded.
"""
import collections
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import gradwire
import gradwire.torch
from gradwire.torch import ShardedDataParallel, sharded

RANK = WORLD = 0
GLOBAL_BATCH = 6  # divisible by 1, 2 and 3: per-rank means average to the global mean
LR = 1e-2


def log(msg):
    # A leading newline: another rank's line may still lack its own end
    # (ranks print concurrently), and the launcher matches "rank N: ... OK".
    print(f"\nrank {RANK}: {msg}", flush=True)


def make_model(dtype=torch.float32, seed=0, hidden=5):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, hidden), nn.Tanh(), nn.Linear(hidden, 3)).to(dtype)


def batch(step, micro=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(1000 * step + micro)
    x = torch.randn(GLOBAL_BATCH, 6, generator=g)
    y = torch.randn(GLOBAL_BATCH, 3, generator=g)
    per = GLOBAL_BATCH // WORLD
    return x[RANK * per:(RANK + 1) * per].to(dtype), y[RANK * per:(RANK + 1) * per].to(dtype)


def loss_of(model, step, micro, dtype):
    x, y = batch(step, micro, dtype)
    return ((model(x).float() - y.float()) ** 2).mean()


def sdp_options(stage, opt):
    o = sharded.Adam(lr=LR) if opt == "adam" else sharded.SGD(lr=LR, momentum=0.9)
    return dict(stage=stage, optimizer=o, bucket_cap_mb=64 / 2**20,
                first_bucket_cap_mb=32 / 2**20, alignment=4)


def train_sharded(sdp, steps, dtype, no_sync_step=None):
    for s in steps:
        if s == no_sync_step:
            with sdp.no_sync():
                loss_of(sdp, s, 1, dtype).backward()
        loss_of(sdp, s, 0, dtype).backward()
        assert sdp.step()


class Reference:
    """torch DDP over gloo and torch.optim on float32 masters (for 16-bit
    parameters: the gradient widened, the master cast back)."""

    def __init__(self, dtype, opt, gloo):
        self.model = make_model(dtype)
        self.ddp = DDP(self.model, process_group=gloo)
        self.params = list(self.model.parameters())
        self.mixed = dtype != torch.float32
        self.masters = [p.detach().float().clone().requires_grad_() for p in self.params] \
            if self.mixed else self.params
        self.opt = torch.optim.Adam(self.masters, lr=LR) if opt == "adam" else \
            torch.optim.SGD(self.masters, lr=LR, momentum=0.9)
        self.dtype = dtype

    def step(self, s, no_sync_step=None):
        self.opt.zero_grad()
        for p in self.params:
            p.grad = None
        if s == no_sync_step:
            with self.ddp.no_sync():
                loss_of(self.ddp, s, 1, self.dtype).backward()
        loss_of(self.ddp, s, 0, self.dtype).backward()
        if self.mixed:
            for m, p in zip(self.masters, self.params):
                m.grad = p.grad.float()
        self.opt.step()
        if self.mixed:
            with torch.no_grad():
                for m, p in zip(self.masters, self.params):
                    p.copy_(m)


def compare(what, got, want, tol):
    worst = 0.0
    for (name, a), b in zip(got, want):
        assert a.shape == b.shape and a.dtype == b.dtype, f"{what} {name}: {a.shape}/{a.dtype}"
        if torch.equal(a, b):
            continue
        diff = (a.double() - b.double()).abs().max().item()
        worst = max(worst, diff)
        rtol, atol = tol
        torch.testing.assert_close(a, b, rtol=rtol, atol=atol,
                                   msg=lambda m: f"rank {RANK}: {what} {name}: {m}")
    return worst


def mode_match(gloo):
    configs = [(st, dt, "adam") for st in (1, 2, 3) for dt in (torch.float32, torch.bfloat16)]
    configs.append((2, torch.float32, "sgd"))
    steps, no_sync_step = range(5), 2
    for stage, dtype, opt in configs:
        tol = (1e-5, 1e-5) if dtype == torch.float32 else (2**-7, 1e-3)
        ref = Reference(dtype, opt, gloo)
        model = make_model(dtype)
        sdp = ShardedDataParallel(model, **sdp_options(stage, opt))
        worst = 0.0
        for s in steps:
            ref.step(s, no_sync_step)
            train_sharded(sdp, [s], dtype, no_sync_step)
            sdp.gather_all()  # stage 3: the units are at rest after step()
            worst = max(worst, compare(f"stage {stage} {dtype} {opt} step {s}",
                                       list(model.named_parameters()), ref.params, tol))
        assert sdp.optimizer_steps == len(steps)
        mem = sdp.memory()
        sdp.close()
        log(f"stage {stage} {str(dtype)[6:]} {opt}: {len(steps)} steps, max |diff| vs DDP "
            f"{worst:.3e} (tolerance rtol {tol[0]:.1e} atol {tol[1]:.1e}), engine holds "
            f"{mem['total']} bytes")
    log("sharded match OK")


def params_of(model):
    return [p.detach().clone() for p in model.parameters()]


def mode_save(ckpt, ref_file, stage):
    model = make_model()
    sdp = ShardedDataParallel(model, **sdp_options(stage, "adam"))
    train_sharded(sdp, range(3), torch.float32)
    sdp.save_checkpoint(ckpt, 3)
    train_sharded(sdp, range(3, 6), torch.float32)
    sdp.gather_all()
    final = params_of(model)
    if RANK == 0:
        torch.save(final, ref_file)
    # Back to the checkpoint at the same world size: the same steps again,
    # bit for bit (the same shards, the same reduction order).
    assert sdp.load_checkpoint(ckpt) == 3
    assert sdp.optimizer_steps == 3
    train_sharded(sdp, range(3, 6), torch.float32)
    sdp.gather_all()
    compare("reloaded at the same world size", list(model.named_parameters()), final, (0, 0))
    # full_state(): every parameter whole (what an unsharded job holds),
    # loaded into an engine of another stage: the same parameters, and the
    # optimizer state with them (the next step within the float32 tolerance:
    # stage 1 allreduces where 2 and 3 reduce-scatter).
    full = sdp.full_state()
    other_stage = 1 if stage != 1 else 3
    model2 = make_model(seed=7)
    sdp2 = ShardedDataParallel(model2, **sdp_options(other_stage, "adam"))
    sdp2.load_state([full])
    sdp2.gather_all()
    compare(f"full state into stage {other_stage}", list(model2.named_parameters()), final, (0, 0))
    assert sdp2.optimizer_steps == 6
    train_sharded(sdp, [6], torch.float32)
    train_sharded(sdp2, [6], torch.float32)
    sdp.gather_all()
    sdp2.gather_all()
    compare(f"a step after the full state", list(model2.named_parameters()),
            params_of(model), (1e-6, 1e-6))
    sdp2.close()
    sdp.close()
    log(f"saved stage {stage} at {WORLD} ranks; reload continues bit for bit; full state into "
        f"stage {other_stage} the same; sharded save OK")


def mode_load(ckpt, ref_file, stage):
    # The same sizes under other names: refused on every rank, unchanged.
    torch.manual_seed(7)
    renamed = nn.Sequential(collections.OrderedDict(
        first=nn.Linear(6, 5), act=nn.Tanh(), last=nn.Linear(5, 3)))
    sdp = ShardedDataParallel(renamed, **sdp_options(stage, "adam"))
    sdp.gather_all()
    before = params_of(renamed)
    try:
        sdp.load_checkpoint(ckpt)
        raise AssertionError(f"rank {RANK}: a checkpoint of another model's names was loaded")
    except gradwire.InvalidArgumentError as e:
        assert "it has parameter '0.weight [5, 6]' where this module has 'first.weight [5, 6]'" \
            in e.message, e.message
    sdp.gather_all()
    assert all(torch.equal(a, b) for a, b in zip(before, params_of(renamed)))
    sdp.close()
    model = make_model(seed=7)  # other weights: the checkpoint must replace them
    sdp = ShardedDataParallel(model, **sdp_options(stage, "adam"))
    assert sdp.load_checkpoint(ckpt) == 3
    train_sharded(sdp, range(3, 6), torch.float32)
    sdp.gather_all()
    want = torch.load(ref_file)
    # Another world size sums the gradients in another order: float32
    # tolerance as in mode_match.
    worst = compare("loaded at another world size", list(model.named_parameters()), want,
                    (1e-5, 1e-5))
    sdp.close()
    log(f"loaded stage {stage} at {WORLD} ranks, max |diff| {worst:.3e}; sharded load OK")


def mode_mismatch():
    model = make_model(hidden=4 if RANK == 1 else 5)
    try:
        ShardedDataParallel(model, stage=2, optimizer=sharded.Adam())
    except gradwire.Error as e:
        assert e.code == "Mismatch", e
        assert "0.weight" in e.message and f"rank {RANK}" in e.message, e.message
        log(f"got: {e.message}")
        log("sharded mismatch OK")
        return
    raise AssertionError(f"rank {RANK}: no gradwire.MismatchError for different modules")


def mode_compressed():
    """Int8 gradients through the keyword arguments: the warm-up step is the
    uncompressed run's bits, the next is not, the loss on one fixed batch
    falls like the uncompressed run's (within 5 % after 8 steps), every
    rank holds the same bits, and a bad block size raises on every rank.
    Then int8 parameter gathers at stage 3 (parameter_compression="int8"):
    within 10 % of the plain run's loss, the same bits on every rank, and
    refused at stage 2."""
    for stage in (1, 2, 3):
        runs = []
        for kind in (None, "int8"):
            model = make_model()
            sdp = ShardedDataParallel(model, **sdp_options(stage, "sgd"),
                                      gradient_compression=kind, compression_block_size=16,
                                      compression_start_step=1)
            snaps = []
            for s in range(8):
                loss_of(sdp, 0, 0, torch.float32).backward()
                assert sdp.step()
                sdp.gather_all()  # stage 3: the units are at rest after step()
                snaps.append(params_of(model))
            with torch.no_grad():
                runs.append((snaps, loss_of(sdp, 0, 0, torch.float32).item()))
            if kind:
                assert sdp.memory()["compression"] > 0
            sdp.close()
        (plain, lp), (comp, lc) = runs
        assert all(torch.equal(a, b) for a, b in zip(plain[0], comp[0])), "warm-up differs"
        assert not all(torch.equal(a, b) for a, b in zip(plain[1], comp[1])), "not compressed"
        assert abs(lc - lp) <= 0.05 * lp, f"stage {stage}: loss int8 {lc} uncompressed {lp}"
        flat = torch.cat([p.flatten() for p in comp[-1]])
        gathered = [torch.empty_like(flat) for _ in range(WORLD)]
        dist.all_gather(gathered, flat)
        assert all(torch.equal(g, gathered[0]) for g in gathered), "ranks differ"
        log(f"stage {stage}: loss after 8 steps uncompressed {lp:.6f}, int8 {lc:.6f}")
    # Int8 parameter gathers (stage 3 only): close to the plain run, not it,
    # the same bits on every rank; stage 2 refuses them on every rank.
    runs = []
    for kind in (None, "int8"):
        model = make_model()
        sdp = ShardedDataParallel(model, **sdp_options(3, "sgd"), parameter_compression=kind,
                                  parameter_compression_block_size=16)
        for s in range(8):
            loss_of(sdp, 0, 0, torch.float32).backward()
            assert sdp.step()
        sdp.gather_all()
        snap = params_of(model)
        with torch.no_grad():
            runs.append((snap, loss_of(sdp, 0, 0, torch.float32).item()))
        sdp.close()
    (plain, lp), (comp, lc) = runs
    assert not all(torch.equal(a, b) for a, b in zip(plain, comp)), "gathers not compressed"
    assert abs(lc - lp) <= 0.10 * lp, f"stage 3: loss int8 gathers {lc} plain {lp}"
    flat = torch.cat([p.flatten() for p in comp])
    gathered = [torch.empty_like(flat) for _ in range(WORLD)]
    dist.all_gather(gathered, flat)
    assert all(torch.equal(g, gathered[0]) for g in gathered), "ranks differ (parameter gathers)"
    log(f"stage 3: loss after 8 steps plain {lp:.6f}, int8 parameter gathers {lc:.6f}")
    try:
        ShardedDataParallel(make_model(), **sdp_options(2, "sgd"), parameter_compression="int8")
        raise AssertionError(f"rank {RANK}: no error for parameter_compression at stage 2")
    except gradwire.Error as e:
        assert e.code == "InvalidArgument", e
        assert "parameter_compression.kind int8 at stage 2" in e.message, e.message
    try:
        ShardedDataParallel(make_model(), **sdp_options(2, "sgd"), gradient_compression="int8",
                            compression_block_size=0 if RANK == WORLD - 1 else 16)
    except gradwire.Error as e:
        assert e.code == "InvalidArgument", e
        assert "gradient_compression.block_size 0" in e.message, e.message
        log("sharded compressed OK")
        return
    raise AssertionError(f"rank {RANK}: no error for block size 0")


def same_on_every_rank(what, tensors):
    flat = torch.cat([t.detach().double().flatten() for t in tensors])
    gathered = [torch.empty_like(flat) for _ in range(WORLD)]
    dist.all_gather(gathered, flat)
    assert all(torch.equal(g, gathered[0]) for g in gathered), f"rank {RANK}: {what} differ"


def features_loss_scaling():
    """Float16 parameters, dynamic loss scaling: the last rank's loss times
    inf on step 1 makes its gradients inf; every rank skips that step."""
    for stage in (2, 3):
        model = make_model(torch.float16)
        sdp = ShardedDataParallel(model, **sdp_options(stage, "adam"),
                                  loss_scaling=dict(initial=2.0**10, growth_interval=1000))
        results, scales = [], []
        for s in range(3):
            sdp.gather_all()
            before = params_of(model)
            loss = loss_of(sdp, s, 0, torch.float16) * sdp.loss_scale
            if s == 1 and RANK == WORLD - 1:
                loss = loss * float("inf")
            loss.backward()
            results.append(sdp.step())
            scales.append(sdp.loss_scale)
            sdp.gather_all()
            changed = not all(torch.equal(a, b) for a, b in zip(before, params_of(model)))
            assert changed == results[-1], f"rank {RANK}: step {s} {results[-1]}, changed {changed}"
        assert results == [True, False, True], f"rank {RANK}: stage {stage}: steps {results}"
        assert scales == [2.0**10, 2.0**9, 2.0**9], f"rank {RANK}: stage {stage}: scales {scales}"
        assert sdp.skipped_steps == 1 and sdp.optimizer_steps == 2, \
            (sdp.skipped_steps, sdp.optimizer_steps)
        assert all(torch.isfinite(p).all() for p in model.parameters())
        same_on_every_rank(f"stage {stage} float16 parameters", params_of(model))
        same_on_every_rank(f"stage {stage} loss scales", [torch.tensor(scales)])
        sdp.close()
    log(f"float16, an inf on rank {WORLD - 1} at step 1: steps {results}, scales {scales} on "
        "every rank")


def features_clipping(gloo):
    """max_grad_norm against torch.nn.utils.clip_grad_norm_ on the DDP
    replica (its averaged gradients), SGD with momentum, float32."""
    max_norm, worst, norms = 0.1, 0.0, []
    for stage in (1, 2, 3):
        ref = Reference(torch.float32, "sgd", gloo)
        model = make_model()
        sdp = ShardedDataParallel(model, **sdp_options(stage, "sgd"), max_grad_norm=max_norm)
        for s in range(4):
            ref.opt.zero_grad()
            loss_of(ref.ddp, s, 0, torch.float32).backward()
            want = torch.nn.utils.clip_grad_norm_(ref.params, max_norm).item()
            ref.opt.step()
            loss_of(sdp, s, 0, torch.float32).backward()
            assert sdp.step()
            sdp.gather_all()
            got = sdp.last_grad_norm
            assert abs(got - want) <= 1e-5 * want, f"rank {RANK}: step {s}: norm {got} vs {want}"
            norms.append(want)
            worst = max(worst, compare(f"clipped stage {stage} step {s}",
                                       list(model.named_parameters()), ref.params, (1e-5, 1e-5)))
        sdp.close()
    assert min(norms) > max_norm, f"nothing clipped: norms {norms}"  # the clipping did work
    log(f"clipping to {max_norm} (norms {min(norms):.3f}..{max(norms):.3f}) at stages 1-3: "
        f"max |diff| vs clip_grad_norm_ {worst:.3e}")


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.a, self.b, self.out = nn.Linear(6, 5), nn.Linear(5, 5), nn.Linear(5, 3)

    def forward(self, x, use_b=True):
        h = torch.tanh(self.a(x))
        if use_b:
            h = h + torch.tanh(self.b(h))
        return self.out(h)


def features_unused(gloo):
    """`b` gets no gradient on rank 0 at step 1 and on every rank at step 2
    (SGD without momentum: a zero gradient and torch's skipped update agree)."""
    uses = [lambda r: True, lambda r: r != 0, lambda r: False, lambda r: True]
    worst = 0.0
    for stage in (2, 3):
        ref_model = Branchy()
        ddp = DDP(ref_model, process_group=gloo, find_unused_parameters=True)
        ref_opt = torch.optim.SGD(ref_model.parameters(), lr=LR)
        model = Branchy()
        sdp = ShardedDataParallel(model, stage=stage, optimizer=sharded.SGD(lr=LR),
                                  find_unused_parameters=True, alignment=4,
                                  bucket_cap_mb=64 / 2**20, first_bucket_cap_mb=32 / 2**20)
        for s, use in enumerate(uses):
            x, y = batch(s, 0, torch.float32)
            ref_opt.zero_grad()
            ((ddp(x, use_b=use(RANK)) - y) ** 2).mean().backward()
            ref_opt.step()
            sdp.gather_all()
            b_before = params_of(model.b)
            ((sdp(x, use_b=use(RANK)) - y) ** 2).mean().backward()
            assert sdp.step()
            sdp.gather_all()
            if s == 2:
                assert all(torch.equal(p, q) for p, q in zip(b_before, params_of(model.b))), \
                    f"rank {RANK}: stage {stage}: b changed without a gradient"
            worst = max(worst, compare(f"unused stage {stage} step {s}",
                                       list(model.named_parameters()),
                                       list(ref_model.parameters()), (1e-5, 1e-5)))
        sdp.close()
    log(f"a parameter unused on rank 0, then on every rank, stages 2 and 3: max |diff| vs DDP "
        f"{worst:.3e}")


def mode_features(gloo):
    features_loss_scaling()
    features_clipping(gloo)
    features_unused(gloo)
    log("sharded features OK")


def mode_reshard():
    finals, peaks, whole = [], [], 0
    for reshard in (False, True):
        torch.manual_seed(4)
        model = nn.Sequential(*[nn.Sequential(nn.Linear(6, 6), nn.Tanh()) for _ in range(6)])
        sdp = ShardedDataParallel(model, stage=3, optimizer=sharded.SGD(lr=LR, momentum=0.9),
                                  reshard_after_forward=reshard)
        for s in range(3):
            x, y = batch(s)
            ((sdp(x)[:, :3] - y) ** 2).mean().backward()
            assert sdp.step()
        peaks.append(sdp.memory()["peak_gathered"])
        sdp.gather_all()
        whole = sdp.memory()["gathered"]
        finals.append([p.detach().clone() for p in model.parameters()])
        sdp.close()
    assert all(torch.equal(a, b) for a, b in zip(*finals)), "reshard changed the bits"
    assert peaks[0] == whole and peaks[1] <= whole // 2, (peaks, whole)
    log(f"stage 3, 6 units: peak gathered bytes kept {peaks[0]}, resharded {peaks[1]}, "
        f"whole {whole}; sharded reshard OK")


def modes(argv):
    """argv split at "+": `match + save DIR REF 3 + mismatch` runs three modes."""
    at = [-1] + [i for i, a in enumerate(argv) if a == "+"] + [len(argv)]
    return [argv[a + 1:b] for a, b in zip(at, at[1:])]


def main():
    global RANK, WORLD
    dist.init_process_group(backend="gradwire")
    RANK, WORLD = dist.get_rank(), dist.get_world_size()
    # Several modes in one process group: each Python start with torch costs
    # seconds of CPU, more than most modes (test_sharded.py). Each mode
    # prints its own OK line.
    gloo = dist.new_group(backend="gloo")
    for mode, *args in modes(sys.argv[1:]):
        if mode == "match":
            mode_match(gloo)
        elif mode == "save":
            mode_save(args[0], args[1], int(args[2]))
        elif mode == "load":
            mode_load(args[0], args[1], int(args[2]))
        elif mode == "mismatch":
            mode_mismatch()
        elif mode == "compressed":
            mode_compressed()
        elif mode == "features":
            mode_features(gloo)
        elif mode == "reshard":
            mode_reshard()
        else:
            raise SystemExit(f"sharded_worker.py: unknown mode {mode!r}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
