"""The device a command computes on, checked before any run exists, and the memory it has free.

``--device`` takes ``cpu``, ``cuda``, ``cuda:N`` or ``mps``; the default is CUDA where there is one, else
the CPU. Every command that loads a model resolves it here, so a device that is absent, a torch build
without CUDA or a recipe the device cannot run ends in one line before a folder or an MLflow run exists.
"""

from __future__ import annotations

import importlib.util
import os
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ..config import Recipe
from ..errors import CctkError, OutOfMemory
from .memory import Plan, Room

if TYPE_CHECKING:
    import torch

KINDS = ("cpu", "cuda", "mps")
DEVICE_HELP = "cpu, cuda, cuda:N or mps (default: cuda when available, else cpu); checked before any run exists."


def resolve(name: str | None = None) -> torch.device:
    """``name`` as a torch device that is here, or a one-line error saying what is and what to do."""
    import torch

    if not name:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        device = None
    if device is None or device.type not in KINDS:
        raise CctkError(f"--device {name!r} is not a device cctk runs on: choose cpu, cuda, cuda:N or mps")
    if device.type == "cuda":
        _check_cuda(name, device)
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise CctkError("--device mps: this machine or torch build has no MPS device; use --device cpu")
    return device


def _check_cuda(name: str, device: torch.device) -> None:
    import torch

    if torch.version.cuda is None:
        raise CctkError(
            f"--device {name}: this torch build ({torch.__version__}) has no CUDA; install the CUDA "
            "build (`make setup TORCH=cuda`) or use --device cpu"
        )
    count = torch.cuda.device_count()
    if count == 0:
        raise CctkError(f"--device {name}: no CUDA device is visible (CUDA_VISIBLE_DEVICES, driver); use --device cpu")
    if device.index is not None and device.index >= count:
        raise CctkError(f"--device {name}: there are {count} CUDA devices (cuda:0..cuda:{count - 1})")


DEVICE_STEP = "CCTK_DEVICE_STEP"


def device_step(device: torch.device) -> bool:
    """Whether training on ``device`` takes the accelerator's step (``cctk.core.lm.finetune``: nothing read on the
    host until an epoch ends): on every device but the CPU, and on the CPU too where ``CCTK_DEVICE_STEP=1``,
    so that the suite runs, on the CPU, the step only GPUs take otherwise."""
    value = os.environ.get(DEVICE_STEP, "").strip()
    if value not in ("", "0", "1"):
        raise CctkError(
            f"{DEVICE_STEP}={value!r}: set it to 1 (every training takes the accelerator's step, "
            "the CPU too) or 0 (the CPU takes the host-checked step)"
        )
    return device.type != "cpu" or value == "1"


def check_recipe(recipe: Recipe, device: torch.device) -> None:
    """The recipe's precision and optimizer on this device, in one line where it cannot run them (and a
    ``CCTK_DEVICE_STEP`` that is neither 0 nor 1)."""
    from . import compute

    device_step(device)
    compute.check_precision(recipe.precision, str(device))
    if recipe.optimizer == "adamw8bit":
        if device.type != "cuda":
            raise CctkError(
                f"--optimizer adamw8bit runs on CUDA devices only (bitsandbytes), not on {device}; "
                "use --optimizer adamw"
            )
        if importlib.util.find_spec("bitsandbytes") is None:
            raise CctkError("--optimizer adamw8bit needs bitsandbytes: pip install bitsandbytes (CUDA machines)")


def room(device: torch.device) -> Room:
    """What ``device`` and the host have free now."""
    import psutil
    import torch

    from . import compute

    host = int(psutil.virtual_memory().available)
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        share = gpu_share()
        return Room(
            min(int(free), int(total * share)),  # a share of a GPU (a sweep's cell): only that share is the run's
            host,
            "cuda",
            f"{device} ({torch.cuda.get_device_name(device)}{f', {share:g} of it' if share < 1 else ''})",
            bf16=compute.bf16_missing(str(device)) is None,
            bitsandbytes=importlib.util.find_spec("bitsandbytes") is not None,
        )
    if device.type == "mps":  # unified memory: the host's is the device's
        return Room(host, host, "mps", "mps")
    return Room(host, host, "cpu", "cpu", bf16=compute.bf16_missing("cpu") is None)


GPU_SHARE = "CCTK_GPU_SHARE"


def gpu_share() -> float:
    """The share of its GPU this process may use: 1, or what ``CCTK_GPU_SHARE`` says (a sweep's Ray task given
    a fraction of a GPU sets it: ``--gpus-per-cell 0.5``)."""
    value = os.environ.get(GPU_SHARE, "").strip()
    try:
        share = float(value) if value else 1.0
    except ValueError:
        share = 0.0
    if not 0 < share <= 1:
        raise CctkError(f"{GPU_SHARE}={value!r}: the share of a GPU this run may use, above 0 and at most 1")
    return share


@contextmanager
def out_of_memory_as_line(plan: Plan, device, where: str):
    """An out-of-memory error inside the block as one line (``OutOfMemory``): where, the allocator's words,
    the estimate it was checked against and what fits, never the allocator's traceback."""
    import torch

    try:
        yield
    except (torch.OutOfMemoryError, MemoryError, RuntimeError) as error:
        if (
            isinstance(error, RuntimeError)
            and not isinstance(error, torch.OutOfMemoryError)
            and "can't allocate memory" not in str(error)
        ):
            raise
        raise OutOfMemory(plan.out_of_memory(str(device), where, error)) from None
