"""``TrainRecord``: what one fine-tuning run did, as ``fine_tune`` returns it and a run's records
(``cctk.core.records``) and the session's training files keep it. Here, under the records, so that
``core/lm/`` never imports ``core/records.py``. Torch-free, as the records are."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

# A fine-tuning run's columns in a table of them, after its model's and its parent's (``TrainRecord.row``).
TRAINING_COLUMNS = (
    "examples",
    "steps",
    "seconds",
    "examples_per_second",
    "loss_first_epoch",
    "loss_last_epoch",
    "peak_gpu_memory_bytes",
    "peak_cpu_memory_bytes",
)
# The peak memory columns: integers where measured, empty where not (the GPU's on a CPU run), never a 0.
PEAK_COLUMNS = ("peak_gpu_memory_bytes", "peak_cpu_memory_bytes")


@dataclass(frozen=True)
class TrainRecord:
    """What one fine-tuning run did: its size, time, loss per epoch and peak memory (of the GPU it ran on,
    or of the process on a CPU)."""

    examples: int
    steps: int
    train_seconds: float
    losses: tuple[float, ...]  # mean loss of each epoch
    peak_gpu_memory_bytes: int = 0
    gflop_per_example: float = 0.0  # forward and backward, as cctk.core.lm.compute counts it (0: not recorded)
    peak_cpu_memory_bytes: int = 0  # peak resident memory of the process during the run (0: not on a CPU)
    skipped_steps: int | None = None  # fp16 on the device step: steps whose overflowed gradient was skipped
    peak_gpu_reserved_bytes: int = 0  # the GPU allocator's reserved peak, what runs out (0: not on CUDA, or before #55)

    @property
    def examples_per_second(self) -> float:
        seen = self.examples * len(self.losses)
        return seen / self.train_seconds if self.train_seconds else float("nan")

    def row(self) -> dict[str, int | float | None]:
        """Its cells in a table of fine-tuning runs (``TRAINING_COLUMNS``: a manual's table11, the run report's), after
        the model's and its parent's; a peak memory not measured there (the GPU's on a CPU) is None, an empty cell,
        not a 0 that would read as a measurement."""
        values = (
            self.examples,
            self.steps,
            self.train_seconds,
            self.examples_per_second,
            self.losses[0],
            self.losses[-1],
            self.peak_gpu_memory_bytes or None,
            self.peak_cpu_memory_bytes or None,
        )
        return dict(zip(TRAINING_COLUMNS, values, strict=True))

    def to_json(self) -> dict[str, Any]:
        data = {**asdict(self), "losses": list(self.losses), "examples_per_second": self.examples_per_second}
        if self.skipped_steps is None:  # not counted (every precision but fp16): the file as before
            del data["skipped_steps"]
        if not self.peak_gpu_reserved_bytes:  # not on CUDA, or written before #55: the file as before
            del data["peak_gpu_reserved_bytes"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrainRecord:
        skipped = data.get("skipped_steps")
        return cls(
            int(data["examples"]),
            int(data["steps"]),
            float(data["train_seconds"]),
            tuple(float(x) for x in data["losses"]),
            int(data.get("peak_gpu_memory_bytes") or 0),
            float(data.get("gflop_per_example") or 0.0),
            int(data.get("peak_cpu_memory_bytes") or 0),
            None if skipped is None else int(skipped),
            int(data.get("peak_gpu_reserved_bytes") or 0),  # absent from the records written before #55
        )

    @property
    def peak_bytes(self) -> int:
        """The peak memory of where it ran: the process's resident memory on a CPU, the GPU allocator's (its
        tensors') on CUDA; 0: measured on neither."""
        return self.peak_cpu_memory_bytes or self.peak_gpu_memory_bytes

    def peaks(self) -> dict[str, float]:
        """The peak memory metrics of where it ran, the process's on a CPU (``peak_cpu_memory_bytes``), the GPU
        allocator's on CUDA (``peak_gpu_memory_bytes``, its tensors', and ``peak_gpu_reserved_bytes``, what it
        reserved), never a 0 that would read as a measurement."""
        if self.peak_cpu_memory_bytes:
            return {"peak_cpu_memory_bytes": self.peak_cpu_memory_bytes}
        gpu = {
            "peak_gpu_memory_bytes": self.peak_gpu_memory_bytes,
            "peak_gpu_reserved_bytes": self.peak_gpu_reserved_bytes,
        }
        return {name: value for name, value in gpu.items() if value}

    def metrics(self) -> dict[str, float]:
        """The run's MLflow metrics (the loss per epoch is logged as a history apart, as each epoch ends): its
        size, time and rate, and its ``peaks``."""
        skipped = {} if self.skipped_steps is None else {"skipped_steps": self.skipped_steps}
        return {
            "train_seconds": self.train_seconds,
            "steps": self.steps,
            "examples_per_second": self.examples_per_second,
            **self.peaks(),
            **skipped,
        }


def training_table(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> pd.DataFrame:
    """A table of fine-tuning runs: each row's ``keys`` columns (its model's, its parent's), then
    ``TRAINING_COLUMNS`` (``TrainRecord.row``); the peaks as nullable integers, so a run that measured one and a
    run that did not sit in one column of integers and empty cells (a CSV's ``3156926464``, not ``3156926464.0``)."""
    return pd.DataFrame(rows, columns=[*keys, *TRAINING_COLUMNS]).astype(dict.fromkeys(PEAK_COLUMNS, "Int64"))
