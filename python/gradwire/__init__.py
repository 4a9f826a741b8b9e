"""gradwire: data-parallel collectives over libfabric.

Direct API (no torch needed); buffers are anything with the buffer protocol
or ``__dlpack__`` (numpy arrays, torch CPU tensors), C-contiguous, used in
place::

    import numpy as np, gradwire
    comm = gradwire.Communicator.create()     # mpirun, torchrun env, or a world of one
    grad = np.ones(1024, dtype=np.float32)
    comm.allreduce(grad, op="avg").wait()     # in place; Work.wait(timeout=...), Work.test()

As a torch.distributed backend: ``import gradwire.torch`` then
``torch.distributed.init_process_group(backend="gradwire")``.

Errors are ``gradwire.Error`` subclasses with ``.code`` ("InvalidArgument",
"Timeout", "PeerLost", "Mismatch", "Transport", "Internal", "Aborted",
"Protocol", "Unauthenticated") and
``.message``.
"""
from gradwire._C import (  # noqa: F401 - the public API
    AbortedError,
    Communicator,
    ElasticGroup,
    Error,
    InternalError,
    InvalidArgumentError,
    MismatchError,
    PeerLostError,
    ProtocolError,
    TimeoutError,
    TransportError,
    UnauthenticatedError,
    Work,
    __version__,
    shard_count,
    shard_offset,
)


def _restore_sigint():
    """libfabric links libinfinipath (its psm provider), whose load-time
    constructor installs a SIGINT handler that calls exit(1): Ctrl-C (and the
    KeyboardInterrupt our waits deliver, Note [interruptible wait]) would end
    the process silently. Re-install Python's handler; libfabric's shm
    provider still chains its clean-up in front of it when it starts."""
    import signal
    import threading
    if threading.current_thread() is threading.main_thread():
        handler = signal.getsignal(signal.SIGINT)
        if handler is not None:
            signal.signal(signal.SIGINT, handler)


_restore_sigint()

__all__ = [
    "AbortedError", "Communicator", "ElasticGroup", "Error", "InternalError", "InvalidArgumentError",
    "MismatchError", "PeerLostError", "ProtocolError", "TimeoutError", "TransportError",
    "UnauthenticatedError", "Work",
    "shard_count", "shard_offset",
]
