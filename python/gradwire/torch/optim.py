"""1-bit Adam and 1-bit LAMB as torch.optim optimizers, over gradwire's C++
implementation (gradwire/compress.h; the formulas and the compressed
allreduce with error feedback are all C++).

They average the gradients themselves: use them on a plain module, *not* one
wrapped in DistributedDataParallel. The constructor broadcasts the
parameters from rank 0; then every rank runs backward on its own batch and
calls ``step()``::

    import gradwire
    from gradwire.torch.optim import OneBitAdam
    comm = gradwire.Communicator.create()          # mpirun or torchrun env
    opt = OneBitAdam(model.parameters(), comm, lr=1e-3, freeze_step=1000)
    loss.backward(); opt.step(); opt.zero_grad()

Parameters must be dense float32 tensors, all on the CPU or all on one CUDA
device; on CUDA the state, the compression and the collectives stay on the
GPU (after PyTorch's current stream). For mixed precision keep float32
(master) parameters and compute in 16 bits under ``torch.autocast``.
``state_dict()`` carries this rank's
whole state (moments, error buffers, step counter) under "gradwire_state",
so a resumed run continues bit for bit; every rank saves and loads its own.

Elastic training: build one over ``group.communicator`` and pass it to
``gradwire.torch.elastic.ElasticDDP``, which commits its state and moves it
to each new generation (no DDP then: the optimizer averages the gradients).
"""
import torch

import gradwire
from gradwire import _C


class _OneBit(torch.optim.Optimizer):
    def __init__(self, params, comm, lr, make_core):
        super().__init__(params, dict(lr=lr))
        self._params = [p for g in self.param_groups for p in g["params"]]
        self._device = self._params[0].device if self._params else torch.device("cpu")
        for i, p in enumerate(self._params):
            if p.dtype != torch.float32 or p.device.type not in ("cpu", "cuda"):
                raise gradwire.InvalidArgumentError(
                    f"parameter {i} is {p.dtype} on {p.device}; 1-bit optimizers keep float32 "
                    "state and take dense float32 CPU or CUDA tensors (for mixed precision keep "
                    "float32 master parameters and compute in 16 bits under torch.autocast)")
            if p.device != self._device:
                raise gradwire.InvalidArgumentError(
                    f"parameter {i} is on {p.device}, parameter 0 on {self._device}; all "
                    "parameters must be on one device")
        self._comm = comm if comm is not None else gradwire.Communicator.create()
        n = sum(p.numel() for p in self._params)
        self._flat_p = torch.empty(n, dtype=torch.float32, device=self._device)
        self._flat_g = torch.empty(n, dtype=torch.float32, device=self._device)
        self._broadcast_params()
        device = self._device.index if self._device.type == "cuda" else -1
        if device is None:
            device = torch.cuda.current_device()
        self._core = make_core(self._comm, n, [p.numel() for p in self._params], device)

    @torch.no_grad()
    def _broadcast_params(self):
        """Rank 0's parameters to every rank of self._comm (replicas start equal)."""
        self._gather(self._flat_p, [p for p in self._params])
        if self._device.type == "cuda":
            # The broadcast goes through host memory, once per start or rebind.
            host = self._flat_p.cpu()
            self._comm.broadcast(host, root=0).wait()
            self._flat_p.copy_(host)
        else:
            self._comm.broadcast(self._flat_p, root=0).wait()
        self._scatter()

    def rebind(self, comm):
        """Collective over `comm`, as the constructor is (the parameters are
        broadcast from rank 0): moves the optimizer onto `comm`, e.g. a new
        elastic generation's; its error feedback restarts at zero, the rest
        (moments, step counter and stage, LAMB's coefficients) stays.
        gradwire.torch.elastic.ElasticDDP calls it."""
        self._comm = comm
        self._broadcast_params()
        self._core.rebind(comm)

    def replicated_state_dict(self):
        """state_dict() with the state every rank holds alike: without this
        rank's error feedback, which load_state_dict() then restarts at zero
        (what ElasticDDP commits)."""
        sd = super().state_dict()
        sd["gradwire_state"] = self._core.save_replicated_state()
        return sd

    def _gather(self, out, tensors):
        at = 0
        for t in tensors:
            k = t.numel()
            out[at:at + k].copy_(t.reshape(-1))
            at += k

    def _scatter(self):
        at = 0
        for p in self._params:
            k = p.numel()
            p.copy_(self._flat_p[at:at + k].view_as(p))
            at += k

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._gather(self._flat_p, self._params)
        # A parameter without a gradient on this rank contributes zeros.
        self._gather(self._flat_g, [p.grad if p.grad is not None else torch.zeros_like(p)
                                    for p in self._params])
        lr = float(self.param_groups[0]["lr"])
        if self._device.type == "cuda":
            stream = torch.cuda.current_stream(self._device).cuda_stream
            self._core._step_device(self._flat_p.data_ptr(), self._flat_g.data_ptr(), lr, stream)
        else:
            self._core.step(self._flat_p, self._flat_g, lr)
        self._scatter()
        return loss

    @property
    def core(self):
        """The C++ optimizer: steps, compressing, last_wire_bytes, save_state()."""
        return self._core

    def state_dict(self):
        sd = super().state_dict()
        sd["gradwire_state"] = self._core.save_state()
        return sd

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        core = state_dict.pop("gradwire_state", None)
        super().load_state_dict(state_dict)
        if core is not None:
            self._core.load_state(core)


class OneBitAdam(_OneBit):
    """1-bit Adam (Tang et al. 2021): ``freeze_step`` steps of exact Adam on
    averaged gradients, then the variance freezes and the momentum is averaged
    with 1 bit per element (see gradwire/compress.h for every option)."""

    def __init__(self, params, comm=None, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=0.0, freeze_step=100, bias_correction=True,
                 precondition_compression=True, momentum_clip=10.0):
        super().__init__(params, comm, lr, lambda c, n, layers, device: _C.OneBitAdam(
            c, n, beta1=betas[0], beta2=betas[1], eps=eps, weight_decay=weight_decay,
            freeze_step=freeze_step, bias_correction=bias_correction,
            precondition_compression=precondition_compression, momentum_clip=momentum_clip,
            device=device))


class OneBitLamb(_OneBit):
    """1-bit LAMB (Li et al. 2021); each parameter tensor is one LAMB layer."""

    def __init__(self, params, comm=None, lr=1e-2, betas=(0.9, 0.999), eps=1e-6,
                 weight_decay=0.0, freeze_step=100, bias_correction=True,
                 precondition_compression=True, momentum_clip=10.0, live_coefficients=True):
        # live_coefficients: LAMB's coefficient recomputed every step of the
        # compression stage (False: the paper's frozen coefficient times the
        # variance-drift factor; see OneBitLambOptions in gradwire/compress.h).
        super().__init__(params, comm, lr, lambda c, n, layers, device: _C.OneBitLamb(
            c, layers, beta1=betas[0], beta2=betas[1], eps=eps, weight_decay=weight_decay,
            freeze_step=freeze_step, bias_correction=bias_correction,
            precondition_compression=precondition_compression, momentum_clip=momentum_clip,
            live_coefficients=live_coefficients, device=device))
