"""8-bit AdamW (``--optimizer adamw8bit``): torchao's own ``AdamW8bit``, its update compiled on CUDA.

Both moments are kept in 8 bits, blockwise (256 values a block, each with a float32 scale: about 2.03 bytes a
trained parameter for the two, against AdamW's 8); tensors under 4096 values, or whose size is no multiple of
256, keep float32 moments, as torchao and bitsandbytes do. torchao compiles each tensor's update; off CUDA (only
the suite trains with it there: ``device.check_recipe`` refuses it elsewhere) cctk runs it uncompiled, since
compiling on a CPU needs a C++ compiler and took 60 s for the tests' 2-layer model.

Why torchao's, not the fork of its private update cctk kept until issue 55: the fork's compiled CUDA path had
never run, its 2M-value chunks made about 870 compiled calls a phi-1.5 step, and it followed torchao's private
code from release to release. The cost: the GradScaler reads ``found_inf`` on the host once a step (the one
synchronisation of a packed batch's step, docs/gpus.md). 500 steps on the CPU (tests/integration/
test_adamw8bit_500.py): cctk's and torchao's losses equal, both within a few percent of AdamW's.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import overload

import torch
from torch import Tensor
from torch.optim.optimizer import ParamsT
from torchao.optim import AdamW8bit as TorchaoAdamW8bit  # its import warnings are silenced in cctk/__init__.py

BLOCK = 256  # values per quantization block (torchao's and bitsandbytes' default)
SMALLEST = 4096  # tensors with fewer values keep float32 moments (torchao's rule)
# The compiled update's temporaries: a tensor's two new moments in float32 before they are quantized (a block's
# scale needs all its values), 8 bytes a value of the largest tensor; measured compiled on the CPU (8.0 bytes a
# value beside the optimizer's state, a tensor of 16M values), where uncompiled it takes 53.
TEMPORARY_BYTES = 8

# Compiling the update, torch's AOT autograd cache asks each tensor subclass for a hash of its own; torchao's
# moments (OptimState8bit) have none, so torch hashes them its default way (the cache still works) and warns once
# a process that torchao should add one: advice to torchao's authors, a line no user of cctk can act on.
NO_HASH = "OptimState8bit does not implement _stable_hash_for_caching"


class AdamW8bit(TorchaoAdamW8bit):  # type: ignore[misc]  # torchao ships no types: its class is Any to mypy
    """torchao's ``AdamW8bit`` with 256-value blocks; ``compiled`` (default: where the parameters are on CUDA)
    runs its update compiled, else as it is."""

    def __init__(
        self, params: ParamsT, lr: float = 1e-3, weight_decay: float = 1e-2, compiled: bool | None = None
    ) -> None:
        super().__init__(params, lr=lr, weight_decay=weight_decay, block_size=BLOCK)
        self.compiled = compiled

    @overload
    def step(self, closure: None = None) -> None: ...
    @overload
    def step(self, closure: Callable[[], float]) -> float: ...
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        """torchao's step; compiled where ``compiled`` says, else with ``torch.compile`` standing aside."""
        compiled = self.compiled if self.compiled is not None else self._on_cuda()
        with torch.compiler.set_stance("default" if compiled else "force_eager"), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=NO_HASH, category=UserWarning)
            loss: float | None = super().step(closure)
        return loss

    def _on_cuda(self) -> bool:
        return any(p.device.type == "cuda" for group in self.param_groups for p in group["params"])


def quantized(p: Tensor) -> bool:
    """Whether ``p``'s moments are kept in 8 bits (else float32), as torchao decides it."""
    return p.numel() >= SMALLEST and p.numel() % BLOCK == 0


def state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes the optimizer's per-parameter state holds (an 8-bit moment: its codes, block scales and code map)."""
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
