"""gradwire's sharded engine (ZeRO stages 1-3) for torch modules.

    import gradwire.torch
    from gradwire.torch import ShardedDataParallel, sharded

    dist.init_process_group(backend="gradwire")
    model = Net()                                   # CPU; float32, or .to(torch.bfloat16)
    sdp = ShardedDataParallel(model, stage=2, optimizer=sharded.Adam(lr=1e-3))
    for x, y in data:
        loss = loss_fn(sdp(x), y)
        loss.backward()      # gradients reduce-scattered bucket by bucket
        sdp.step()           # Adam on this rank's shard, parameters gathered back

It binds the libtorch adapter's ``gradwire::torch::ShardedDataParallel``
(``gradwire/torch/sharded_data_parallel.h``) over the group's gradwire
communicator: the same engine, optimizers, stages and checkpoints as in C++
(Note [mirror module] in python/src/torch/sharded.cpp). The module's
parameters become the engine's; ``step()`` replaces ``optimizer.step()``
and the hooks consume ``.grad`` (no ``zero_grad()`` needed).
"""
import contextlib

import torch
import torch.distributed as dist

from gradwire import _C_torch

__all__ = ["ShardedDataParallel", "Adam", "AdamW", "SGD", "save_ddp_checkpoint",
           "load_ddp_checkpoint"]


def Adam(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
    """The engine's Adam (``torch.optim.Adam``'s keywords; weight decay added
    to the gradient; no amsgrad), stepping on flat float32 shards.
    ``.lr`` reads and sets the learning rate (schedules)."""
    return _C_torch._shard_adam(float(lr), float(betas[0]), float(betas[1]), float(eps),
                                float(weight_decay), False)


def AdamW(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
    """The engine's AdamW (decoupled weight decay), ``torch.optim.AdamW``'s keywords."""
    return _C_torch._shard_adam(float(lr), float(betas[0]), float(betas[1]), float(eps),
                                float(weight_decay), True)


def SGD(lr=1e-2, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
    """The engine's SGD with momentum, as ``torch.optim.SGD`` computes it."""
    return _C_torch._shard_sgd(float(lr), float(momentum), float(dampening),
                               float(weight_decay), bool(nesterov))


_DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


def _tensors_in(output):
    """The tensors of a forward's output: a tensor, or lists, tuples and
    dicts of them."""
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, dict):
        output = list(output.values())
    if isinstance(output, (list, tuple)):
        return [t for o in output for t in _tensors_in(o)]
    return []


class ShardedDataParallel(torch.nn.Module):
    """Wraps ``module`` for sharded data-parallel training over ``process_group``
    (a group whose backend is "gradwire"; None: the default group).

    Collective: every rank must pass the same module structure (a
    ``gradwire.MismatchError`` on every rank names the first difference);
    rank 0's parameters and buffers are broadcast. Host (CPU) parameters of
    float32, bfloat16 or float16; 16-bit parameters keep float32 master
    weights and optimizer state on the shard (mixed precision).

    stage: 1 (optimizer state sharded), 2 (+ gradients), 3 (+ parameters at
        rest). At stage 3 each entry of ``units`` (default: the module's direct
        children, in registration order, which should be forward order) is
        gathered by a forward pre-hook just before it runs (the next one
        prefetched); see ``reshard_after_forward``.
    reshard_after_forward: stage 3 (default True, as FSDP2; off with
        ``find_unused_parameters``, whose ranks' backward graphs may differ
        and so would not gather the same units): a forward hook
        frees each unit's gathered parameters after its forward, and a hook on
        its output tensors' gradients gathers them again before its backward
        (Note [reshard after forward]); in backward a unit is freed once its
        gradients are handed over. Not for the last unit (its backward comes
        first), nor unit 0 when the root module has parameters of its own
        (they join unit 0 and the root may read them after unit 0's forward).
        A unit's parameters are NaN between its forward and its backward:
        parameters shared between units, or read outside their unit's
        forward, need False, which keeps every unit gathered from its forward
        to the end of backward.
    optimizer: ``sharded.Adam(...)``, ``sharded.AdamW(...)`` or ``sharded.SGD(...)``.
    reduce_dtype: the dtype gradients are reduced in (None: the parameters').
    max_grad_norm: > 0 clips gradients to this global L2 norm.
    loss_scaling: True, or a dict of ``initial``, ``growth``, ``backoff``,
        ``growth_interval``, ``min_scale``: dynamic loss scaling for float16;
        multiply the loss by ``loss_scale`` before backward; a step with an
        inf/NaN gradient on any rank is skipped on every rank.
    find_unused_parameters: parameters without a gradient count as zeros.
    overlap_parameter_gather: stages 1, 2: ``step()`` returns before the
        updated parameters are gathered; each unit's forward pre-hook waits
        only for its own buckets.
    bucket_cap_mb, first_bucket_cap_mb, alignment, max_buckets_in_flight:
        the engine's bucketing (``gradwire/sharded.h``).
    gradient_compression: None or "int8": gradients reduce-scattered as int8
        with one float32 scale per ``compression_block_size`` elements
        (1..65536), with ``error_feedback`` (per rank, 4 bytes per parameter
        element; in the checkpoints, restored at the same world size, else
        restarted at zero), from optimizer step
        ``compression_start_step`` on (the steps before are uncompressed).
        Every rank must pass the same values (else an error on every rank).
    parameter_compression: None or "int8", stage 3 only: the parameters'
        gathers (before each unit's forward and backward) send int8 with one
        float32 scale per ``parameter_compression_block_size`` elements, from
        optimizer step ``parameter_compression_start_step`` on; every rank
        computes with the dequantized weights, the fp32 master weights and
        checkpoints stay exact. Stages 1 and 2 refuse it.
    """

    def __init__(self, module, process_group=None, *, stage=2, optimizer=None,
                 reduce_dtype=None, max_grad_norm=0.0, loss_scaling=False,
                 find_unused_parameters=False, overlap_parameter_gather=False, units=None,
                 bucket_cap_mb=25, first_bucket_cap_mb=1, alignment=32,
                 max_buckets_in_flight=4, gradient_compression=None,
                 compression_block_size=256, error_feedback=True, compression_start_step=0,
                 reshard_after_forward=True, parameter_compression=None,
                 parameter_compression_block_size=256, parameter_compression_start_step=0):
        super().__init__()
        if optimizer is None:
            raise TypeError("ShardedDataParallel needs optimizer=gradwire.torch.sharded.Adam(...), "
                            "AdamW(...) or SGD(...)")
        group = process_group if process_group is not None else dist.group.WORLD
        backend = group._get_backend(torch.device("cpu"))
        if not isinstance(backend, _C_torch.Backend):
            raise TypeError("gradwire's ShardedDataParallel runs on gradwire's communicator: "
                            "create the group with backend=\"gradwire\" (this one uses "
                            f"{type(backend).__name__})")
        if gradient_compression not in (None, "none", "int8"):
            raise ValueError("gradient_compression must be None, \"none\" or \"int8\", not "
                             f"{gradient_compression!r}")
        if parameter_compression not in (None, "none", "int8"):
            raise ValueError("parameter_compression must be None, \"none\" or \"int8\", not "
                             f"{parameter_compression!r}")
        if reduce_dtype is not None and reduce_dtype not in _DTYPES:
            raise TypeError(f"reduce_dtype must be one of {list(_DTYPES)}, not {reduce_dtype}")
        scaling = {} if loss_scaling in (False, None) else \
            ({} if loss_scaling is True else dict(loss_scaling))
        unknown = set(scaling) - {"initial", "growth", "backoff", "growth_interval", "min_scale"}
        if unknown:
            raise TypeError(f"loss_scaling: unknown keys {sorted(unknown)}")
        self.module = module
        self.stage = stage
        self.optimizer = optimizer
        tensors = [(n, p, False) for n, p in module.named_parameters()]
        tensors += [(n, b, True) for n, b in module.named_buffers()]
        self._impl = _C_torch.ShardedDataParallel(
            backend=backend, tensors=tensors, optimizer=optimizer, stage=int(stage),
            first_bucket_bytes=int(first_bucket_cap_mb * 2**20),
            bucket_bytes=int(bucket_cap_mb * 2**20), alignment=int(alignment),
            reduce_dtype=None if reduce_dtype is None else _DTYPES[reduce_dtype],
            max_grad_norm=float(max_grad_norm), loss_scaling=bool(loss_scaling),
            initial_scale=float(scaling.get("initial", 65536.0)),
            growth=float(scaling.get("growth", 2.0)), backoff=float(scaling.get("backoff", 0.5)),
            growth_interval=int(scaling.get("growth_interval", 2000)),
            min_scale=float(scaling.get("min_scale", 1.0)),
            find_unused_parameters=bool(find_unused_parameters),
            max_buckets_in_flight=int(max_buckets_in_flight),
            overlap_parameter_gather=bool(overlap_parameter_gather),
            units=list(units or []),
            gradient_compression=gradient_compression,
            compression_block_size=int(compression_block_size),
            error_feedback=bool(error_feedback),
            compression_start_step=int(compression_start_step),
            reshard_after_forward=bool(reshard_after_forward),
            parameter_compression=parameter_compression,
            parameter_compression_block_size=int(parameter_compression_block_size),
            parameter_compression_start_step=int(parameter_compression_start_step))
        # The use() calls a C++ forward makes (Note [mirror module]): before
        # each unit's forward, and before the root's for its own parameters.
        self._hooks = []
        if stage == 3 or overlap_parameter_gather:
            names = list(units) if units else [n for n, _ in module.named_children()]
            if any(True for _ in module.parameters(recurse=False)):
                self._hooks.append(module.register_forward_pre_hook(self._pre_hook("")))
            for name in names:
                if self._impl.has_module(name):
                    sub = module.get_submodule(name)
                    self._hooks.append(sub.register_forward_pre_hook(self._pre_hook(name)))
        # Stage 3: the after_forward() calls (Note [reshard after forward]).
        if stage == 3 and reshard_after_forward:
            names = [n for n in (list(units) if units else
                                 [n for n, _ in module.named_children()])
                     if self._impl.has_module(n)]
            if any(True for _ in module.parameters(recurse=False)):
                names = names[1:]  # the root's own parameters are in unit 0
            for name in names[:-1]:  # the last unit's backward comes first
                sub = module.get_submodule(name)
                self._hooks.append(sub.register_forward_hook(self._post_hook(name)))

    def _pre_hook(self, name):
        impl = self._impl

        def hook(_module, _args):
            impl.use(name)
        return hook

    def _post_hook(self, name):
        impl = self._impl

        def hook(_module, _args, output):
            tensors = _tensors_in(output)
            if torch.is_grad_enabled() and not any(t.requires_grad for t in tensors):
                return  # outputs we cannot hook: the unit stays gathered
            impl.after_forward(name, tensors)
        return hook

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def step(self):
        """After backward: the optimizer on this rank's shard, then the
        parameters gathered back. False if skipped (a loss-scale overflow)."""
        return self._impl.step()

    def zero_grad(self, set_to_none=True):
        """Nothing to do outside ``no_sync()``: the hooks hand each gradient to
        the engine and drop ``.grad``. Inside, clears the accumulated ``.grad``."""
        for p in self.module.parameters():
            p.grad = None

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes inside accumulate ``.grad`` locally, without
        communicating; the next backward outside reduces the sum."""
        self._impl.enter_no_sync()
        try:
            yield
        finally:
            self._impl.exit_no_sync()

    def gather_all(self):
        """Every parameter current and readable on every rank (stage 3: every
        unit gathered until the next backward ends), e.g. before evaluation
        or ``module.state_dict()``."""
        self._impl.use_all()

    @property
    def loss_scale(self):
        return self._impl.loss_scale

    @property
    def optimizer_steps(self):
        return self._impl.optimizer_steps

    @property
    def skipped_steps(self):
        return self._impl.skipped_steps

    @property
    def last_grad_norm(self):
        return self._impl.last_grad_norm

    def memory(self):
        """Bytes the engine holds, by kind (``gradwire::ShardedMemory``)."""
        return self._impl.memory()

    def shard_state(self):
        """This rank's pieces (parameters, master weights, optimizer state) as
        bytes (``gradwire::ShardedState``)."""
        return self._impl.state()

    def full_state(self):
        """Collective: every parameter whole, the same bytes on every rank: a
        stage-0 state that loads into any stage and world size."""
        return self._impl.full_state()

    def load_state(self, states):
        """Loads from a list of ``shard_state()`` / ``full_state()`` bytes of any
        world size and stage that together cover this rank's pieces."""
        if isinstance(states, (bytes, bytearray)):
            states = [states]
        self._impl.load_state([bytes(s) for s in states])

    def save_checkpoint(self, path, step, keep=2, meta=None):
        """Collective: a sharded checkpoint of step ``step`` in directory
        ``path`` (every rank its pieces, rank 0 the manifest; the directory
        shared by every rank). Keeps the newest ``keep``."""
        self._impl.save_checkpoint(str(path), int(step), int(keep), dict(meta or {}))

    def load_checkpoint(self, path):
        """Collective: loads the newest checkpoint in ``path``, written by any
        number of ranks; returns its step, or None if there is none. A
        checkpoint of another model (other sizes, or other parameter names
        or shapes) raises ``gradwire.InvalidArgumentError`` on every rank,
        naming the parameter, and changes nothing."""
        return self._impl.load_checkpoint(str(path))

    def close(self):
        """Removes the hooks and hands the parameters back as plain tensors
        (stages 1, 2: their values; stage 3: gathered whole). Collective at
        stage 3."""
        for h in self._hooks:
            h.remove()
        self._hooks = []
        self._impl.close()


# ---------------------------------------------------------------- unsharded (DDP) jobs

def _ddp_parts(module, optimizer, process_group):
    """The gradwire backend, the module's trainable parameters by name and
    the optimizer's class and layout options (Note [mirror optimizer] in
    python/src/torch/sharded.cpp)."""
    if isinstance(module, torch.nn.parallel.DistributedDataParallel):
        module = module.module  # the names ShardedDataParallel sees
    group = process_group if process_group is not None else dist.group.WORLD
    backend = group._get_backend(torch.device("cpu"))
    if not isinstance(backend, _C_torch.Backend):
        raise TypeError("gradwire's checkpoints run on gradwire's communicator: create the "
                        f"group with backend=\"gradwire\" (this one uses {type(backend).__name__})")
    params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
    kind = type(optimizer).__name__
    group0 = optimizer.param_groups[0] if optimizer.param_groups else {}
    amsgrad = bool(group0.get("amsgrad", False))
    momentum = float(group0.get("momentum", 0.0))
    return backend, params, kind, amsgrad, momentum


def save_ddp_checkpoint(module, optimizer, path, step, process_group=None, keep=2, meta=None):
    """Collective: an unsharded job's (torch DDP on backend "gradwire")
    module and ``torch.optim`` Adam, AdamW or SGD state as a sharded
    checkpoint of step ``step`` in ``path``: every rank writes its slice,
    rank 0 the manifest, in the format of ``ShardedDataParallel.save_checkpoint``,
    so that ``ShardedDataParallel.load_checkpoint`` loads it at any stage
    and world size (Note [torch optimizer state in sharded checkpoints] in
    gradwire/torch/unsharded_checkpoint.h). ``module`` may be the DDP
    wrapper or the module itself."""
    backend, params, kind, amsgrad, momentum = _ddp_parts(module, optimizer, process_group)
    states = []
    for _, p in params:
        st = optimizer.state.get(p)
        if not st:
            states.append(None)
        elif kind == "SGD":
            buf = st.get("momentum_buffer")
            states.append(None if buf is None else (0, [buf.detach()]))
        else:
            step_t = st.get("step", 0)
            states.append((int(step_t.item() if torch.is_tensor(step_t) else step_t),
                           [st["exp_avg"].detach(), st["exp_avg_sq"].detach()]))
    _C_torch._save_unsharded_checkpoint(
        backend=backend, params=params, kind=kind, amsgrad=amsgrad, momentum=momentum,
        states=states, dir=str(path), step=int(step), keep=int(keep), meta=dict(meta or {}))


def load_ddp_checkpoint(module, optimizer, path, process_group=None):
    """Collective: the newest sharded checkpoint in ``path`` (written by
    ``ShardedDataParallel`` at any stage and world size, or by
    ``save_ddp_checkpoint``) into the module's parameters and the
    optimizer's state (replaced), on every rank; returns its step, or None
    if there is none. A checkpoint of another model or optimizer kind, or a
    corrupt one, raises the same ``gradwire.Error`` on every rank and
    changes nothing."""
    backend, params, kind, amsgrad, momentum = _ddp_parts(module, optimizer, process_group)
    got = _C_torch._load_unsharded_checkpoint(
        backend=backend, params=params, kind=kind, amsgrad=amsgrad,
        momentum=momentum, dir=str(path))
    if got is None:
        return None
    step, states = got
    for (_, p), st in zip(params, states):
        optimizer.state.pop(p, None)
        if st is None:
            continue
        opt_step, tensors = st
        if kind == "SGD":
            optimizer.state[p] = {"momentum_buffer": tensors[0]}
        else:
            # torch keeps the step as a float32 tensor (on the CPU unless
            # capturable or fused).
            group = next(g for g in optimizer.param_groups if any(q is p for q in g["params"]))
            on = p.device if group.get("capturable") or group.get("fused") else "cpu"
            optimizer.state[p] = {"step": torch.tensor(float(opt_step), dtype=torch.float32,
                                                       device=on),
                                  "exp_avg": tensors[0], "exp_avg_sq": tensors[1]}
    return step
