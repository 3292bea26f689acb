"""Counting the reads of a device that make the host wait for it (synchronisations), on any device.

On CUDA, CUDA's own count: ``torch.cuda.set_sync_debug_mode("warn")`` warns at every implicitly
synchronising call (a copy to the host, ``item``, ``nonzero``), and the warnings are counted, with every
explicit ``torch.cuda.synchronize()`` besides (bitsandbytes' 8-bit optimizers call it after each
parameter). On a CPU
nothing waits, so what is counted is what *would* wait on an accelerator, in the code an accelerator
would run: every aten operation that needs a tensor's value on the host, seen by a ``TorchDispatchMode``
(forward and backward passes alike), and ``tolist``/``numpy``, which read a CPU tensor's memory without
any operation. That makes the accelerator step's reads countable in the suite, on the CPU.
"""

from __future__ import annotations

import warnings
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# aten operations whose result's size or value the host needs: each is a synchronisation on CUDA
HOST_VALUE_OPS = frozenset(
    {
        "_local_scalar_dense",  # item(), float(), int(), bool() of a tensor
        "nonzero",
        "masked_select",
        "is_nonzero",
        "equal",
        "unique_dim",
        "_unique",
        "_unique2",
        "unique_consecutive",
    }
)
READ_METHODS = ("tolist", "numpy")


def _bool_index(func, args) -> bool:
    """``x[mask]`` (and ``x[mask] = v``): an index by a boolean tensor is a ``nonzero`` inside the kernel."""
    name = func.__name__.split(".")[0]
    if name not in ("index", "index_put", "index_put_", "_index_put_impl_"):
        return False
    indices = args[1] if len(args) > 1 else ()
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices or ())


def _repeat_without_size(func, kwargs) -> bool:
    return func.__name__.startswith("repeat_interleave") and kwargs.get("output_size") is None


class _HostValues(TorchDispatchMode):
    def __init__(self, counts: Counter):
        super().__init__()
        self.counts = counts

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.__name__.split(".")[0]
        if name in HOST_VALUE_OPS or _bool_index(func, args) or _repeat_without_size(func, kwargs):
            self.counts["boolean index" if name.startswith("index") else name] += 1
        return func(*args, **kwargs)


class SyncCounter:
    """``with SyncCounter(device) as syncs: ...``: ``syncs.total`` so far, ``syncs.ops`` by kind."""

    def __init__(self, device: torch.device):
        self.device, self.ops = torch.device(device), Counter()
        self._mode: _HostValues | None = None
        self._saved: dict = {}
        self._caught = None

    @property
    def total(self) -> int:
        if self.device.type == "cuda":
            warned = sum("synchroniz" in str(w.message) for w in self._caught or [])
            return warned - self.ops["warned inside synchronize"] + self.ops["synchronize"]
        return sum(self.ops.values())

    def __enter__(self) -> SyncCounter:
        if self.device.type == "cuda":
            self._catcher = warnings.catch_warnings(record=True)
            self._caught = self._catcher.__enter__()
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            self._saved["synchronize"] = real = torch.cuda.synchronize

            def synchronize(*args, **kwargs):  # counted once, whether or not the debug mode warns inside it
                before = len(self._caught)
                real(*args, **kwargs)
                self.ops["synchronize"] += 1
                self.ops["warned inside synchronize"] += sum(
                    "synchroniz" in str(w.message) for w in self._caught[before:]
                )

            torch.cuda.synchronize = synchronize
            return self
        for name in READ_METHODS:
            real = self._saved[name] = getattr(torch.Tensor, name)

            def counted(tensor, *args, _real=real, _name=name, **kwargs):
                self.ops[_name] += 1
                return _real(tensor, *args, **kwargs)

            setattr(torch.Tensor, name, counted)
        self._mode = _HostValues(self.ops).__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize = self._saved.pop("synchronize")
            torch.cuda.set_sync_debug_mode("default")
            self._catcher.__exit__(*exc)
            return
        self._mode.__exit__(*exc)
        for name, real in self._saved.items():
            setattr(torch.Tensor, name, real)
