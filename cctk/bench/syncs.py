"""Counting the reads of a device that make the host wait for it (synchronisations), on any device.

On CUDA, CUDA's own count: ``torch.cuda.set_sync_debug_mode("warn")`` warns at every implicitly
synchronising call (a copy to the host, ``item``, ``nonzero``), and the warnings are counted, with every
explicit ``torch.cuda.synchronize()`` besides (bitsandbytes' 8-bit optimizers call it after each
parameter). On a CPU
nothing waits, so what is counted is what *would* wait on an accelerator, in the code an accelerator
would run: every aten operation that needs a tensor's value on the host, seen by a ``TorchDispatchMode``
(forward and backward passes alike), ``tolist``/``numpy``, which read a CPU tensor's memory without
any operation, and the copies to the host, ``.cpu()`` and ``.to("cpu")`` (no operation either where the
tensor is on the CPU already); a value read from such a copy is not counted again. On a CPU run the model's
device is the host: code that moves a tensor to ``some_tensor.device`` (a ``torch.device``) is taken for a move
to the device and not counted; only the literal ``"cpu"`` names the host. That makes the accelerator step's
reads countable in the suite, on the CPU.
"""

from __future__ import annotations

import warnings
import weakref
from collections import Counter
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

if TYPE_CHECKING:
    from torch._ops import OpOverload

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
HOST = ("cpu", "cpu:0")  # the host, as code names it when it copies a tensor there


def _bool_index(func: OpOverload, args: tuple[Any, ...]) -> bool:
    """``x[mask]`` (and ``x[mask] = v``): an index by a boolean tensor is a ``nonzero`` inside the kernel."""
    name = func.__name__.split(".")[0]
    if name not in ("index", "index_put", "index_put_", "_index_put_impl_"):
        return False
    indices = args[1] if len(args) > 1 else ()
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices or ())


def _repeat_without_size(func: OpOverload, kwargs: dict[str, Any]) -> bool:
    return func.__name__.startswith("repeat_interleave") and kwargs.get("output_size") is None


def _to_host(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether ``tensor.to(*args, **kwargs)`` names the host: ``.to("cpu")``, ``.to(device="cpu")``."""
    target = kwargs.get("device", args[0] if args else None)
    return isinstance(target, str) and target in HOST


class _HostValues(TorchDispatchMode):
    def __init__(self, counts: Counter[str], copied: set[int]) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # torch leaves TorchDispatchMode.__init__ unannotated
        self.counts, self.copied = counts, copied

    def __torch_dispatch__(
        self,
        func: OpOverload,
        types: tuple[type, ...],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:  # an aten operation's arguments and result: tensors, numbers, lists, whatever it takes and gives
        kwargs = kwargs or {}
        name = func.__name__.split(".")[0]
        if name == "_local_scalar_dense" and args and id(args[0]) in self.copied:  # read from a counted copy
            return func(*args, **kwargs)
        if name in HOST_VALUE_OPS or _bool_index(func, args) or _repeat_without_size(func, kwargs):
            self.counts["boolean index" if name.startswith("index") else name] += 1
        return func(*args, **kwargs)


class SyncCounter:
    """``with SyncCounter(device) as syncs: ...``: ``syncs.total`` so far, ``syncs.ops`` by kind."""

    def __init__(self, device: torch.device) -> None:
        self.device = torch.device(device)
        self.ops: Counter[str] = Counter()
        self._copied: set[int] = set()  # ids of the copies to the host counted: reading them waits no more
        self._mode: _HostValues | None = None
        self._saved: dict[str, Callable[..., Any]] = {}  # what was replaced, put back on exit
        self._caught: list[warnings.WarningMessage] | None = None  # the warnings of a CUDA device's syncs

    @property
    def total(self) -> int:
        if self.device.type == "cuda":
            warned = sum("synchroniz" in str(w.message) for w in self._caught or [])
            return warned - self.ops["warned inside synchronize"] + self.ops["synchronize"]
        return sum(self.ops.values())

    def __enter__(self) -> SyncCounter:
        if self.device.type == "cuda":
            self._catcher = warnings.catch_warnings(record=True)
            self._caught = caught = self._catcher.__enter__()
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            self._saved["synchronize"] = real = torch.cuda.synchronize

            def synchronize(*args: Any, **kwargs: Any) -> None:  # counted once, whether or not it warns inside
                before = len(caught)
                real(*args, **kwargs)
                self.ops["synchronize"] += 1
                self.ops["warned inside synchronize"] += sum("synchroniz" in str(w.message) for w in caught[before:])

            torch.cuda.synchronize = synchronize
            return self
        for name in READ_METHODS:
            real = self._saved[name] = getattr(torch.Tensor, name)

            def counted(
                tensor: torch.Tensor, *args: Any, _real: Callable[..., Any] = real, _name: str = name, **kwargs: Any
            ) -> Any:  # tolist's list or number, numpy's array
                if id(tensor) not in self._copied:
                    self.ops[_name] += 1
                return _real(tensor, *args, **kwargs)

            setattr(torch.Tensor, name, counted)
        self._count_copies()
        self._mode = _HostValues(self.ops, self._copied).__enter__()  # type: ignore[no-untyped-call]  # torch's, unannotated
        return self

    def _count_copies(self) -> None:
        """``.cpu()`` and ``.to("cpu")`` counted as the copies to the host they are on an accelerator."""
        cpu = self._saved["cpu"] = torch.Tensor.cpu
        to = self._saved["to"] = torch.Tensor.to

        def counted_cpu(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            self.ops["cpu"] += 1
            return self._copy(cpu(tensor, *args, **kwargs), tensor)

        def counted_to(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            out = to(tensor, *args, **kwargs)
            if not _to_host(args, kwargs):
                return out
            self.ops["to cpu"] += 1
            return self._copy(out, tensor)

        for name, method in (("cpu", counted_cpu), ("to", counted_to)):
            setattr(torch.Tensor, name, method)

    def _copy(self, out: torch.Tensor, tensor: torch.Tensor) -> torch.Tensor:
        """``out``, a copy on the host, marked so that reading it is not counted again (on a CPU, where the
        tensor is its own copy, a view of it: the tensor itself stays unmarked)."""
        if out is tensor:
            out = out.view_as(out)
        self._copied.add(id(out))
        weakref.finalize(out, self._copied.discard, id(out))
        return out

    def __exit__(self, *exc: *tuple[type[BaseException] | None, BaseException | None, TracebackType | None]) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize = self._saved.pop("synchronize")
            torch.cuda.set_sync_debug_mode("default")
            self._catcher.__exit__(*exc)
            return
        if self._mode is not None:
            self._mode.__exit__(*exc)  # type: ignore[no-untyped-call]  # torch leaves TorchDispatchMode.__exit__ unannotated
        for name, real in self._saved.items():
            setattr(torch.Tensor, name, real)
