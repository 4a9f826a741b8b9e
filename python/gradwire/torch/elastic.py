"""Elastic training with torch's DistributedDataParallel on backend "gradwire":
a lost rank does not stop the job, and a replacement joins while it trains.

    import gradwire.torch.elastic as elastic

    group = elastic.join()   # GRADWIRE_ETCD_ENDPOINTS or GRADWIRE_STORE_DIR, RANK, WORLD_SIZE
    trainer = elastic.ElasticDDP(group, model, optimizer)
    while trainer.step < total:
        try:
            x, y = global_batch(trainer.step).shard(group.size, group.rank)
            optimizer.zero_grad()
            loss_fn(trainer.module(x), y).backward()
            optimizer.step()
            trainer.step_done()              # commit in memory; a waiting process joins here
        except Exception as e:
            trainer.recover(e)               # re-raises anything but a lost member

Each membership is a generation (gradwire.ElasticGroup; C++:
gradwire/elastic.h). For each one ElasticDDP makes the default process group
(backend "gradwire", over a file store in GRADWIRE_STORE_DIR, or over etcd a
TCPStore served by the generation's rank 0) and wraps the
model in DistributedDataParallel. step_done() commits the model's and the
optimizer's state dicts in memory (and this rank's torch RNG state as its own);
when the membership changes, every member continues from the same commit, and
a joining process receives it from a survivor. Because the default process
group is replaced at every change, ElasticDDP owns torch.distributed's default
group: make no other groups.

With a 1-bit optimizer (gradwire.torch.optim.OneBitAdam or OneBitLamb, built
over ``group.communicator``: one over any other communicator is refused with
``gradwire.InvalidArgumentError``) there is no DDP, since the optimizer averages the
gradients itself: ``module`` is the model. Its replicated state (moments,
frozen variance, step counter and stage, LAMB's coefficients) is committed;
at a change it moves to the new generation and every member continues from
the commit with its error feedback at zero (C++: Note [1-bit optimizers
under elastic generations])::

    opt = OneBitAdam(model.parameters(), group.communicator, freeze_step=100)
    trainer = elastic.ElasticDDP(group, model, opt)
"""
import datetime
import gc
import io
import os
import re
import socket
import urllib.parse

import torch
import torch.distributed as dist

import gradwire
from gradwire import _C, _C_torch

from . import BACKEND  # registers backend "gradwire"
from . import hooks
from .optim import _OneBit

# What a collective that lost a member raises, through torch's layers too
# (DDP's backward turns gradwire.Error into RuntimeError with its text).
_MEMBERSHIP_CODES = ("Timeout", "PeerLost", "Aborted", "Transport")
_MEMBERSHIP_TEXT = re.compile(r"gradwire (Timeout|PeerLost|Aborted|Transport)\b")


def is_membership_error(error):
    """True if `error` is a collective failing for a lost or stuck member."""
    if isinstance(error, gradwire.Error):
        return error.code in _MEMBERSHIP_CODES
    return bool(_MEMBERSHIP_TEXT.search(str(error)))


def join(timeout=None, settle=None, min_size=1):
    """gradwire.ElasticGroup.join: the first WORLD_SIZE processes form the
    first generation; one started later waits for the members' next commit.
    timeout: seconds per collective (GRADWIRE_TIMEOUT_S); settle: seconds the
    survivors wait for each other after a failure (default 2)."""
    return _C.ElasticGroup.join(timeout=timeout, settle=settle, min_size=min_size)


def _address_toward(endpoints):
    """An address of this host that the other members can reach: the one of
    the interface that routes to the first etcd endpoint (no packet is
    sent), 127.0.0.1 when etcd is on this host's loopback."""
    url = endpoints.split(",")[0].strip()
    host = urllib.parse.urlsplit(url if "//" in url else "http://" + url).hostname or ""
    if not host or host == "localhost" or host.startswith("127."):
        return "127.0.0.1"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((host, 9))
        return s.getsockname()[0]


class ElasticDDP:
    """torch DDP over an ElasticGroup, rebuilt at every membership change."""

    def __init__(self, group, model, optimizer, commit_every=1, powersgd=None, **ddp_kwargs):
        """powersgd: a gradwire.torch.hooks.PowerSGDState made with
        process_group=None (it then follows each generation's default
        group); ElasticDDP registers powerSGD_hook with it on every
        generation's DDP and commits its state: a survivor resumes its own
        (error feedback included), a joiner takes the committing members' Q
        matrices and counters with its error feedback zeroed."""
        if commit_every < 1:
            raise ValueError(f"commit_every={commit_every} (expected >= 1)")
        if powersgd is not None and powersgd.process_group is not None:
            raise ValueError("ElasticDDP: make the PowerSGDState with process_group=None: every "
                             "generation has a new default process group")
        self.powersgd = powersgd
        # A 1-bit optimizer: no DDP; it moves to each generation (rebind).
        self._onebit = isinstance(optimizer, _OneBit)
        if self._onebit and (powersgd is not None or ddp_kwargs):
            raise ValueError("ElasticDDP: a 1-bit optimizer averages the gradients itself (there "
                             "is no DDP): no powersgd, no DDP arguments")
        if self._onebit and not optimizer.core.is_over(group.communicator):
            # As the C++ ElasticDistributedDataParallel: averaging over another
            # communicator would hang or mix in other ranks, and rebind()
            # could not move it at the next change.
            raise gradwire.InvalidArgumentError(
                f"rank {group.rank}: ElasticDDP: the 1-bit optimizer is not over "
                "group.communicator (build it over the current generation's, right before this: "
                "OneBitAdam(model.parameters(), group.communicator, ...))")
        self._onebit_generation = group.generation
        if ("GRADWIRE_STORE_DIR" not in os.environ
                and "GRADWIRE_ETCD_ENDPOINTS" not in os.environ):
            raise ValueError("ElasticDDP: neither GRADWIRE_ETCD_ENDPOINTS (etcd, across hosts) "
                             "nor GRADWIRE_STORE_DIR (a directory every rank sees) is set: "
                             "the elastic store")
        self.group = group
        self.model = model
        self.optimizer = optimizer
        self.commit_every = commit_every
        self.ddp_kwargs = ddp_kwargs
        self.step = 0      # completed steps; after a change, the committed step
        self.changes = 0   # membership changes seen here
        self._ddp = None
        state = group.state
        self._adopt(state)
        if not state["restored"]:
            self._commit()  # the first generation's starting point

    @property
    def module(self):
        """The current generation's DistributedDataParallel (the model itself
        with a 1-bit optimizer): call it for forward."""
        return self._ddp

    def step_done(self):
        """After optimizer.step(): counts the step and commits every
        commit_every steps. True if a process joined here (module is new)."""
        self.step += 1
        if self.step % self.commit_every:
            return False
        return self._commit()

    def recover(self, error):
        """In the handler of what a step raised: re-raises it unless a member
        was lost; otherwise the survivors (and any process waiting to join)
        form the next generation and continue from their last common commit.
        Returns the step to continue from."""
        # A member lost while the next generation builds its DDP fails that
        # generation too: recover again (each time one more member is gone).
        for attempt in range(17):
            if not is_membership_error(error):
                raise error
            self._teardown()
            state = self.group.recover(str(error)[:2000])
            self.changes += 1
            try:
                if not state["restored"]:
                    self.step = 0
                self._adopt(state)
                if not state["restored"]:
                    self._commit()
                return self.step
            except Exception as again:  # noqa: BLE001 - classified at the loop's top
                error = again
        raise error

    # ------------------------------------------------------------------
    def _teardown(self):
        """Drops this generation's DDP and process group, and closes any
        gradwire communicator torch still holds (Note [communicators at exit]):
        a failed one must not outlive its generation."""
        self._ddp = None
        if dist.is_initialized():
            dist.destroy_process_group()
        self._tcp_store = None
        gc.collect()
        _C_torch._shutdown_all()

    def _adopt(self, state):
        self._teardown()
        if self._onebit and self._onebit_generation != self.group.generation:
            # Collective, the same as the constructor of a joiner's optimizer
            # over this generation (so before the process group, as there).
            self.optimizer.rebind(self.group.communicator)
            self._onebit_generation = self.group.generation
        if state["restored"]:
            shared = torch.load(io.BytesIO(state["shared"]), weights_only=False)
            self.model.load_state_dict(shared["model"])
            self.optimizer.load_state_dict(shared["optimizer"])
            local = (torch.load(io.BytesIO(state["local"]), weights_only=False)
                     if state["local"] else {})
            if "rng" in local:
                torch.set_rng_state(local["rng"])
            if self.powersgd is not None:
                if local.get("powersgd") is not None:
                    self.powersgd.load_state_dict(local["powersgd"])
                elif shared.get("powersgd") is not None:
                    # A joiner: the members' Q and counters, no error of its own.
                    self.powersgd.load_state_dict(shared["powersgd"])
                    self.powersgd._impl.reset_error_feedback()
            self.step = state["step"]
        store = self._generation_store()
        dist.init_process_group(BACKEND, store=store, rank=self.group.rank,
                                world_size=self.group.size)
        if self._onebit:
            self._ddp = self.model
            return
        self._ddp = torch.nn.parallel.DistributedDataParallel(self.model, **self.ddp_kwargs)
        if self.powersgd is not None:
            self._ddp.register_comm_hook(self.powersgd, hooks.powerSGD_hook)

    def _generation_store(self):
        """torch's store for this generation's process group. On a shared
        directory, a FileStore there. Over etcd there is no directory, and
        torch has no etcd store of its own: the generation's rank 0 serves a
        TCPStore and tells the members where through the group itself
        (Note [a torch store per generation])."""
        if "GRADWIRE_STORE_DIR" in os.environ:
            path = os.path.join(os.environ["GRADWIRE_STORE_DIR"],
                                f"torch-generation-{self.group.generation}")
            return dist.FileStore(path, self.group.size)
        # Note [a torch store per generation]: the store lives exactly as long
        # as the generation. If its rank 0 dies, the generation fails anyway
        # and the next one (formed through etcd, which outlives every member)
        # makes its own; nothing in it needs to survive.
        timeout = datetime.timedelta(seconds=self._store_timeout_s())
        if self.group.rank == 0:
            host = _address_toward(os.environ["GRADWIRE_ETCD_ENDPOINTS"])
            self._tcp_store = dist.TCPStore(host, 0, self.group.size, is_master=True,
                                            timeout=timeout, wait_for_workers=False)
            where = f"{host} {self._tcp_store.port}".encode()
        else:
            where = b""
        host, port = self.group.broadcast(where, 0).decode().split()
        if self.group.rank == 0:
            return self._tcp_store
        return dist.TCPStore(host, int(port), self.group.size, is_master=False,
                             timeout=timeout)

    @staticmethod
    def _store_timeout_s():
        try:
            return max(10.0, float(os.environ.get("GRADWIRE_TIMEOUT_S", "60")))
        except ValueError:
            return 60.0

    def _commit(self):
        hook_state = self.powersgd.state_dict() if self.powersgd is not None else None
        shared = io.BytesIO()
        # A 1-bit optimizer's replicated state: the same bytes on every member.
        optimizer = (self.optimizer.replicated_state_dict() if self._onebit
                     else self.optimizer.state_dict())
        torch.save({"model": self.model.state_dict(), "optimizer": optimizer,
                    "powersgd": hook_state}, shared)
        local = io.BytesIO()
        torch.save({"rng": torch.get_rng_state(), "powersgd": hook_state}, local)
        if self.group.commit(self.step, shared.getvalue(), local.getvalue()):
            self.changes += 1
            self._adopt(self.group.state)
            return True
        return False
