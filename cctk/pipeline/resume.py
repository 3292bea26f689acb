"""What an interrupted pipeline already finished, read back from its MLflow runs and session folder.

A model counts as finished when its nested run is FINISHED and its files are there: its measurement
and its training record, on disk or, where the session folder is not (a sweep's cell resumed on another
machine than the one that was lost), from its MLflow run. The weights of a finished parent of unfinished
arms are checkpointed to disk; where the checkpoint is gone with its machine, the parent is trained
again (``cctk.pipeline.stages``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

import pandas as pd
import torch

from ..core.errors import CctkError
from ..core.lm.record import TrainRecord
from ..store import session
from ..store.session import Layout
from ..store.tracking import Store, TrackedRun

M = TypeVar("M", bound=torch.nn.Module)  # the model a checkpoint is loaded into, handed back as itself


@dataclass
class Done:
    """The finished part of a pipeline: by model key."""

    run_ids: dict[str, str] = field(default_factory=dict)
    measurements: dict[str, pd.DataFrame] = field(default_factory=dict)
    training: dict[str, TrainRecord] = field(default_factory=dict)


def finished(store: Store, parent: TrackedRun, layout: Layout) -> Done:
    """Read back every finished model of a pipeline; stale RUNNING children are marked KILLED."""
    done = Done()
    for key, run_id in store.finished_children(parent).items():
        _fetch(store, run_id, layout, key)
        measurement, record = layout.measurement(key), session.read_training(layout, key)
        if not measurement.is_file() or (key != "base" and record is None):
            continue  # finished in MLflow but its files are gone: measure it again
        try:
            table = session.read_measurement(measurement)  # floats exactly as measured
        except CctkError:  # cut short by the fault that stopped the run: measure it again
            continue
        done.run_ids[key] = run_id
        done.measurements[key] = table
        if record is not None:
            done.training[key] = record
    return done


def _fetch(store: Store, run_id: str, layout: Layout, key: str) -> None:
    """A finished model's measurement and training record, from its MLflow run where the session folder
    lacks them (they were written on a machine that was lost): the run logged both as it finished, under
    today's name or, logged by an older cctk, one that ``Layout.named`` lists."""
    wanted = {"measurement": ("measurements", ".csv"), "training": ("training", ".json")}  # artifact -> file
    for artifact, (folder, suffix) in wanted.items():
        paths = layout.named(folder, key, suffix)
        if (artifact == "training" and key == "base") or any(path.is_file() for path in paths):
            continue
        for path in paths:
            if store.fetch(run_id, f"{artifact}/{path.name}", path):
                break


def save_checkpoint(model: torch.nn.Module, layout: Layout, key: str) -> None:
    """Weights of a parent model, written atomically (a kill mid-write leaves no half file)."""
    path = layout.checkpoint(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, partial)
    partial.replace(path)


def load_checkpoint(model: M, layout: Layout, key: str) -> M:
    """The weights ``save_checkpoint`` wrote of ``key``, loaded into ``model`` (of the same architecture)."""
    model.load_state_dict(torch.load(layout.checkpoint(key), map_location="cpu"))
    return model
