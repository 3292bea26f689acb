"""What an interrupted pipeline already finished, read back from its MLflow runs and session folder.

A model counts as finished when its nested run is FINISHED and its files are on disk: its
measurement, its training record and, when other arms start from it, its checkpointed weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
import torch

from ..core.errors import CctkError
from ..core.records import TrainRecord
from ..store import session
from ..store.session import Layout
from ..store.tracking import Store, TrackedRun


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


def save_checkpoint(model, layout: Layout, key: str) -> None:
    """Weights of a parent model, written atomically (a kill mid-write leaves no half file)."""
    path = layout.checkpoint(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, partial)
    partial.replace(path)


def load_checkpoint(model, layout: Layout, key: str):
    model.load_state_dict(torch.load(layout.checkpoint(key), map_location="cpu"))
    return model
