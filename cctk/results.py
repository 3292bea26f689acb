"""Results of a run for papers: ``load(run_id_or_session_dir)`` -> tables, measurements, figures.

Given a session folder, reads it; given an MLflow run id of a pipeline, downloads the parent
run's artifacts (the session folder) into a cache first.

    r = cctk.results.load("outputs/20260101-120000_smollm2-135m-bundled")
    r.tables["table09"]; r.measurements["correct sums"]; r.figures["synthesis"]
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from . import tracking
from .errors import CctkError
from .lineage import MODEL_KEYS
from .names import model_name
from .outputs.session import FORMATS, RUN_INFO, measurement_path, read_measurement


@dataclass
class RunResults:
    folder: Path
    info: dict  # run_info.json
    tables: dict[str, pd.DataFrame]  # "table01".."table11"
    measurements: dict[str, pd.DataFrame]  # plain model name -> measurement table
    figures: dict[str, Path]  # figure name (file stem, e.g. "heatmap_recovery") -> PNG
    figure_files: dict[str, dict[str, Path]]  # figure name -> {"png": ..., "pdf": ..., "eps": ...}


def load(source: str | os.PathLike, tracking_name: str | None = None, cache: Path | None = None) -> RunResults:
    """A session folder, or the run id of a cctk pipeline in the MLflow store (``tracking_name``)."""
    return read_folder(session_folder(source, tracking_name, cache))


def session_folder(source: str | os.PathLike, tracking_name: str | None = None, cache: Path | None = None) -> Path:
    """``source`` itself when it is a session folder, else the downloaded artifacts of run ``source``."""
    path = Path(source)
    if path.is_dir():
        if not (path / RUN_INFO).is_file():
            raise CctkError(f"{path} is not a cctk session folder (no {RUN_INFO})")
        return path
    if path.exists() or any(sep in str(source) for sep in ("/", "\\")):  # a path, never a run id
        raise CctkError(f"no session folder at {path}")
    return download(str(source), tracking_name, cache)


def default_cache() -> Path:
    root = os.environ.get("CCTK_CACHE") or os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "cctk" / "runs"


def download(run_id: str, tracking_name: str | None = None, cache: Path | None = None) -> Path:
    """The artifacts of pipeline run ``run_id`` (all but the zip) in ``cache/<run_id>/``."""
    import mlflow
    from mlflow.exceptions import MlflowException

    store = tracking.resolve(tracking_name)
    tracking.check_reachable(store)
    client = mlflow.MlflowClient(tracking_uri=store.tracking_uri)
    try:
        run = client.get_run(run_id)
    except MlflowException:
        raise CctkError(f"{run_id!r} is neither a session folder nor a run in the MLflow store "
                        f"{store.tracking_uri}") from None
    tracking.require_pipeline(run)
    folder = Path(cache or default_cache()) / run_id
    if run.info.status == "FINISHED" and (folder / RUN_INFO).is_file():
        return folder  # a finished run's artifacts do not change
    folder.mkdir(parents=True, exist_ok=True)
    for item in client.list_artifacts(run_id):
        if not item.path.endswith(".zip"):  # the zip repeats everything else
            mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=item.path, dst_path=str(folder),
                                                tracking_uri=store.tracking_uri)
    if not (folder / RUN_INFO).is_file():
        raise CctkError(f"MLflow run {run_id} has no {RUN_INFO} among its artifacts (unfinished or an older run)")
    return folder


def read_folder(folder: Path) -> RunResults:
    folder = Path(folder)
    info = json.loads((folder / RUN_INFO).read_text())
    tables = {path.parent.name[:7]: pd.read_csv(path, float_precision="round_trip")
              for path in sorted(folder.glob("tables/table[0-9][0-9]_*/*.csv"))}
    measurements = {}
    for key in MODEL_KEYS:
        path = measurement_path(folder, key)
        if path.is_file():
            measurements[model_name(key)] = read_measurement(path)
    files = {}
    for sub in sorted(p for p in (folder / "figures").glob("[0-9][0-9]_*") if p.is_dir()):
        stem = sub.name[3:]
        found = {ext: sub / f"{stem}.{ext}" for ext in FORMATS if (sub / f"{stem}.{ext}").is_file()}
        if found:
            files[stem] = found
    figures = {name: paths["png"] for name, paths in files.items() if "png" in paths}
    return RunResults(folder, info, tables, measurements, figures, files)
