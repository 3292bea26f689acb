"""How launch-bound a training step is, on any device: the operations each step dispatches (on an
accelerator, a kernel launch each, or a few) and, on CUDA, the kernels the profiler saw and their own time
against the step's wall time.

Issue 55 estimated a 135M arm at the manual's batch at about 3,000 kernels a step for ~75 GFLOP: a step
that keeps the GPU busy a small share of its time is bound by the host launching kernels, and only then
would capturing it (CUDA graphs, ``torch.compile(mode="reduce-overhead")``) pay. These figures decide it.
The operations are counted by a ``TorchDispatchMode`` inside each step of the accelerator's step
(``finetune._DeviceGuard.step``: forward, backward, clipping and the optimizer; not the batch's assembly
on the host), in a run of their own, as the profiled run is one of its own: neither's overhead is in the
timed run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from unittest import mock

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..core.config import Recipe
from ..core.lm import finetune
from ..core.lm.corpus import Row
from ..core.lm.record import TrainRecord

if TYPE_CHECKING:
    from torch._ops import OpOverload
    from transformers import PreTrainedModel


@dataclass(frozen=True)
class Launches:
    """A step's figures, each the mean over the steps of one epoch."""

    steps: int
    operations: float  # aten operations dispatched a step (forward, backward, clipping, optimizer)
    seconds: float  # a step's wall time, neither counted nor profiled
    kernels: float | None = None  # CUDA kernels a step, as the profiler saw them (None off CUDA)
    kernel_seconds: float | None = None  # their own time on the device, summed

    @property
    def busy(self) -> float | None:
        """The share of a step's wall time the device spends in its kernels (None off CUDA)."""
        return None if self.kernel_seconds is None else self.kernel_seconds / self.seconds

    def line(self) -> str:
        said = f"{self.operations:.0f} operations and {self.seconds * 1000:.1f} ms a step over {self.steps} steps"
        if self.kernels is None or self.busy is None:
            return said
        if not self.kernels:  # CUDA ran them, but the profiler (CUPTI) did not see them
            return said + "; the profiler saw no CUDA kernel"
        return said + f"; {self.kernels:.0f} kernels a step, busy {self.busy:.0%} of it"


class _Operations(TorchDispatchMode):
    """Counts every aten operation dispatched while it is active."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # torch leaves TorchDispatchMode.__init__ unannotated
        self.count = 0

    def __torch_dispatch__(
        self,
        func: OpOverload,
        types: tuple[type, ...],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        self.count += 1
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def per_step(total: Callable[[], int]) -> Iterator[list[int]]:
    """How much ``total()`` grows inside each step of ``_DeviceGuard`` (forward, backward, clipping and
    the optimizer; not while a batch is built on the host, nor the epoch's own reads): a count a step."""
    steps: list[int] = []
    real_step = finetune._DeviceGuard.step

    def counted_step(guard: finetune._DeviceGuard, *args: Any, **kwargs: Any) -> torch.Tensor:
        before = total()
        loss = real_step(guard, *args, **kwargs)
        steps.append(total() - before)
        return loss

    with mock.patch.object(finetune._DeviceGuard, "step", counted_step):  # the real one back after
        yield steps


def step_launches(model: PreTrainedModel, rows: list[Row], recipe: Recipe, pad_id: int) -> Launches:
    """``model`` trained an epoch of ``rows`` four times with the accelerator's step (host checks off): a
    warm-up, a timed run, one counting its operations and, on CUDA, one under the profiler."""
    device = next(model.parameters()).device

    def epoch(name: str) -> TrainRecord:
        return finetune.fine_tune(model, rows, recipe, 1, pad_id, name, host_checks=False)

    epoch("warm-up")
    timed = epoch("timed")
    with _Operations() as operations, per_step(lambda: operations.count) as steps:
        epoch("counted")
    launches = Launches(timed.steps, sum(steps) / len(steps), timed.train_seconds / timed.steps)
    if device.type != "cuda":
        return launches
    kernels = _profiled(lambda: epoch("profiled"))
    return replace(launches, kernels=len(kernels) / timed.steps, kernel_seconds=sum(kernels) / timed.steps)


def _profiled(run: Callable[[], TrainRecord]) -> list[float]:
    """The seconds of each CUDA kernel ``run()`` launched (copies between host and device left out)."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
        run()
        torch.cuda.synchronize()
    return [
        event.device_time_total / 1e6
        for event in profiler.events()
        if event.device_type == DeviceType.CUDA and not event.name.startswith("Memcpy")
    ]
