"""DDP comm hooks running gradwire's C++ kernels.

Drop-in for PyTorch's ``torch.distributed.algorithms.ddp_comm_hooks.default_hooks``
hooks, same signature and state (the process group, or None for the world)::

    from gradwire.torch import hooks
    ddp.register_comm_hook(state=None, hook=hooks.fp16_compress_hook)

The bucket is cast to 16 bits and divided by the world size by gradwire's
CPU kernels (``gradwire::torch::compress`` in gradwire/torch/c10d_hooks.h:
each element rounded once, as torch's hook does with
``.to(float16).div_(n)``), reduced in 16 bits through the group's backend
(gradwire's or any other), and widened back by the kernels.

PowerSGD, like torch's ``powerSGD_hook`` (same state options), running
gradwire's C++ implementation (src/compress/powersgd.cpp: the two
allreduces of a bucket batched, error feedback, warm start) on the group's
gradwire communicator::

    state = hooks.PowerSGDState(process_group=None, matrix_approximation_rank=4,
                                start_powerSGD_iter=1000)
    ddp.register_comm_hook(state, hooks.powerSGD_hook)

The 1-bit Adam/LAMB optimizers are in ``gradwire.torch.optim``.
"""
import torch
import torch.distributed as dist

from gradwire import _C_torch


def _compress_hook(process_group, bucket, dtype):
    group = process_group if process_group is not None else dist.group.WORLD
    world = dist.get_world_size(group)
    buffer = bucket.buffer()
    if buffer.dtype != torch.float32 or buffer.device.type != "cpu":
        # What torch's hook does, for buckets the kernels do not take.
        compressed = buffer.to(dtype).div_(world)
    else:
        compressed = torch.empty(buffer.shape, dtype=dtype)
        _C_torch.compress(buffer, compressed, world)
    fut = dist.all_reduce(compressed, group=group, async_op=True).get_future()

    def decompress(fut):
        reduced = fut.value()[0]
        if buffer.dtype == torch.float32 and buffer.device.type == "cpu":
            _C_torch.decompress(reduced, buffer)
        else:
            buffer.copy_(reduced)
        return buffer

    return fut.then(decompress)


def fp16_compress_hook(process_group, bucket):
    """Like torch's ``default_hooks.fp16_compress_hook``, on gradwire's kernels."""
    return _compress_hook(process_group, bucket, torch.float16)


def bf16_compress_hook(process_group, bucket):
    """Like torch's ``default_hooks.bf16_compress_hook``, on gradwire's kernels."""
    return _compress_hook(process_group, bucket, torch.bfloat16)


class PowerSGDState:
    """The options of torch's ``powerSGD_hook.PowerSGDState``, same names and
    defaults; the state (error buffers, Q matrices, counters) lives in C++.
    ``state_dict()``/``load_state_dict()`` save and restore it exactly (every
    rank its own: the error buffers differ between ranks)."""

    def __init__(self, process_group, matrix_approximation_rank=1, start_powerSGD_iter=1_000,
                 min_compression_rate=2, use_error_feedback=True, warm_start=True,
                 orthogonalization_epsilon=0, random_seed=0,
                 compression_stats_logging_frequency=10_000,
                 batch_tensors_with_same_shape=False):
        self.process_group = process_group
        self.matrix_approximation_rank = matrix_approximation_rank
        self.start_powerSGD_iter = start_powerSGD_iter
        self.iter = 0
        self._impl = _C_torch.PowerSGDHookState(
            matrix_approximation_rank=matrix_approximation_rank,
            start_powerSGD_iter=start_powerSGD_iter,
            min_compression_rate=float(min_compression_rate),
            use_error_feedback=use_error_feedback, warm_start=warm_start,
            orthogonalization_epsilon=float(orthogonalization_epsilon),
            random_seed=random_seed,
            batch_tensors_with_same_shape=batch_tensors_with_same_shape)

    def compression_stats(self):
        """(compress rate, numel before, numel after), as torch's."""
        before = self._impl.numel_before_compression()
        after = self._impl.numel_after_compression()
        return (before / after if after else 0.0, before, after)

    def state_dict(self):
        return {"iter": self.iter, "gradwire": self._impl.save_state()}

    def load_state_dict(self, state):
        self.iter = state["iter"]
        self._impl.load_state(state["gradwire"])


def powerSGD_hook(state, bucket):
    """Like torch's ``powerSGD_hook``, on gradwire's PowerSGD and communicator.
    The group must use the gradwire backend; float32 buckets on the CPU or on
    a CUDA device (there the products, the orthonormalisation and the error
    feedback run on the GPU, on PyTorch's current stream, and the
    allreduces take the device path)."""
    group = state.process_group if state.process_group is not None else dist.group.WORLD
    backend = group._get_backend(torch.device("cpu"))
    if not isinstance(backend, _C_torch.Backend):
        raise TypeError("gradwire's powerSGD_hook runs on gradwire's communicator: create the "
                        "group with backend=\"gradwire\" (this one uses "
                        f"{type(backend).__name__})")
    shapes = [list(g.shape) for g in bucket.gradients()]
    fut = _C_torch._powersgd_bucket(state._impl, backend, bucket.buffer(), shapes,
                                    bucket.index(), state.iter)
    if bucket.is_last():
        state.iter += 1
    # torch's Python-hook glue wants the value as a Python object, which a
    # Python callback gives it.
    return fut.then(lambda f: f.value())
