"""Results of a run for papers: ``load(run_id_or_session_dir)`` -> tables, measurements, figures, draws.

Given a session folder, reads it; given an MLflow run id of a pipeline, downloads the parent
run's artifacts (the session folder) into a cache first (``$CCTK_CACHE/cctk/runs/<id>``, else
``$XDG_CACHE_HOME/cctk/runs/<id>``, else ``~/.cache/cctk/runs/<id>``), which is read from any folder, with or
without the store.

    r = cctk.results.load("outputs/20260101-120000_smollm2_135m_bundled")
    r.tables["table09"]; r.table("synthesis shares"); r.measurements["correct sums"]; r.figures["synthesis"]

A key that is not there (``r.tables["table9"]``, ``r.measurement("m_rnd")``) is a one-line ``CctkError`` (a
``KeyError`` too) naming the closest key and every valid one.

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
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pandas as pd

from .core.errors import CctkError, NoRun, UnknownKey, closest, unknown_key
from .core.labels import file_stem
from .core.lm.models import cache_root
from .core.records import RunInfo
from .manuals.manual import Parts
from .store import session, tracking
from .store.session import RUN_INFO

V = TypeVar("V")


class Keyed(dict[str, V]):
    """A dict whose missing key is a one-line error naming the closest key and every valid one
    (``cctk.core.errors.UnknownKey``: a ``CctkError`` and a ``KeyError``); ``in`` and ``.get`` as on a dict."""

    def __init__(
        self, kind: str, items: Iterable[tuple[str, V]] | dict[str, V] = (), where: str = " in this run"
    ) -> None:
        super().__init__(items)
        self.kind = kind  # what a key names: "table", "measurement", "figure"
        self.where = where  # where it was looked for, as the error says it

    def __missing__(self, key: str) -> V:
        raise unknown_key(self.kind, key, self, self.where)

    def __reduce__(self) -> tuple[type[Keyed[V]], tuple[str, dict[str, V], str]]:
        # pickled with its kind (dict's own would call __init__ without it)
        return (Keyed, (self.kind, dict(self), self.where))


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
    table_titles: dict[str, str] = field(default_factory=dict)  # "table09" -> "synthesis shares" (its manual's)
    # the parts of its manual the run ran (``cctk run --parts``): the tables and figures of the others are absent;
    # all four of manual 2.0.0 for a run from before ``--parts``, none under a manual without parts (1.0.0)
    parts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Every lookup by key names what exists when the key is not there."""
        self.tables = Keyed("table", self.tables)
        self.measurements = Keyed("measurement", self.measurements)
        self.figures = Keyed("figure", self.figures)
        self.figure_files = Keyed("figure", self.figure_files)

    @property
    def protocol(self) -> str:
        """``v2``, or ``v1``: manual 1.0.0 (cctk run --protocol v1): two models, candidates 2..18."""
        return self.info.protocol

    def table(self, name: str | int) -> pd.DataFrame:
        """A table by its number (``9``, ``"table09"``) or by its manual's name for it, as its title or its
        files say it (``"synthesis shares"``, ``"synthesis_shares"``, ``"table09_synthesis_shares"``)."""
        aliases = self._table_aliases()
        key = aliases.get(str(name).strip().lower())
        if key is not None and key in self.tables:
            return self.tables[key]
        near = None if str(name).strip().isdigit() else closest(str(name).strip(), aliases)
        hint = f" (did you mean {self._titled(aliases[near])}?)" if near else ""
        listed = ", ".join(self._titled(k) for k in self.tables)
        raise UnknownKey(f"no table {name!r} in this run{hint}; choose one of: {listed}")

    def _table_aliases(self) -> dict[str, str]:
        """Every name a table answers to, lower case -> its key: ``table09``, ``9``, its title, its file stem."""
        aliases = {}
        for key in self.tables:
            title = self.table_titles.get(key, "")
            stem = file_stem(title).lower()
            names = [key, str(int(key[-2:]))] + ([title, stem, f"{key}_{stem}"] if title else [])
            aliases.update({alias.lower(): key for alias in names})
        return aliases

    def _titled(self, key: str) -> str:
        return f"{key} ({self.table_titles[key]})" if key in self.table_titles else key

    def measurement(self, key: str) -> pd.DataFrame:
        """The measurement table of model ``key`` (``"m_random"``): by its key, whatever its plain name (its
        plain name, ``"fabricated answers"``, works too)."""
        if key in self.model_names:
            return self.measurements[self.model_names[key]]
        if key in self.measurements:
            return self.measurements[key]
        raise unknown_key("model", key, self.model_names, " in this run")

    def to_latex(self, folder: str | os.PathLike[str], width: str = "column") -> Path:
        """Every table as booktabs LaTeX, every figure in paper style (``width``: column or page), captions.tex
        and a paper.tex that inputs them, in ``folder`` (``cctk export --latex``); returns paper.tex."""
        from .outputs import paper

        return paper.export(self.folder, Path(folder), width).folder / "paper.tex"


def load(source: str | os.PathLike[str], tracking_name: str | None = None, cache: Path | None = None) -> RunResults:
    """A session folder, or the run id of a cctk pipeline in the MLflow store (``tracking_name``)."""
    return read_folder(session_folder(source, tracking_name, cache))


def load_sweep(sweep_id: str, tracking_name: str | None = None, cache: Path | None = None) -> dict[str, RunResults]:
    """Every finished cell of sweep ``sweep_id``: its cell's key (``smollm2-135m-bundled|seed=3``) -> its
    pipeline's results, in the order of the keys (``load`` of each run id: downloaded once into the cache)."""
    store = tracking.connect(tracking_name, create=False)
    finished = finished_cells(store, store.sweep(sweep_id))
    cells = ((r.tags[tracking.CELL], load(r.run_id, tracking_name, cache)) for r in finished)
    return Keyed("cell", cells, " in this sweep")  # a cell mistyped: one line naming the closest


def finished_cells(store: tracking.Store, sweep: tracking.TrackedRun) -> list[tracking.TrackedRun]:
    """The finished pipeline of each cell of ``sweep`` (``store.sweep``: a one-line error where it is no sweep),
    by cell key; a one-line error where none has finished."""
    cells = _finished(store.cells(sweep))
    if not cells:
        raise CctkError(f"sweep {sweep.run_id} has no finished pipeline yet")
    return cells


def _finished(attempts: list[tracking.TrackedRun]) -> list[tracking.TrackedRun]:
    """Of a sweep's cells' runs (every attempt, the newest first), each cell's finished one, by cell key."""
    cells: dict[str, tracking.TrackedRun] = {}
    for run in attempts:
        if run.status == "FINISHED":
            cells.setdefault(run.tags[tracking.CELL], run)
    return [cells[key] for key in sorted(cells)]


@dataclass
class CompareResults:
    """What a ``cctk compare`` wrote: its tables (2.0.0's ``findings``, ``per_run``, ``cross_seed``, ...; KR-Test's
    ``kr_pooled``, ``kr_paired``, ...), the pipelines it compared and its figures (``forest``, ...)."""

    folder: Path
    tables: dict[str, pd.DataFrame]  # table name -> its CSV
    runs: pd.DataFrame | None  # runs.csv: run id, base model, seed, varied recipe values, parts (KR-Test: None)
    figures: dict[str, Path]  # figure name -> PNG
    figure_files: dict[str, dict[str, Path]]  # figure name -> {"png": ..., "pdf": ..., "eps": ...}

    def __post_init__(self) -> None:
        self.tables = Keyed("table", self.tables, " in this comparison")
        self.figures = Keyed("figure", self.figures, " in this comparison")
        self.figure_files = Keyed("figure", self.figure_files, " in this comparison")


COMPARE_PAGE, COMPARE_RUNS = "compare.html", "runs.csv"


def load_compare(
    source: str | os.PathLike[str], tracking_name: str | None = None, cache: Path | None = None
) -> CompareResults:
    """A ``cctk compare`` folder (its ``--out``), or the run id of a compare in the MLflow store (its artifacts
    downloaded once into the cache, as ``load`` does a pipeline's)."""
    path = Path(source)
    if path.is_dir():
        if not (path / COMPARE_PAGE).is_file():
            raise CctkError(f"{path} is not the folder of a cctk compare (no {COMPARE_PAGE})")
        return _read_compare(path)
    if path.exists() or any(sep in str(source) for sep in ("/", "\\")):  # a path, never a run id
        raise CctkError(f"no compare folder at {path}")
    return _read_compare(_download_compare(str(source), tracking_name, cache))


def _download_compare(run_id: str, tracking_name: str | None, cache: Path | None) -> Path:
    folder = Path(cache or default_cache()) / run_id
    if (folder / COMPARE_PAGE).is_file():  # a compare's files never change once written
        return folder
    try:
        store = tracking.connect(tracking_name, create=False)
        kind = store.get(run_id).tags.get(tracking.KIND)
    except (tracking.NoStore, NoRun) as error:  # a folder's name mistyped reads as a run id: say both
        raise CctkError(f"{run_id!r} is neither a compare folder nor a run in the MLflow store ({error})") from None
    if kind != "compare":
        raise CctkError(f"MLflow run {run_id} is not a cctk compare (tag {tracking.KIND} is {kind!r}){_load_it(kind)}")
    _download_whole(store, run_id, folder, COMPARE_PAGE)
    return folder


def _read_compare(folder: Path) -> CompareResults:
    tables = {p.name: pd.read_csv(p / f"{p.name}.csv") for p in sorted((folder / "tables").glob("*")) if p.is_dir()}
    files = {
        p.name: {f.suffix[1:]: f for f in sorted(p.glob(f"{p.name}.*"))}
        for p in sorted((folder / "figures").glob("*"))
        if p.is_dir()
    }
    runs = pd.read_csv(folder / COMPARE_RUNS) if (folder / COMPARE_RUNS).is_file() else None
    figures = {name: paths["png"] for name, paths in files.items() if "png" in paths}
    return CompareResults(folder, tables, runs, figures, files)


def _load_it(kind: str | None) -> str:
    """Which other loader reads a cctk run of ``kind``, not a comparison ("" for none)."""
    loaders = {"pipeline": "load", "sweep": "load_sweep"}
    return f"; load it with cctk.results.{loaders[kind]}" if kind in loaders else ""


def _require_pipeline(store: tracking.Store, run: tracking.TrackedRun) -> None:
    """A one-line error unless ``run`` is a pipeline's; a sweep's names its finished cells' runs (what a report,
    an export or a citation takes) and a comparison's the loader of its tables."""
    kind, run_id = run.tags.get(tracking.KIND), run.run_id
    if kind == "sweep":
        cells = _finished(store.cells(run))
        shown = ", ".join(f"{c.run_id} ({c.tags[tracking.CELL]})" for c in cells[:3])
        more = f" and {len(cells) - 3} more" if len(cells) > 3 else ""
        its = f": give one of its cells' pipeline runs, {shown}{more}" if cells else " (no cell of it has finished)"
        raise CctkError(
            f"MLflow run {run_id} is a sweep (tag {tracking.KIND} is 'sweep'), not a pipeline{its}; "
            f"cctk.results.load_sweep('{run_id}') reads them all"
        )
    if kind == "compare":
        raise CctkError(
            f"MLflow run {run_id} is a comparison (tag {tracking.KIND} is 'compare'), not a pipeline: "
            f"cctk.results.load_compare('{run_id}') reads its tables"
        )
    tracking.require_pipeline(run)


def session_folder(source: str | os.PathLike[str], tracking_name: str | None = None, cache: Path | None = None) -> Path:
    """``source`` itself when it is a session folder, else the downloaded artifacts of run ``source``."""
    path = Path(source)
    if path.is_dir():
        if not (path / RUN_INFO).is_file():
            raise CctkError(f"{path} is not a cctk session folder (no {RUN_INFO}){_sessions_in(path)}")
        return path
    if path.exists() or any(sep in str(source) for sep in ("/", "\\")):  # a path, never a run id
        raise CctkError(f"no session folder at {path}")
    return download(str(source), tracking_name, cache)


def _sessions_in(folder: Path, shown: int = 3) -> str:
    """The session folders right inside ``folder`` (``outputs/``), the newest first, as a hint ("" if none)."""
    found = sorted((p for p in folder.iterdir() if (p / RUN_INFO).is_file()), key=lambda p: p.name, reverse=True)
    if not found:
        return ""
    more = f", and {len(found) - shown} older" if len(found) > shown else ""
    listed = ", ".join(str(p) for p in found[:shown])
    n = len(found)
    return f"; it holds {n} session folder{'s' * (n != 1)}, give {'one of them' if n > 1 else 'it'}: {listed}{more}"


def default_cache() -> Path:
    return cache_root() / "runs"


def download(run_id: str, tracking_name: str | None = None, cache: Path | None = None) -> Path:
    """The artifacts of pipeline run ``run_id`` (all but the zip) in ``cache/<run_id>/``. A finished run's copy
    in the cache is read as it is; where the store is not here (no SQLite file, a server that does not answer)
    or does not hold the run, the cached copy is read all the same. Reading never creates a store."""
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
        run = store.get(run_id)
    except NoRun:
        if cached:
            return folder
        raise CctkError(
            f"{run_id!r} is neither a session folder nor a run in the MLflow store {store.uri} (nor cached in "
            f"{folder.parent}); {_held(store, run_id)}"
        ) from None
    _require_pipeline(store, run)
    if run.status == "FINISHED" and cached:
        return folder  # a finished run's artifacts do not change
    _download_whole(store, run_id, folder)
    return folder


def _held(store: tracking.Store, run_id: str) -> str:
    """What the store does hold: its pipeline runs (the closest id to ``run_id``, the newest), or, where it
    holds none, how to point at another store."""
    runs = store.pipelines()
    if not runs:
        return f"that store holds no pipeline run; {tracking.HOW_TO_POINT}"
    ids = [r.run_id for r in runs]
    near = next((i for i in ids if i.startswith(run_id) or run_id.startswith(i)), None) or closest(run_id, ids)
    newest = ", ".join(f"{r.run_id} ({r.tags.get('mlflow.runName', '?')})" for r in runs[:3])
    hint = f"did you mean {near}? " if near else ""
    return f"{hint}it holds {len(runs)} pipeline run{'s' * (len(runs) != 1)}, the newest {newest}"


def _download_whole(store: tracking.Store, run_id: str, folder: Path, needed: str = RUN_INFO) -> None:
    """Into a scratch folder beside ``folder``, then renamed: a copy in the cache is never half a run (one
    without the file ``needed``, written last)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{run_id}.", dir=folder.parent))
    try:
        store.download(run_id, scratch)
        if not (scratch / needed).is_file():
            raise CctkError(f"MLflow run {run_id} has no {needed} among its artifacts (unfinished or an older run)")
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(scratch, folder)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def read_folder(folder: Path) -> RunResults:
    manual, info = session.read_stored(Path(folder))
    layout = session.Layout(Path(folder), manual)
    measured = session.read_measurements(layout)
    names = {key: manual.spec.model_name(key) for key in measured}
    files = session.find_figures(layout)
    figures = {name: paths["png"] for name, paths in files.items() if "png" in paths}
    tables = session.read_tables(layout)  # key columns even in a session from before
    return RunResults(
        layout.folder,
        info,
        tables,
        {names[k]: t for k, t in measured.items()},
        figures,
        files,
        session.read_targets(layout),
        names,
        {name: manual.spec.titles[name] for name in tables if name in manual.spec.titles},
        manual.parts(info.config.options) if isinstance(manual, Parts) else (),
    )
