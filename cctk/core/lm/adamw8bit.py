"""8-bit AdamW whose step never waits for the device (``--optimizer adamw8bit``).

Both moments are kept in 8 bits, blockwise (256 values a block, each block its float32 scale: about 2.03 bytes
a trained parameter for the two, against AdamW's 8), as torchao's ``OptimState8bit`` tensors, which behave as
float32 tensors that quantize themselves on ``copy_``; tensors under 4096 values (norms, biases) keep float32
moments, as torchao and bitsandbytes do. The update is one function per parameter tensor, plain tensor code
(``adamw_update``): compiled on CUDA (a few fused kernels a tensor), run as it is elsewhere (the suite runs it
on the CPU). Nothing in it reads a value on the host: the learning rate is a 0-d tensor the schedule fills,
the step count lives on the device, and a step whose gradient is not finite is skipped on the device, from
the ``found_inf`` flag the ``GradScaler`` hands an optimizer that says ``_step_supports_amp_scaling``.

Why not bitsandbytes' ``AdamW8bit`` (read in 0.50.2, measured in #46, docs/gpus.md): its ``step`` calls
``torch.cuda.synchronize()`` after every parameter tensor (341 a step for phi-1.5), and, without
``_step_supports_amp_scaling``, it makes the ``GradScaler`` read ``found_inf`` on the host, once more; torchao's
own ``AdamW8bit`` has no per-tensor wait but costs that read too, keeps its step count on the host, and
compiles on every device.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, overload

import torch
from torch import Tensor
from torch.optim.optimizer import ParamsT
from torchao.optim.quant_utils import quantize_8bit_with_qmap, scale_tensor
from torchao.optim.subclass_8bit import OptimState8bit  # its import warnings are silenced in cctk/__init__.py

BLOCK = 256  # values per quantization block (torchao's and bitsandbytes' default)
SMALLEST = 4096  # tensors with fewer values keep float32 moments
# A tensor is updated in chunks of at most CHUNK values (a multiple of BLOCK): the update's temporaries (measured
# on the CPU, run as it is: 63 bytes a value, dequantized moments, their new values, the quantization's
# scratch) then stay under WORKSPACE whatever the tensor (phi-1.5's embedding has 105M values: 6.6 GB at once),
# and every large tensor shares one chunk shape (one compiled graph for them all on CUDA).
CHUNK = 2**21
WORKSPACE = 64 * CHUNK  # bytes: the most an update holds beside the weights, gradients and moments


def adamw_update(
    p: Tensor,
    grad: Tensor,
    step: Tensor,
    exp_avg: Tensor,
    exp_avg_sq: Tensor,
    lr: Tensor,
    beta1: float,
    beta2: float,
    weight_decay: float,
    eps: float,
    skip: Tensor,
    inv_scale: Tensor,
) -> None:
    """One tensor's (or chunk's) AdamW update in float32, as ``torch.optim.AdamW`` computes it, written back
    into ``p`` and the moments (8-bit ones quantize themselves); ``step``: the steps applied before this one.
    Where ``skip`` (0-d, 1.0: a gradient somewhere was not finite) is set, nothing changes: the gradient
    counts as zero, the moments' weights as zero, and ``p`` keeps its value. ``inv_scale``: 1 / the loss
    scale still in the gradient (1.0 once unscaled)."""
    keep = skip > 0
    grad = torch.where(keep, 0.0, grad.float() * inv_scale)  # an inf or nan never reaches the arithmetic
    applied = 1.0 - skip
    step_new = step + applied  # the count this update makes (the caller adds it once per tensor)
    exp_avg_new = _dense(exp_avg).lerp(grad, (1 - beta1) * applied)  # weight 0: exactly the old moment
    exp_avg_sq_new = _dense(exp_avg_sq).lerp(grad.square(), (1 - beta2) * applied)
    bias1 = 1 - beta1 ** step_new.clamp(min=1)
    bias2 = 1 - beta2 ** step_new.clamp(min=1)
    denom = exp_avg_sq_new.sqrt() / bias2.sqrt() + eps
    p_new = p.float() * (1 - lr * weight_decay) - (lr / bias1) * exp_avg_new / denom
    p.copy_(torch.where(keep, p, p_new.to(p.dtype)))
    _store(exp_avg, exp_avg_new, keep)
    _store(exp_avg_sq, exp_avg_sq_new, keep)


def _store(moment: Tensor, value: Tensor, keep: Tensor) -> None:
    """``moment.copy_(value)`` (an 8-bit moment quantizes it as its own ``copy_`` does: torchao's block scales
    and code map), except where ``keep``: then its codes and scales stay, to the bit (quantizing its own
    dequantized values again would move a few codes)."""
    if not isinstance(moment, OptimState8bit):
        moment.copy_(torch.where(keep, moment, value))
        return
    scaled, scale = scale_tensor(value, moment.block_size)
    codes = quantize_8bit_with_qmap(scaled, moment.qmap).view(moment.codes.shape)
    moment.codes.copy_(torch.where(keep, moment.codes, codes))
    moment.scale.copy_(torch.where(keep, moment.scale, scale))


def _chunks(*tensors: Tensor) -> Iterator[tuple[Tensor, ...]]:
    """The tensors (a parameter, its gradient and moments, one shape), flattened, in slices of ``CHUNK`` values
    (one slice where it has fewer): views, so each update writes into the tensors themselves."""
    n = tensors[0].numel()
    if n <= CHUNK:
        yield tensors
        return
    flat = [t.view(-1) for t in tensors]
    for start in range(0, n, CHUNK):
        yield tuple(t[start : start + CHUNK] for t in flat)


def _dense(moment: Tensor) -> Tensor:
    """A moment in float32: an 8-bit one dequantized, a float32 one as it is."""
    return moment.dequantize() if isinstance(moment, OptimState8bit) else moment


def _zeros_8bit(p: Tensor, signed: bool) -> Tensor:
    zeros: Tensor = OptimState8bit.zeros(p.shape, signed, BLOCK, p.device, dtype=torch.float32)  # torchao: untyped
    return zeros


def quantized(p: Tensor) -> bool:
    """Whether ``p``'s moments are kept in 8 bits (else float32)."""
    return p.numel() >= SMALLEST and p.numel() % BLOCK == 0


class AdamW8bit(torch.optim.Optimizer):
    """AdamW with 8-bit blockwise moments; ``compiled`` (default: on CUDA) runs ``adamw_update`` compiled."""

    _step_supports_amp_scaling = True  # the GradScaler hands step() found_inf on the device, never reads it

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        compiled: bool | None = None,
    ) -> None:
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})
        self.compiled = compiled
        self._update: Callable[..., None] | None = None

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """The learning rate as a 0-d float32 tensor on the host: the schedule fills it in place (no
        recompilation, no read), the update reads it as a scalar."""
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        if not isinstance(group["lr"], Tensor):
            group["lr"] = torch.tensor(group["lr"], dtype=torch.float32)

    def _state(self, p: Tensor) -> dict[str, Tensor]:
        state: dict[str, Tensor] = self.state[p]
        if not state:
            state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
            for name, signed in (("exp_avg", True), ("exp_avg_sq", False)):
                state[name] = _zeros_8bit(p, signed) if quantized(p) else torch.zeros_like(p, dtype=torch.float32)
        return state

    def _function(self, device: torch.device) -> Callable[..., None]:
        compiled = device.type == "cuda" if self.compiled is None else self.compiled
        if not compiled:
            return adamw_update
        if self._update is None:
            self._update = torch.compile(adamw_update, fullgraph=True, dynamic=False)
        return self._update

    @overload
    def step(self, closure: None = None) -> None: ...
    @overload
    def step(self, closure: Callable[[], float]) -> float: ...
    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        """Every tensor's update, none read on the host; skipped on the device where the GradScaler found a
        gradient that is not finite (``found_inf``), unscaled on the device where it left the scale in."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        flags: dict[torch.device, tuple[Tensor, Tensor]] = {}  # (skip, 1 / scale) on each device, made once
        # one compiled graph per tensor shape (as torchao's): more shapes than dynamo's cache limit is expected
        with torch._dynamo.utils.disable_cache_limit():
            for group in self.param_groups:
                beta1, beta2 = group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self._state(p)
                    if p.device not in flags:
                        flags[p.device] = self._flags(p.device)
                    skip, inv = flags[p.device]
                    update = self._function(p.device)
                    for chunk in _chunks(p.detach(), p.grad, state["exp_avg"], state["exp_avg_sq"]):
                        update(
                            *chunk[:2],
                            state["step"],
                            *chunk[2:],
                            group["lr"],
                            beta1,
                            beta2,
                            group["weight_decay"],
                            group["eps"],
                            skip,
                            inv,
                        )
                    state["step"] += 1 - skip  # on the device, after the tensor's last chunk
        return loss

    def _flags(self, device: torch.device) -> tuple[Tensor, Tensor]:
        """(skip, 1 / scale) for the tensors on ``device``: the GradScaler's ``found_inf`` and the scale it left
        in the gradients (``grad_scale``: None once unscaled), attributes it sets around ``step`` (no flag, no
        scale: nothing skipped, nothing to unscale)."""
        found_inf, grad_scale = getattr(self, "found_inf", None), getattr(self, "grad_scale", None)
        skip = torch.zeros((), device=device) if found_inf is None else found_inf.to(device, torch.float32)
        inv = torch.ones((), device=device) if grad_scale is None else 1 / grad_scale.to(device, torch.float32)
        return skip, inv


def state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes the optimizer's per-parameter state holds (an 8-bit moment: its codes and block scales)."""
    total = 0
    for state in optimizer.state.values():
        for value in state.values():
            if isinstance(value, Tensor) and value.dim() > 0:
                names: list[str] = getattr(value, "__tensor_flatten__", lambda: ([], None))()[0]
                parts = [getattr(value, n) for n in names] if _subclass(value) else [value]
                total += sum(part.numel() * part.element_size() for part in parts)
    return total


def _subclass(value: Tensor) -> bool:
    return type(value) is not Tensor and hasattr(value, "__tensor_flatten__")
