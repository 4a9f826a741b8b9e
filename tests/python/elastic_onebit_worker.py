"""One member of an elastic job trained with gradwire.torch.optim's 1-bit Adam
or LAMB under gradwire.torch.elastic.ElasticDDP: the Python twin of
tests/torch/elastic_onebit_worker.cpp, run by tests/torch/elastic_onebit.sh
(the same arguments, output lines and checks).

    elastic_onebit_worker.py adam|lamb AFTER_JOIN FREEZE_STEP KILL_RANK KILL_AT

Python only: first, ElasticDDP refuses (on every rank) a 1-bit optimizer
built over another communicator than group.communicator.
"""
import hashlib
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import gradwire
import gradwire.torch.elastic as elastic
from gradwire.torch.optim import OneBitAdam, OneBitLamb


def say(text):
    print(text, flush=True)


def main():
    which = sys.argv[1]
    after_join, freeze, kill_rank, kill_at = (int(a) for a in sys.argv[2:6])
    torch.set_num_threads(1)
    group = elastic.join()
    first_rank = group.rank

    def fail(what):
        print(f"rank {first_rank}: FAIL: {what}", file=sys.stderr, flush=True)
        os._exit(1)

    torch.manual_seed(100 + first_rank)  # different models: the optimizer broadcasts rank 0's
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    make = OneBitAdam if which == "adam" else OneBitLamb
    if group.generation == 0:
        # A 1-bit optimizer over another communicator of the same ranks (not
        # group.communicator): refused on every rank, before anything
        # collective. (A joiner skips this: the members are training.)
        other = group.communicator.split(list(range(group.size)))
        wrong = make(model.parameters(), other, lr=1e-2, freeze_step=freeze)
        try:
            elastic.ElasticDDP(group, model, wrong, commit_every=2)
            fail("ElasticDDP took a 1-bit optimizer over another communicator")
        except gradwire.InvalidArgumentError as e:
            if "not over group.communicator" not in str(e):
                fail(f"unclear refusal: {e}")
            say(f"rank {group.rank}: refused a 1-bit optimizer over another communicator: {e}")
        del wrong, other
    opt = make(model.parameters(), group.communicator, lr=1e-2, freeze_step=freeze)
    trainer = elastic.ElasticDDP(group, model, opt, commit_every=2)
    if trainer.module is not model:
        fail("ElasticDDP wrapped the model although the optimizer averages the gradients")

    joiner = group.generation > 0
    if joiner:
        say(f"rank {group.rank}: joined: generation {group.generation} at step {trainer.step}")
        if opt.core.steps != trainer.step or opt.core.compressing != (trainer.step >= freeze):
            fail(f"the joiner's optimizer is at step {opt.core.steps}, the job at {trainer.step}")
    end = trainer.step + after_join if joiner else None

    states = {trainer.step: opt.core.save_replicated_state()}
    recoveries = 0
    while end is None or trainer.step < end:
        step = trainer.step
        try:
            g = torch.Generator().manual_seed(1000 + step)
            x = torch.randn(12, 8, generator=g)
            y = torch.tanh(x[:, :4] * 0.7 + 0.1 * torch.randn(12, 4, generator=g))
            x, y = x[group.rank::group.size], y[group.rank::group.size]
            opt.zero_grad()
            torch.nn.functional.mse_loss(trainer.module(x), y).backward()
            opt.step()
            states[step + 1] = opt.core.save_replicated_state()
            if group.generation == 0 and first_rank == kill_rank and step + 1 == kill_at:
                say(f"rank {first_rank}: killed after step {kill_at}")
                os.kill(os.getpid(), signal.SIGKILL)
            if trainer.step_done():
                end = trainer.step + after_join
                say(f"rank {group.rank}: a process joined: generation {group.generation}, "
                    f"world {group.size}, at step {trainer.step}")
            elif recoveries and end is None:
                time.sleep(0.02)  # waiting for the replacement: slow steps
                if trainer.step > 20000:
                    fail("no process joined")
        except Exception as e:  # noqa: BLE001 - recover() re-raises what is not a lost member
            before = opt.core.steps
            trainer.recover(e)
            recoveries += 1
            at = trainer.step
            say(f"rank {group.rank}: recovered: generation {group.generation}, world "
                f"{group.size}, at step {at} (the optimizer had done {before})")
            # The kill's recovery; a later one is a join that failed while
            # the generation formed, retried (the state checks hold for it).
            if recoveries == 1 and group.size != 2:
                fail(f"world {group.size}, not 2")
            if recoveries == 1 and at >= before:
                fail(f"no roll back (committed step {at}, the optimizer had done {before})")
            if opt.core.steps != at:
                fail(f"the optimizer is at step {opt.core.steps} after recovering to the "
                     f"commit of step {at}")
            if opt.core.compressing != (at >= freeze):
                fail("the optimizer's stage is not the committed one")
            if opt.core.save_replicated_state() != states[at]:
                fail(f"the optimizer's state differs from the one at step {at}")
    if (not joiner and recoveries < 1) or group.size != 3:
        fail(f"{recoveries} recoveries, world {group.size} at the end")
    if opt.core.steps != end or not opt.core.compressing:
        fail(f"the optimizer ends at step {opt.core.steps} (the job at {end})")
    # Every member's parameters and optimizer state, bit for bit.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    bits = flat.view(torch.int32)
    digest = int.from_bytes(hashlib.sha256(opt.core.save_replicated_state()).digest()[:7], "little")
    mine = torch.cat([bits.to(torch.int64), torch.tensor([digest], dtype=torch.int64)])
    everyone = [torch.empty_like(mine) for _ in range(group.size)]
    dist.all_gather(everyone, mine)
    for r, theirs in enumerate(everyone):
        if not torch.equal(theirs, mine):
            fail(f"rank {r}'s parameters or optimizer state differ from this rank's")
    params = hashlib.sha256(flat.numpy().tobytes()).hexdigest()[:16]
    say(f"rank {group.rank}: done at step {trainer.step}, world {group.size}, params {params}")
    dist.barrier()
    group.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
