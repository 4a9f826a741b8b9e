"""DDP comm hooks running gradwire's C++ kernels.

Drop-in for PyTorch's ``torch.distributed.algorithms.ddp_comm_hooks.default_hooks``
hooks, same signature and state (the process group, or None for the world)::

    from gradwire.torch import hooks
    ddp.register_comm_hook(state=None, hook=hooks.fp16_compress_hook)

The bucket is cast to 16 bits and divided by the world size by gradwire's
CPU kernels (kernels/cpu/reduce.h: each element rounded once, as torch's
hook does with ``.to(float16).div_(n)``), reduced in 16 bits through the
group's backend (gradwire's or any other), and widened back by the kernels.

The 1-bit Adam/LAMB optimizers are in ``gradwire.torch.optim``. A PowerSGD
DDP hook over the C++ implementation is not bound yet (the C++ hook runs in
gradwire's own Reducer: gradwire/compress.h).
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
