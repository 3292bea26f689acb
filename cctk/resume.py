"""What an interrupted pipeline already finished, read back from its MLflow runs and session folder.

A model counts as finished when its nested run is FINISHED: its measurement is on disk and in the
run, its training record too, and, when other arms start from it, its weights are checkpointed.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch

from . import tracking
from .errors import CctkError
from .outputs.session import measurement_path, read_measurement


@dataclass
class Done:
    """The finished part of a pipeline: by model key."""

    run_ids: dict[str, str] = field(default_factory=dict)
    measurements: dict[str, pd.DataFrame] = field(default_factory=dict)
    training: dict[str, dict] = field(default_factory=dict)


def pipeline_run(run_id: str):
    """The parent run of a cctk pipeline, or a one-line error."""
    import mlflow
    from mlflow.exceptions import MlflowException

    try:
        run = mlflow.MlflowClient().get_run(run_id)
    except MlflowException:
        raise CctkError(f"no run {run_id!r} in the tracking store {mlflow.get_tracking_uri()}") from None
    tracking.require_pipeline(run)
    return run


def finished(parent_run_id: str, experiment_id: str, folder: Path) -> Done:
    """Read back every finished model of a pipeline; stale RUNNING children are marked KILLED."""
    import mlflow

    client = mlflow.MlflowClient()
    children = client.search_runs([experiment_id], f"tags.`mlflow.parentRunId` = '{parent_run_id}'")
    done = Done()
    for child in children:
        key = child.data.tags.get("cctk.key")
        if child.info.status == "RUNNING":
            client.set_terminated(child.info.run_id, "KILLED")
        if child.info.status != "FINISHED" or key is None:
            continue
        record = folder / "training" / f"{key}.json"
        measurement = measurement_path(folder, key)
        if not measurement.is_file() or (key != "base" and not record.is_file()):
            continue  # finished in MLflow but its files are gone: measure it again
        done.run_ids[key] = child.info.run_id
        done.measurements[key] = read_measurement(measurement)  # floats exactly as measured
        if key != "base":
            done.training[key] = json.loads(record.read_text())
    return done


def checkpoint_path(folder: Path, key: str) -> Path:
    return folder / "checkpoints" / f"{key}.pt"


def save_checkpoint(model, folder: Path, key: str) -> None:
    """Weights of a parent model, written atomically (a kill mid-write leaves no half file)."""
    path = checkpoint_path(folder, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, partial)
    partial.replace(path)


def load_checkpoint(model, folder: Path, key: str):
    model.load_state_dict(torch.load(checkpoint_path(folder, key), map_location="cpu"))
    return model
