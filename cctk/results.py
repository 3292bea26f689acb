"""Results of a run for papers: ``load(run_id_or_session_dir)`` -> tables, measurements, figures, draws.

Given a session folder, reads it; given an MLflow run id of a pipeline, downloads the parent
run's artifacts (the session folder) into a cache first (``$CCTK_CACHE/cctk/runs/<id>``, else
``~/.cache/cctk/runs/<id>``), which is read from any folder, with or without the store.

    r = cctk.results.load("outputs/20260101-120000_smollm2-135m-bundled")
    r.tables["table09"]; r.measurements["correct sums"]; r.figures["synthesis"]; r.targets

Every table carries each label column's key beside it (``model_key``, ``group_key``, ...: join on those), a
session written before the key columns too (``cctk.store.session.read_tables``); ``r.measurement(key)`` is a
model's measurement by key. ``r.info`` is the run's ``RunInfo`` (run_info.json as a typed record). A protocol v1 run
(``r.protocol`` is ``"v1"``) has tables ``table01`` (the comparison) to ``table04``,
the measurements ``"base model"`` and ``"fabricated answers"`` (candidates 2..18, ``prob`` a softmax
of the mean log-probability per token) and the figures ``before_and_after_3_plus_5`` etc.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .core.errors import CctkError
from .core.lm.models import cache_root
from .core.records import RunInfo
from .store import session, tracking
from .store.session import RUN_INFO


@dataclass
class RunResults:
    folder: Path
    info: RunInfo  # run_info.json
    tables: dict[str, pd.DataFrame]  # "table01".."table11", those of the parts run ("table01".."table04" under v1)
    measurements: dict[str, pd.DataFrame]  # plain model name -> measurement table
    figures: dict[str, Path]  # figure name (file stem, e.g. "heatmap_recovery") -> PNG
    figure_files: dict[str, dict[str, Path]]  # figure name -> {"png": ..., "pdf": ..., "eps": ...}
    targets: pd.DataFrame | None  # targets.csv: split, every target table, exclusions (None before it existed)
    model_names: dict[str, str] = field(default_factory=dict)  # model key -> its plain name (measurements' keys)
    # the parts of its manual the run ran (``cctk run --parts``): the tables and figures of the others are absent;
    # all four of manual 2.0.0 for a run from before ``--parts``, none under a manual without parts (1.0.0)
    parts: tuple[str, ...] = ()

    @property
    def protocol(self) -> str:
        """``v2``, or ``v1``: manual 1.0.0 (cctk run --protocol v1): two models, candidates 2..18."""
        return self.info.protocol

    def measurement(self, key: str) -> pd.DataFrame:
        """The measurement table of model ``key`` (``"m_random"``): by its key, whatever its plain name."""
        return self.measurements[self.model_names[key]]

    def to_latex(self, folder: str | os.PathLike, width: str = "column") -> Path:
        """Every table as booktabs LaTeX, every figure in paper style (``width``: column or page), captions.tex
        and a paper.tex that inputs them, in ``folder`` (``cctk export --latex``); returns paper.tex."""
        from .outputs import paper

        return paper.export(self.folder, Path(folder), width).folder / "paper.tex"


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
    return cache_root() / "runs"


def download(run_id: str, tracking_name: str | None = None, cache: Path | None = None) -> Path:
    """The artifacts of pipeline run ``run_id`` (all but the zip) in ``cache/<run_id>/``.

    A finished run's copy in the cache is read as it is; where the store is not here (no SQLite file, a
    server that does not answer) or does not hold the run, the cached copy is read all the same. Reading
    never creates a store."""
    folder = Path(cache or default_cache()) / run_id
    cached = (folder / RUN_INFO).is_file()
    try:
        store = tracking.connect(tracking_name, create=False)
    except tracking.NoStore as error:
        if cached:
            return folder
        raise CctkError(
            f"{run_id!r} is neither a session folder nor a run cached in {folder.parent}, and {error}"
        ) from None
    try:
        run = store.pipeline(run_id)
    except CctkError as error:
        if "no run" not in str(error):
            raise
        if cached:
            return folder
        raise CctkError(
            f"{run_id!r} is neither a session folder nor a run in the MLflow store {store.uri} "
            f"(nor cached in {folder.parent}); {tracking.HOW_TO_POINT}"
        ) from None
    if run.status == "FINISHED" and cached:
        return folder  # a finished run's artifacts do not change
    _download_whole(store, run_id, folder)
    return folder


def _download_whole(store: tracking.Store, run_id: str, folder: Path) -> None:
    """Into a scratch folder beside ``folder``, then renamed: a copy in the cache is never half a run."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{run_id}.", dir=folder.parent))
    try:
        store.download(run_id, scratch)
        if not (scratch / RUN_INFO).is_file():
            raise CctkError(f"MLflow run {run_id} has no {RUN_INFO} among its artifacts (unfinished or an older run)")
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(scratch, folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def read_folder(folder: Path) -> RunResults:
    protocol, info = session.read_stored(Path(folder))
    layout = session.Layout(Path(folder), protocol)
    measured = session.read_measurements(layout)
    names = {key: protocol.model_name(key) for key in measured}
    files = session.find_figures(layout)
    figures = {name: paths["png"] for name, paths in files.items() if "png" in paths}
    return RunResults(
        layout.folder,
        info,
        session.read_tables(layout),  # key columns even in a session from before
        {names[k]: t for k, t in measured.items()},
        figures,
        files,
        session.read_targets(layout),
        names,
        protocol.parts(info.config.options),
    )
