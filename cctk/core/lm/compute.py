"""What training costs in arithmetic, and what this machine can do with it.

The compute limit of a training run is its FLOPs over the peak matrix-product rate of the device it
runs on, both measured here: an example costs 6 x the transformer blocks' weights x its tokens
(forward and backward) plus 6 x the LM head's weights x its supervised tokens; the peak is the rate of
repeated large GEMMs. Machines differ twofold and more, so a run's time means something only as a
ratio to the limit measured on the same machine.

bf16 is native where the device has bf16 arithmetic: a CUDA device of compute capability 8.0 or more,
a CPU with AVX512_BF16 or AMX-BF16 (x86) or the BF16 extension (ARM). Elsewhere bf16 is emulated and
slower than float32, so ``--precision bf16`` is refused there before any work.
"""

from __future__ import annotations

import math
import os
import platform
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ..errors import CctkError
from .record import TrainRecord

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from .corpus import Row

GEMM_SIZE = 2048  # a large square product: the rate the matrix units reach, not a small kernel's
PINNED = "CCTK_GEMM_PEAK_GFLOPS"  # the environment's GEMM peak in GFLOP/s: given, not measured
X86_BF16 = ("avx512_bf16", "amx_bf16")


def example_flops(model: PreTrainedModel, rows: Sequence[Row], trains_weights: bool = True) -> float:
    """Mean FLOPs of one training example: forward + backward (3 x 2 x weights x tokens) through the
    transformer blocks at every position, through the LM head at the answer positions only. ``trains_weights``:
    False where the weights are frozen (LoRA): the backward pass computes no weight gradients, 2 x 2 x; the
    adapters' own (a few percent at the budgets KR-Test trains) are left out, so the limit stays a lower bound."""
    head: torch.Tensor = model.get_output_embeddings().weight
    body = sum(
        m.weight.numel() for name, m in model.named_modules() if isinstance(m, torch.nn.Linear) and m.weight is not head
    )
    tokens = sum(len(ids) for ids, _ in rows) / len(rows)
    answers = sum(sum(1 for x in labels if x != -100) for _, labels in rows) / len(rows)
    passes = 6 if trains_weights else 4
    return passes * body * tokens + passes * head.numel() * answers


def peak_flops(
    dtype: torch.dtype = torch.float32, device: str = "cpu", size: int = GEMM_SIZE, seconds: float = 1.5
) -> float:
    """The matrix-product rate this device reaches in ``dtype``: repeated ``size``-cube GEMMs for ``seconds``,
    read as ``best_rate`` reads them (a warm-up, then the fastest of a few windows)."""
    where = torch.device(device)
    a, b = (torch.randn(size, size, dtype=dtype, device=where) for _ in range(2))
    _sync(where, a @ b)  # the first product allocates and starts the thread pool or the kernel's plan
    done = a

    def product() -> None:
        nonlocal done
        done = a @ b

    return best_rate(product, lambda: _sync(where, done), 2 * size**3, seconds)


WARM_UP = 1 / 3  # the share of a peak's seconds spent before its first timed window
WINDOWS = 4  # the timed windows that share the rest


def best_rate(
    product: Callable[[], None],
    sync: Callable[[], None],
    flop: float,
    seconds: float,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """FLOP/s of ``product`` (``flop`` each) at its fastest: ``product`` repeated for ``WARM_UP`` of ``seconds``
    untimed, then ``WINDOWS`` windows share the rest, each ended by ``sync`` (the device done) and timed whole; the
    fastest window's rate. A machine is slow to reach its peak (a CPU's clock and thread pool ramp up over the
    first products after an idle spell; a shared host's neighbours come and go), and one average over the whole
    time reads the ramp and the dips with it: on two shared cores the first four 2048-cube products after an idle
    spell ran at 128-133 GFLOP/s, the next at 173-183 (2026-12-07). A peak read low makes the limit too long and
    the run's ratio too kind."""
    start = clock()
    while clock() - start < WARM_UP * seconds:
        product()
    sync()
    window = (1 - WARM_UP) * seconds / WINDOWS
    rates = []
    for _ in range(WINDOWS):
        count, begun = 0, clock()
        while clock() - begun < window:
            product()
            count += 1
        sync()
        rates.append(flop * count / (clock() - begun))
    return max(rates)


def _sync(device: torch.device, tensor: torch.Tensor) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    else:
        tensor.sum().item()


def cpu_flags() -> set[str]:
    """The CPU's feature flags (Linux ``/proc/cpuinfo``); empty where they cannot be read."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def bf16_missing(device: str = "cpu", flags: set[str] | None = None) -> str | None:
    """None where ``device`` computes in bf16 natively, else what it has instead (one phrase)."""
    where = torch.device(device)
    if where.type == "cuda":
        major, minor = torch.cuda.get_device_capability(where)
        if major >= 8:
            return None
        return f"{torch.cuda.get_device_name(where)} (compute capability {major}.{minor}) has no bf16 arithmetic"
    if where.type != "cpu":
        return f"{where.type} devices are not checked for bf16 arithmetic"
    flags = cpu_flags() if flags is None else flags
    if flags & {*X86_BF16, "bf16"}:
        return None
    machine = platform.machine()
    wanted = "AVX512_BF16 or AMX-BF16" if machine in ("x86_64", "AMD64") else "the BF16 extension"
    return f"this CPU ({machine}) lacks {wanted}: bf16 would be emulated, slower than float32"


def check_precision(precision: str, device: str = "cpu", flags: set[str] | None = None) -> None:
    """Refuse ``--precision bf16`` on a device without bf16 arithmetic, and ``fp16`` (autocast with a
    gradient scaler, for CUDA devices without bf16) off CUDA, in one line, before any work."""
    if precision == "fp16" and torch.device(device).type != "cuda":
        raise CctkError(
            f"--precision fp16 is for CUDA devices (those without bf16, such as the T4), not {device}; "
            "use --precision float32"
        )
    if precision != "bf16":
        return
    missing = bf16_missing(device, flags)
    if missing:
        raise CctkError(f"--precision bf16 needs native bf16 arithmetic: {missing}; use --precision float32")


@dataclass(frozen=True)
class Cost:
    """The compute limit of a run's training: its FLOPs over the device's peak rate, measured here."""

    examples: int  # training examples over all runs and epochs
    gflop: float  # their FLOPs, in GFLOP
    peak_gflops: float  # GEMM rate of the device, measured when the cost was taken (or pinned by CCTK_GEMM_PEAK_GFLOPS)
    precision: str = "float32"
    pinned: bool = False  # the peak came from CCTK_GEMM_PEAK_GFLOPS, not a measurement

    @property
    def gflop_per_example(self) -> float:
        return self.gflop / self.examples if self.examples else float("nan")

    @property
    def limit_seconds(self) -> float:
        return self.gflop / self.peak_gflops

    def metrics(self, seconds: float) -> dict[str, float]:
        return {
            "training_examples": self.examples,
            "gflop_per_example": self.gflop_per_example,
            "gemm_peak_gflops": self.peak_gflops,
            "gemm_peak_pinned": float(self.pinned),
            "compute_limit_seconds": self.limit_seconds,
            "limit_ratio": seconds / self.limit_seconds,
        }

    def line(self, seconds: float) -> str:
        ratio = seconds / self.limit_seconds
        peak = (
            f"the GEMM peak pinned by {PINNED}"
            if self.pinned
            else "this machine's GEMM peak, the higher of the run's start and end"
        )
        return (
            f"{ratio:.2f}x the {self.precision} compute limit of its training "
            f"({self.limit_seconds / 60:.1f} min: {self.examples:,} examples x {self.gflop_per_example:.2f} "
            f"GFLOP at {self.peak_gflops:.0f} GFLOP/s, {peak})" + (BUSY if ratio < 1 and not self.pinned else "")
        )


BUSY = (
    "; below 1 cannot be: other work shared the machine when its peak was measured, so this ratio says nothing of speed"
)


def pinned_peak() -> float | None:
    """The GEMM peak ``CCTK_GEMM_PEAK_GFLOPS`` gives, in GFLOP/s, or None where it is unset (measured then).
    Pinning holds runs on a shared or busy machine to one limit, and spares a process that starts many short
    runs (a test suite, a sweep's cells) 1.5 s of GEMMs at each run's start and end. A value that is not a
    positive number of GFLOP/s is refused in one line."""
    text = os.environ.get(PINNED, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise CctkError(f"{PINNED}={text!r}: give the device's GEMM peak as a positive number of GFLOP/s, or unset it")
    return value


def peak_gflops(device: str = "cpu", precision: str = "float32") -> float:
    """The GEMM peak of ``device`` in the arithmetic of ``precision``, in GFLOP/s: ``CCTK_GEMM_PEAK_GFLOPS``
    where it is set (``pinned_peak``), else measured (``peak_flops``)."""
    pinned = pinned_peak()
    if pinned is not None:
        return pinned
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
    return peak_flops(dtype, device) / 1e9


# The arms' training time over its compute limit, where it was timed, and where: the 13 arms of the quick pipeline
# of the bundled model on two CPU cores took 17.6 min against a limit of 15.6 at the GEMM peak read as the fastest
# window (`python -m cctk.bench pipeline --seed 11`, 2026-12-07, docs/speed.md; 1.07x on 2026-12-01 against the
# peak read as one average, which read the CPU's ramp-up with it). None on a GPU yet (issue 55).
TRAINING_RATIO = {"cpu": (1.13, "the quick pipeline's arms took on two CPU cores")}
# What a pipeline writes after its last arm, and its logging, on two CPU cores (2026-12-06): the tables and reports
# alone 6.1 s (a smoke run under --no-figures), and the figures about 5 s more for manual 2.0.0's 13 arms (10.5 s
# of the quick pipeline's, 11.0 to 12.0 of the smoke's): the figures follow the models trained, so a run of fewer
# arms draws fewer (--parts A, 2 arms: 5.9 s; manual 1.0.0, 1 arm: 6.5 s; this sum says 6.8 and 6.4).
TABLES_SECONDS = 6.0
FIGURE_SECONDS_PER_MODEL = 5.0 / 13


@dataclass(frozen=True)
class Rest:
    """A run's time besides training, as far as it is known before its first arm trains: the seconds so far
    (start-up, the GEMM peak, the model's load, the base model's measurement) and the measurement and logging
    of each of the ``models`` trained after it (``per_model``: as long as the base model's took), and under
    ``--curves`` each arm measured after each epoch (``curve_points``, each ``per_point``)."""

    elapsed: float
    models: int
    per_model: float
    curve_points: int = 0  # ``--curves``: the measurements of every arm after every epoch
    per_point: float = 0.0  # each as long as the base model's measurement alone took
    figures: bool = True  # False under ``--no-figures``: the tables and reports alone at the end

    @property
    def reports(self) -> tuple[float, str]:
        """The seconds after the last arm, and what they are: the tables and reports, and each trained model's
        share of the figures where they are drawn."""
        if not self.figures:
            return TABLES_SECONDS, "tables and reports"
        return TABLES_SECONDS + FIGURE_SECONDS_PER_MODEL * self.models, "figures and reports"


def planned_cost(arms: Sequence[tuple[int, float]], peak_gflops: float, precision: str = "float32") -> Cost:
    """The compute limit of a training not run yet: each arm's (examples over its epochs, GFLOP an example),
    at the device's GEMM peak ``peak_gflops`` (pinned where ``CCTK_GEMM_PEAK_GFLOPS`` says so)."""
    examples = sum(n for n, _ in arms)
    gflop = sum(n * per_example for n, per_example in arms)
    return Cost(examples, gflop, peak_gflops, precision, pinned=pinned_peak() is not None)


def forecast(cost: Cost, device_type: str, rest: Rest) -> tuple[str, dict[str, float]]:
    """The line a run prints before its first arm trains, and its metrics: the training's compute limit and,
    where its arms' time over that limit was timed on such a device (``TRAINING_RATIO``), the whole run's: the
    seconds so far, the training at that ratio, each trained model measured as long as the base model took, and
    the reports (``Rest.reports``); elsewhere no guess."""
    limit = cost.limit_seconds
    peak = "the GEMM peak pinned" if cost.pinned else "this machine's GEMM peak at the start"
    line = (
        f"estimated: the training's {cost.precision} compute limit is {limit / 60:.1f} min ({cost.examples:,} "
        f"examples x {cost.gflop_per_example:.2f} GFLOP at {cost.peak_gflops:,.0f} GFLOP/s, {peak}); "
    )
    metrics = {"estimated_limit_seconds": limit}
    measuring = rest.models * rest.per_model + rest.curve_points * rest.per_point
    models = f"{rest.models} model{'s' * (rest.models != 1)}"
    after = f"{models} measured at {rest.per_model:.1f} s{' each' * (rest.models != 1)}, as the base model took"
    if rest.curve_points:
        after += (
            f"; {rest.curve_points} learning-curve measurement{'s' * (rest.curve_points != 1)} (every arm after "
            f"every epoch) at {rest.per_point:.1f} s each, as the base model's measurement alone took"
        )
    if device_type not in TRAINING_RATIO:
        return line + (
            f"no training has been timed against its limit on a {device_type} device yet: expect more than the "
            f"limit, then {after}, and the reports"
        ), metrics
    ratio, where = TRAINING_RATIO[device_type]
    reports, written = rest.reports
    whole = rest.elapsed + ratio * limit + measuring + reports
    metrics["estimated_seconds"] = whole
    return line + (
        f"the whole run about {whole / 60:.1f} min ({rest.elapsed:.0f} s so far; the training {ratio:.2f}x its "
        f"limit, as {where}; {after}; {reports:.0f} s of {written})"
    ), metrics


def training_cost(
    records: Collection[TrainRecord], device: str = "cpu", precision: str = "float32", earlier: float | None = None
) -> Cost:
    """The cost of the fine-tuning runs ``records`` (TrainRecords) at the device's GEMM peak: measured now
    and, given ``earlier`` (GFLOP/s, e.g. at the run's start), the higher of the two: a machine that was
    busier at one of the two moments does not lower the limit the run is held to."""
    examples = sum(r.examples * len(r.losses) for r in records)
    gflop = sum(r.examples * len(r.losses) * r.gflop_per_example for r in records)
    pinned = pinned_peak()
    peak = pinned if pinned is not None else max(peak_gflops(device, precision), earlier or 0.0)
    return Cost(examples, gflop, peak, precision, pinned=pinned is not None)
