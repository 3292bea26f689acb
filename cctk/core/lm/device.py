"""The device a command computes on, checked before any run exists, and the memory it has free.

``--device`` takes ``cpu``, ``cuda``, ``cuda:N`` or ``mps``; the default is CUDA where there is one, else
the CPU. Every command that loads a model resolves it here, so a device that is absent, a torch build
without CUDA or a recipe the device cannot run ends in one line before a folder or an MLflow run exists.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ..config import Recipe
from ..errors import CctkError, OutOfMemory
from .memory import Plan, Room, Shape, generation, measuring

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig

ModuleT = TypeVar("ModuleT", bound="torch.nn.Module")  # a model moved, handed back as itself

KINDS = ("cpu", "cuda", "mps")
DEVICE_HELP = "cpu, cuda, cuda:N or mps (default: cuda when available, else cpu); checked before any run exists."


def resolve(name: str | None = None) -> torch.device:
    """``name`` as a torch device that is here, or a one-line error saying what is and what to do."""
    import torch

    if not name:
        if torch.cuda.is_available():
            return torch.device("cuda")
        lost = unusable_gpu()
        if lost:  # never the CPU, and the CPU's recipe, in silence on a machine that has a GPU
            raise CctkError(lost)
        return torch.device("cpu")
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


# The NVIDIA driver a CUDA major version needs (CUDA's minor version compatibility), as make setup says it
# (scripts/install-torch.sh).
DRIVER_FOR_CUDA = {"13": "580", "12": "525", "11": "450"}
OLDER_CUDA_INDEX = "https://download.pytorch.org/whl/cu126"  # CUDA 12.6: drivers 525 and newer
NVIDIA_SMI_SECONDS = 15


def nvidia_smi(*args: str) -> str | None:
    """What ``nvidia-smi ARGS`` prints, or None where it is not on PATH, fails or hangs."""
    path = shutil.which("nvidia-smi")
    if path is None:
        return None
    try:
        done = subprocess.run([path, *args], capture_output=True, text=True, timeout=NVIDIA_SMI_SECONDS)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def unusable_gpu(smi: Callable[..., str | None] = nvidia_smi) -> str | None:
    """One line, with the way out, where this machine has an NVIDIA GPU (``nvidia-smi -L``) that this torch
    cannot use; None where torch uses it, where there is none, or where ``CUDA_VISIBLE_DEVICES`` hides every
    GPU on purpose (Ray does so for a task that asks for none)."""
    import torch

    if torch.cuda.is_available() or os.environ.get("CUDA_VISIBLE_DEVICES", "x").strip() in ("", "-1"):
        return None
    listed = [line for line in (smi("-L") or "").splitlines() if line.startswith("GPU ")]
    if not listed:
        return None
    gpu = listed[0].split(":", 1)[1].split("(UUID")[0].strip()
    driver = ((smi("--query-gpu=driver_version", "--format=csv,noheader") or "").strip().splitlines() or ["unknown"])[0]
    most = next(
        (line.split("CUDA Version:")[1].split()[0] for line in (smi() or "").splitlines() if "CUDA Version:" in line),
        "?",
    )
    found = f"this machine has an NVIDIA GPU ({gpu}, driver {driver}, CUDA {most} at most)"
    on_cpu = f"or pass {'-P device=cpu' if mlflow_env() else '--device cpu'} to compute on the CPU"
    if torch.version.cuda is None:
        return (
            f"{found} and this torch build ({torch.__version__}) has no CUDA: install a CUDA build "
            f"({_cuda_build(driver)}), {on_cpu}"
        )
    needs = DRIVER_FOR_CUDA.get(torch.version.cuda.split(".")[0])
    if needs and _older(driver, needs):
        return (
            f"{found} that torch {torch.__version__} (CUDA {torch.version.cuda}) cannot use: the build needs an "
            f"NVIDIA driver >= {needs}; update the driver, or install a build for an older CUDA "
            f"({_cuda_build(driver)}), {on_cpu}"
        )
    return (
        f"{found} that torch {torch.__version__} (CUDA {torch.version.cuda}) does not see: check "
        f"CUDA_VISIBLE_DEVICES ({os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}) and the driver (nvidia-smi), "
        f"{on_cpu}"
    )


def _cuda_build(driver: str) -> str:
    """How to install the CUDA build of this torch release that ``driver`` runs (PyPI's CUDA 13, or PyTorch's
    CUDA 12.6 build for older drivers), with make setup or pip; in an environment ``mlflow run`` built, which
    make setup never touches: the project's .venv through ``--env-manager local``, or pip into it."""
    import torch

    release = torch.__version__.split("+")[0]
    older = _older(driver, DRIVER_FOR_CUDA["13"])
    setup = f"rm -r .venv && make setup {f'TORCH_INDEX={OLDER_CUDA_INDEX}' if older else 'TORCH=cuda'}"
    pip = f"pip install torch=={release} {f'--index-url {OLDER_CUDA_INDEX}' if older else 'from PyPI'}"
    built = mlflow_env()
    if built is None:
        return f"{setup}; or {pip}"
    return (
        f"this is the environment `mlflow run` built from conda.yaml ({built}), which make setup does not "
        f"change: run `mlflow run . --env-manager local` in the project's .venv ({setup}), or install it into "
        f"this environment: {sys.executable} -m {pip}"
    )


# The environments `mlflow run` builds from conda.yaml are named so, with conda and with virtualenv or uv (its
# mlflow.utils.environment._get_mlflow_env_name: "mlflow-" and a sha1 of their contents; conda's may add a
# second hash of its root): the folder the interpreter runs in (sys.prefix). --env-manager local runs in the
# user's own environment, whatever its name, which the usual advice repairs.
MLFLOW_ENV = re.compile(r"mlflow-[0-9a-f]{40}(-[0-9a-f]+)?")


def mlflow_env(prefix: str | None = None) -> str | None:
    """The folder of the environment ``mlflow run`` built that this interpreter runs in (``prefix``: sys.prefix
    unless told), or None where it runs in another."""
    folder = Path(sys.prefix if prefix is None else prefix)
    return str(folder) if MLFLOW_ENV.fullmatch(folder.name) else None


def _older(driver: str, needed: str) -> bool:
    """Whether driver version ``driver`` (``535.183.01``) is older than major ``needed``; False where unreadable."""
    try:
        return int(driver.split(".")[0]) < int(needed)
    except ValueError:
        return False


def auto_on_cpu(profile: str, device: str | None) -> str:
    """Why the ``auto`` profile took ``profile``, the CPU's recipe, not the manual's ``paper``: the device asked
    for, or no CUDA device on this machine (a GPU that torch cannot use never gets here: ``resolve`` ends in
    ``unusable_gpu``'s line). Said in the run's first lines and its tag ``cctk.auto_profile``."""
    why = f"--device {device}" if device else "no CUDA device on this machine"
    return f"{profile}, the CPU's recipe ({why}); --profile paper runs the manual's recipe here"


DEVICE_STEP = "CCTK_DEVICE_STEP"
# Where --optimizer adamw8bit runs: CUDA, torchao's update compiled. On this project's CPU, uncompiled, it
# took 0.4 us a value (6.3 s a step for a tensor of 16M values; smollm2-135m's AdamW step is 0.2 s), and
# compiled 45 ns a value after 10 s of compiling each tensor shape: the suite runs it on the CPU uncompiled
# (tests/core/lm/test_adamw8bit.py), a user should not.
EIGHT_BIT_DEVICES = ("cuda",)


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
        if device.type not in EIGHT_BIT_DEVICES:
            raise CctkError(
                f"--optimizer adamw8bit runs on CUDA devices (its update compiled), not on {device}, where it "
                "would take seconds a step; use --optimizer adamw"
            )
        if importlib.util.find_spec("torchao") is None:
            raise CctkError("--optimizer adamw8bit keeps its moments in torchao's 8-bit tensors: pip install torchao")


def room(device: torch.device) -> Room:
    """What ``device`` and the host have free now; on CUDA for this process: what the driver reports free and
    what its own allocator caches unused (``_cached``)."""
    import psutil
    import torch

    from . import compute

    host = int(psutil.virtual_memory().available)
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        allocated = int(torch.cuda.memory_allocated(device))
        share = gpu_share()
        return Room(
            # a share of a GPU (a sweep's cell): only that share is the run's, less what its tensors hold
            min(int(free) + _cached(device, allocated), int(total * share) - allocated),
            host,
            "cuda",
            f"{device} ({torch.cuda.get_device_name(device)}{f', {share:g} of it' if share < 1 else ''})",
            bf16=compute.bf16_missing(str(device)) is None,
        )
    if device.type == "mps":  # unified memory: the host's is the device's
        return Room(host, host, "mps", "mps")
    return Room(host, host, "cpu", "cpu", bf16=compute.bf16_missing("cpu") is None)


def _cached(device: torch.device, allocated: int) -> int:
    """What this process's caching allocator holds on ``device`` and no tensor uses: free for this process.

    ``mem_get_info`` reports it taken, so the next arm's check would refuse a job that fits (phi-1.5 with
    8-bit AdamW on a 24 GB card at its second arm, #55). Counted rather than handed back with ``empty_cache()``
    (which waits for the device, gives the blocks to any process and costs the next arm its ``cudaMalloc``
    calls): the allocator frees its cached blocks and retries before it runs out, so they are as good as free."""
    import torch

    return max(int(torch.cuda.memory_reserved(device)) - allocated, 0)


def check_placed(plan: Plan, device: torch.device) -> None:
    """Once the model is on a CUDA ``device``: the rest of the job against what is free there now (``_cached``
    counted free), less the margin; an ``OutOfMemory`` line (the run ends FAILED) rather than the allocator's
    error midway."""
    if device.type != "cuda":
        return
    short = plan.placed_shortfall(room(device).device)
    if short:
        raise OutOfMemory(short)


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
def out_of_memory_as_line(plan: Plan, device: torch.device | str, where: str) -> Iterator[None]:
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


def on_device(model: ModuleT, device: torch.device | str) -> ModuleT:
    """``model`` moved to ``device`` in place, as ``Module.to`` moves a module, and handed back as itself (called
    through its Module type: transformers wraps its override of ``to`` in ``functools.wraps``, which mypy reads
    as a callable taking ``self`` again)."""
    module: torch.nn.Module = model
    module.to(device)
    return model


@contextmanager
def placed(model: ModuleT, plan: Plan, device: torch.device, where: str) -> Iterator[ModuleT]:
    """``model`` on ``device`` for the block, checked there against ``plan`` (``check_placed``); an out-of-memory
    error while it moves or inside the block is one line naming ``where`` (``out_of_memory_as_line``)."""
    with out_of_memory_as_line(plan, device, where):
        moved = on_device(model, device)
        check_placed(plan, device)
        yield moved


def measurement_plan(model: str, config: PretrainedConfig, device: torch.device) -> Plan:
    """The plan of measuring the untouched ``model`` (its ``config``) on ``device`` (``memory.measuring``), checked: a
    model too large for the device or the host ends in one line, before it is loaded."""
    plan = measuring(model, Shape.of_config(config), room(device))
    plan.check()
    return plan


def generation_plan(model: str, config: PretrainedConfig, device: torch.device, reply: int, dtype: str) -> Plan:
    """The plan of ``model`` (its ``config``) generating replies of up to ``reply`` tokens on ``device``, its
    weights in ``dtype`` (``memory.generation``: a local teacher or oracle), checked as ``measurement_plan``."""
    from .models import eager_attention

    plan = generation(model, Shape.of_config(config), room(device), reply, dtype, eager_attention(config))
    plan.check()
    return plan


def check_dtype(dtype: str, device: torch.device) -> None:
    """A generating model's ``--dtype`` on ``device``, in one line before it loads: bfloat16 where the device has
    bf16 arithmetic (as ``--precision bf16``), float16 on CUDA alone."""
    from .compute import bf16_missing

    if dtype == "float16" and device.type != "cuda":
        raise CctkError(f"--dtype float16 is for CUDA devices, not {device}; use --dtype bfloat16 or float32")
    missing = bf16_missing(str(device)) if dtype == "bfloat16" else None
    if missing:
        raise CctkError(f"--dtype bfloat16 needs native bf16 arithmetic: {missing}; use --dtype float32")
