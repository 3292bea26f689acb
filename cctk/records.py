"""Typed records that cross module boundaries: a fine-tuning run, the facts of a pipeline run.

Torch-free and MLflow-free. ``asdict`` (and the JSON conversions below) happen only at the edges,
where a record is written to ``run_info.json``, a training file or MLflow.
"""
from __future__ import annotations

import os
import platform
import sys
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

from .config import Config


@dataclass(frozen=True)
class TrainRecord:
    """What one fine-tuning run did: its size, time, loss per epoch and peak GPU memory."""

    examples: int
    steps: int
    train_seconds: float
    losses: tuple[float, ...]  # mean loss of each epoch
    peak_gpu_memory_bytes: int = 0
    gflop_per_example: float = 0.0  # forward and backward, as cctk.compute counts it (0: not recorded)

    @property
    def examples_per_second(self) -> float:
        seen = self.examples * len(self.losses)
        return seen / self.train_seconds if self.train_seconds else float("nan")

    def to_json(self) -> dict:
        return {**asdict(self), "losses": list(self.losses), "examples_per_second": self.examples_per_second}

    @classmethod
    def from_json(cls, data: dict) -> TrainRecord:
        return cls(int(data["examples"]), int(data["steps"]), float(data["train_seconds"]),
                   tuple(float(x) for x in data["losses"]), int(data.get("peak_gpu_memory_bytes") or 0),
                   float(data.get("gflop_per_example") or 0.0))

    def metrics(self) -> dict[str, float]:
        """The run's MLflow metrics (the loss per epoch is logged as a history apart)."""
        return {"train_seconds": self.train_seconds, "steps": self.steps,
                "examples_per_second": self.examples_per_second,
                "peak_gpu_memory_bytes": self.peak_gpu_memory_bytes}


@dataclass(frozen=True)
class RunFacts:
    """Where and how a pipeline ran: its session, MLflow ids, device, time, machine and software."""

    session: str
    tracking_uri: str | None = None
    experiment_id: str | None = None
    run_id: str | None = None
    device: str = ""
    seconds: float | None = None
    hardware: dict = field(default_factory=dict)
    software: dict = field(default_factory=dict)

    def mlflow(self) -> dict:
        return {"tracking_uri": self.tracking_uri, "experiment_id": self.experiment_id, "run_id": self.run_id}


@dataclass(frozen=True)
class RunRecord:
    """A pipeline run as a whole: its configuration, its facts and the record of every arm."""

    config: Config
    facts: RunFacts
    training: dict[str, TrainRecord] = field(default_factory=dict)


def hardware() -> dict:
    """Processor, cores, memory and, when CUDA is available, the GPU (name, memory)."""
    info = {"processor": _processor(), "machine": platform.machine(), "system": platform.platform(),
            "cores_logical": os.cpu_count(), "cores_available": len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity") else os.cpu_count(), "memory_bytes": _memory()}
    torch = sys.modules.get("torch")  # only asked when the run itself loaded torch
    if torch is not None and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update({"gpu": props.name, "gpu_memory_bytes": int(props.total_memory),
                     "gpu_count": torch.cuda.device_count()})
    else:
        info.update({"gpu": None, "gpu_memory_bytes": None, "gpu_count": 0})
    return info


def software() -> dict:
    from . import __version__

    versions = {"python": platform.python_version(), "cctk": __version__}
    for package in ("torch", "transformers", "mlflow", "pandas", "numpy", "scipy", "matplotlib"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    torch = sys.modules.get("torch")
    versions["cuda"] = getattr(getattr(torch, "version", None), "cuda", None) if torch else None
    return versions


def _processor() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None
