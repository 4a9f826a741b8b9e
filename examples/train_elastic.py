#!/usr/bin/env python3
"""Fashion-MNIST with torch DDP on backend "gradwire" that survives a lost
rank (gradwire.torch.elastic): the survivors continue in process from their
last in-memory commit; a replacement started later joins at a commit.
The Python twin of examples/train_elastic.cpp (same output lines).

    d=$(mktemp -d)   # the store: a directory every rank sees, fresh for each job
    for r in 0 1 2; do
      GRADWIRE_STORE_DIR=$d RANK=$r WORLD_SIZE=3 python3 examples/train_elastic.py &
    done
    # kill -9 one of them; later start a replacement:
    GRADWIRE_STORE_DIR=$d RANK=1 WORLD_SIZE=3 python3 examples/train_elastic.py

The global batch (--global-batch) is kept at any world size: each rank takes
every size-th sample of the step's batch.
"""
import argparse
import hashlib
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import gradwire.torch.elastic as elastic
from gradwire.torch.hooks import PowerSGDState
from fashion_mnist import Cnn, load_train  # examples/fashion_mnist.py, next to this script


def now_ms():
    return int(time.time() * 1000)


def say(text):
    os.write(1, (text + "\n").encode())  # unbuffered: a kill must not lose it


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--global-batch", type=int, default=96)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--commit-every", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--kill-at-step", type=int, default=-1)
    p.add_argument("--kill-rank", type=int, default=-1)
    p.add_argument("--min-accuracy", type=float, default=0)
    p.add_argument("--compression", choices=("none", "powersgd"), default="none")
    p.add_argument("--powersgd-rank", type=int, default=4)
    p.add_argument("--powersgd-start", type=int, default=20)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    images, labels = load_train(n=args.limit or None)
    test_images, test_labels = load_train(split="t10k")
    n = len(labels)
    steps_per_epoch = (n + args.global_batch - 1) // args.global_batch
    total = steps_per_epoch * args.epochs

    group = elastic.join()
    first_rank, original = group.rank, group.generation == 0
    torch.manual_seed(args.seed * 1000 + first_rank)  # DDP broadcasts rank 0's model
    model = Cnn()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    powersgd = None
    if args.compression == "powersgd":
        # Its state (Q, counters, this rank's error feedback) is committed
        # with the model and restored after a membership change.
        powersgd = PowerSGDState(None, matrix_approximation_rank=args.powersgd_rank,
                                 start_powerSGD_iter=args.powersgd_start)
    trainer = elastic.ElasticDDP(group, model, optimizer, commit_every=args.commit_every,
                                 powersgd=powersgd)
    evaluated, accuracy, recovered_at = None, 0.0, None

    def report(why):
        nonlocal evaluated
        kind = "committed state" if group.state["restored"] else "initial state"
        say(f"rank {group.rank}: {why}: generation {group.generation}, world {group.size}, "
            f"at step {trainer.step} ({kind})")
        evaluated = None  # every member evaluates alike after a change

    def evaluate():
        model.eval()
        counts = torch.zeros(2, dtype=torch.float64)
        with torch.no_grad():
            for k in range(group.rank * 1000, len(test_labels), group.size * 1000):
                pred = model(test_images[k:k + 1000]).argmax(1)
                counts[0] += float(pred.eq(test_labels[k:k + 1000]).sum())
                counts[1] += float(len(pred))
        dist.all_reduce(counts)
        model.train()
        return 100.0 * float(counts[0] / counts[1])

    report("started" if original else "joined")
    while True:
        try:
            step = trainer.step
            if step > 0 and step % steps_per_epoch == 0 and evaluated != step:
                accuracy, evaluated = evaluate(), step
                if group.rank == 0:
                    say(f"epoch {step // steps_per_epoch}/{args.epochs}  test acc "
                        f"{accuracy:.2f}%  world {group.size}")
            if step >= total:
                break
            epoch, j = divmod(step, steps_per_epoch)
            perm = torch.randperm(n, generator=torch.Generator().manual_seed(args.seed * 1000003 + epoch))
            idx = perm[j * args.global_batch:(j + 1) * args.global_batch][group.rank::group.size]
            optimizer.zero_grad()
            F.cross_entropy(trainer.module(images[idx]), labels[idx]).backward()
            optimizer.step()
            if recovered_at is not None:
                t = now_ms()
                say(f"rank {group.rank}: first step after recovery done at {t} ms (step "
                    f"{step + 1}, {t - recovered_at} ms after recover() returned)")
                recovered_at = None
            if original and step + 1 == args.kill_at_step and first_rank == args.kill_rank:
                say(f"rank {first_rank}: killed at step {step + 1} at {now_ms()} ms")
                os.kill(os.getpid(), signal.SIGKILL)
            if trainer.step_done():
                report("a process joined")
        except Exception as e:  # noqa: BLE001 - recover() re-raises what is not a lost member
            say(f"rank {group.rank}: generation {group.generation} failed at step "
                f"{trainer.step} at {now_ms()} ms")
            trainer.recover(e)
            recovered_at = now_ms()
            report("recovered")
    digest = hashlib.sha256(b"".join(t.detach().contiguous().numpy().tobytes()
                                     for t in model.state_dict().values())).hexdigest()
    say(f"rank {group.rank} state at step {trainer.step}: world {group.size}, generation "
        f"{group.generation}, recoveries {group.recoveries}, params {digest}")
    if powersgd is not None:
        # The hook counts the steps it ran; after a rollback to a commit it
        # agrees with the step only if its committed state was restored.
        say(f"rank {group.rank} powersgd: iter {powersgd.iter}, compression rate "
            f"{powersgd.compression_stats()[0]:.1f}")
    if group.rank == 0:
        say(f"final test accuracy {accuracy:.2f}%")
    dist.barrier()
    group.finish()  # a process still waiting to join gives up now
    if accuracy < args.min_accuracy:
        print(f"test accuracy {accuracy:.2f}% is below --min-accuracy {args.min_accuracy}%",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
