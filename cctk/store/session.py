"""The session folder: its layout, and every read and write of it, in one place.

Torch-free and MLflow-free; the pipeline writes through it, ``cctk.outputs`` writes through it,
resume and ``cctk.results`` read through it::

    <session>/                         YYYYmmdd-HHMMSS_<model>
      run_info.json                    the run record and the facts derived from it (records.RunInfo)
      targets.csv                      the draws: split, every target table, exclusions
      measurements/<model>.csv         the measurement table of each measured model
      training/<model>.json            the TrainRecord of each fine-tuning run
      curves.csv                       learning curves, one row per arm, epoch and group (--curves)
      checkpoints/<model>.pt           parents of unfinished arms (only while a run is unfinished)
      figures/NN_<name>/<name>.{png,pdf,eps}
      tables/tableNN_<name>/tableNN_<name>.{csv,xlsx,tex}
      workbook/<session>.xlsx
      run_report.pdf, run_report.png, report.html, <session>.zip

Every manual's session has this layout, with its own tables, figures and models; one with a single corpus (manual
1.0.0) writes ``corpus.txt`` too, its texts in the corpus order. What differs between the manuals comes from each
one's ``Manual`` (``cctk.manuals.manual``).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import zipfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from ..core import records
from ..core.config import Config
from ..core.errors import CctkError
from ..core.labels import file_stem, with_keys
from ..core.lm.models import ModelSource, model_id
from ..core.lm.record import PEAK_COLUMNS, TrainRecord
from ..core.provenance import Provenance
from ..core.readings import COLUMNS
from ..core.records import (
    Design,
    Hardware,
    MemoryUse,
    MlflowIds,
    RunInfo,
    Seeds,
    TrainedModel,
)
from ..manuals import registry
from ..manuals.manual import AnyManual, Curves, Draws, OneCorpus, Results, model_keys, trained
from .tracking import redact

RUN_INFO = "run_info.json"
FORMATS = ("png", "pdf", "eps")  # every figure, in this order


def check_out(folder: Path, option: str = "--out") -> None:
    """``folder`` can be made and take files, or a one-line error before any run exists (read-only,
    unwritable, under /proc, below a file). Nothing is made: a file is tried, and removed, in the folder
    or the nearest of its parents that exists."""
    import tempfile

    folder = Path(folder).absolute()
    there = next(p for p in (folder, *folder.parents) if p.exists())
    try:
        if not there.is_dir():
            raise NotADirectoryError(20, f"{there} is a file")
        with tempfile.TemporaryFile(dir=there):
            pass
    except OSError as error:
        why = error.strerror or type(error).__name__
        raise CctkError(f"{option} {folder} cannot hold the outputs: {why}") from None


def session_name(model: str, now: datetime | None = None) -> str:
    return f"{(now or datetime.now()):%Y%m%d-%H%M%S}_{file_stem(model)}"


def new_folder(out_root: Path, model: str, now: datetime | None = None) -> Path:
    """A fresh session folder under ``out_root``, created here and by no one else: two sessions of one model
    started in the same second (the cells of a sweep, two pipelines at once) get ``name``, ``name-2``, ..."""
    out_root.mkdir(parents=True, exist_ok=True)
    name = session_name(model, now)
    for n in range(1, 1000):
        folder = out_root / (name if n == 1 else f"{name}-{n}")
        try:
            folder.mkdir()  # atomic: exactly one of two racing sessions creates it
            return folder
        except FileExistsError:
            continue
    raise FileExistsError(f"{out_root / name}: 999 session folders of this second already exist")


class Busy(CctkError):
    """The session folder is held by a live process (the pipeline writing it)."""


def hold(folder: Path) -> int:
    """Lock ``folder`` for this process (an exclusive ``flock`` on the folder itself, so no file of the
    session changes) and return the descriptor that holds it; ``release`` it, or the kernel does when
    the process dies (kill -9 included), which is what lets a resume tell a live run from a dead one."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise Busy(f"the session folder {folder} is in use by a running process") from None
    return fd


def release(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)  # closing the descriptor drops the lock


@dataclass(frozen=True)
class Layout:
    """Every path of one session folder."""

    folder: Path
    manual: AnyManual  # the manual whose tables it holds (its name in run_info.json)

    @property
    def session(self) -> str:
        return self.folder.name

    @property
    def run_info(self) -> Path:
        return self.folder / RUN_INFO

    @property
    def targets(self) -> Path:
        return self.folder / "targets.csv"

    @property
    def curves(self) -> Path:
        return self.folder / "curves.csv"

    @property
    def corpus(self) -> Path:
        """A manual's one corpus (1.0.0's): the fine-tuning texts, one per line, in the corpus order."""
        return self.folder / "corpus.txt"

    def named(self, folder: str, key: str, suffix: str) -> list[Path]:
        """The paths a model's file in ``folder`` may have, today's first: the model's plain name, then those
        of a session written before: the plain names it had (``Vocabulary.former``), its key and the keys it
        had (``ManualSpec.renamed``; training records and checkpoints were named by key until 2026-12-07)."""
        spec = self.manual.spec
        names = (spec.model_name(key), *spec.vocabulary.former_names("model", key))
        stems = [file_stem(name) for name in names] + [key, *(old for old, new in spec.renamed.items() if new == key)]
        return [self.folder / folder / f"{stem}{suffix}" for stem in dict.fromkeys(stems)]

    def _found(self, folder: str, key: str, suffix: str) -> Path:
        """The first of ``named`` that is there; today's name where none is."""
        paths = self.named(folder, key, suffix)
        return next((path for path in paths if path.is_file()), paths[0])

    def measurement(self, key: str) -> Path:
        """Its CSV, named by the model's plain name (in a session written before that name changed, by the name
        it had then, where that file is there)."""
        return self._found("measurements", key, ".csv")

    def training(self, key: str) -> Path:
        """Its training record (``TrainRecord``), named by the model's plain name (or as ``named`` says)."""
        return self._found("training", key, ".json")

    @property
    def checkpoints(self) -> Path:
        return self.folder / "checkpoints"

    def checkpoint(self, key: str) -> Path:
        """The weights of a parent of unfinished arms, named by the model's plain name (or as ``named`` says)."""
        return self._found("checkpoints", key, ".pt")

    @property
    def figures(self) -> Path:
        return self.folder / "figures"

    def figure(self, number: int, stem: str) -> dict[str, Path]:
        """The files of figure ``number`` by format: ``figures/NN_<stem>/<stem>.<ext>``."""
        folder = self.figures / f"{number:02d}_{stem}"
        return {ext: folder / f"{stem}.{ext}" for ext in FORMATS}

    def table(self, name: str) -> dict[str, Path]:
        """The files of ``tableNN`` by format: ``tables/tableNN_<title>/tableNN_<title>.<ext>``."""
        stem = table_stem(name, self.manual)
        return {ext: self.folder / "tables" / stem / f"{stem}.{ext}" for ext in ("csv", "xlsx", "tex")}

    @property
    def workbook(self) -> Path:
        return self.folder / "workbook" / f"{self.session}.xlsx"

    @property
    def report_html(self) -> Path:
        return self.folder / "report.html"

    @property
    def run_report(self) -> dict[str, Path]:
        return {"pdf": self.folder / "run_report.pdf", "png": self.folder / "run_report.png"}

    @property
    def zip(self) -> Path:
        return self.folder / f"{self.session}.zip"


def table_stem(name: str, manual: AnyManual) -> str:
    """``table01`` -> ``table01_corpus_absorption`` (``table01_comparison`` under protocol v1)."""
    return f"{name}_{file_stem(manual.spec.table(name).title).lower()}"


def session_start(session: str) -> datetime | None:
    """The start time a session's name carries (None for another name)."""
    try:
        return datetime.strptime(session[:15], "%Y%m%d-%H%M%S")
    except ValueError:
        return None


# --- Measurements, training records and the draws: written as the run goes, read on a resume. ---


def write_measurement(layout: Layout, key: str, table: pd.DataFrame) -> Path:
    path = layout.measurement(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(path, index=False)
    return path


N_ADDITIONS = 81  # every measurement table covers a, b in 1..9


def read_measurement(path: Path) -> pd.DataFrame:
    """A measurement CSV, floats read back exactly (round trip), columns as a measurement table's; a file
    cut short (a full disk, a copy stopped half way) fails in one line naming it."""
    try:
        table = pd.read_csv(path, float_precision="round_trip")
    except (ValueError, OSError) as error:  # empty, unparsable, not UTF-8 (pandas' errors are ValueErrors)
        raise CctkError(
            f"{path} cannot be read as a measurement table ({type(error).__name__}: "
            f"{' '.join(str(error).split())[:200]})"
        ) from None
    missing = set(COLUMNS) - set(table.columns)
    if missing:
        raise CctkError(f"{path} is not a measurement table (missing {', '.join(sorted(missing))})")
    _check_whole(path, table)
    return table[COLUMNS]


def _check_whole(path: Path, table: pd.DataFrame) -> None:
    """Every addition, each with as many candidates as the others, and the file's last line ended (pandas
    writes a newline after every row: a cut inside the last row leaves none)."""
    sizes = table.groupby(["a", "b"]).size()
    with open(path, "rb") as file:
        file.seek(max(0, path.stat().st_size - 1))
        ended = file.read(1) == b"\n"
    whole = len(sizes) == N_ADDITIONS and (sizes == sizes.iloc[0]).all() and not table[["a", "b"]].isna().any(axis=None)
    if not ended or not whole:
        raise CctkError(
            f"{path} is incomplete ({len(table)} rows, {len(sizes)} of {N_ADDITIONS} additions"
            f"{'' if ended else ', its last row cut'}): it was cut short"
        )


def read_measurements(layout: Layout, require: tuple[str, ...] = ()) -> dict[str, pd.DataFrame]:
    """The measurement tables on disk of the models of the session's manual, by model key; a model of
    ``require`` missing is an error."""
    found = {}
    for key in model_keys(layout.manual):
        path = layout.measurement(key)
        if path.is_file():
            found[key] = read_measurement(path)
        elif key in require:
            raise CctkError(
                f"{layout.folder} has no measurement of the {layout.manual.spec.model_name(key)} model ({path.name})"
            )
    return found


def write_training(layout: Layout, key: str, record: TrainRecord) -> Path:
    path = layout.training(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record.to_json(), indent=2) + "\n")
    return path


def read_training(layout: Layout, key: str) -> TrainRecord | None:
    path = layout.training(key)
    return TrainRecord.from_json(json.loads(path.read_text())) if path.is_file() else None


def write_draws(layout: Layout, draws: Draws) -> list[Path]:
    """What a run drew before training: targets.csv (2.0.0's split and every target table, or 1.0.0's correct
    sums and fabricated answers) and, where the manual has one corpus, corpus.txt in its order."""
    layout.folder.mkdir(parents=True, exist_ok=True)
    draws.table().to_csv(layout.targets, index=False, lineterminator="\n")
    texts = layout.manual.corpus_texts(draws) if isinstance(layout.manual, OneCorpus) else ()
    if texts:
        layout.corpus.write_text("".join(f"{t}\n" for t in texts), encoding="utf-8")
    return [layout.targets, layout.corpus] if texts else [layout.targets]


def read_targets(layout: Layout) -> pd.DataFrame | None:
    if not layout.targets.is_file():
        return None
    return pd.read_csv(layout.targets, keep_default_na=False, dtype={"excluded": str})


def append_curves(layout: Layout, rows: list[dict[str, Any]]) -> Path:
    """Add one finished arm's learning-curve rows to curves.csv (written whole per arm: a resume
    never finds half an arm). A curves.csv written before its key column (a run resumed since) is first
    rewritten with it, so that its rows and the new ones share one header."""
    new = not layout.curves.is_file()
    columns = list(layout.manual.curve_columns) if isinstance(layout.manual, Curves) else []
    if not new and list(pd.read_csv(layout.curves, nrows=0).columns) != columns:
        scratch = layout.curves.with_suffix(".csv.partial")
        _curves(layout)[columns].to_csv(scratch, index=False, lineterminator="\n")
        os.replace(scratch, layout.curves)
    pd.DataFrame(rows, columns=columns).to_csv(layout.curves, mode="a", header=new, index=False, lineterminator="\n")
    return layout.curves


def read_curves(layout: Layout) -> pd.DataFrame | None:
    """curves.csv, with its ``model_key`` column (from the labels, in one written before it)."""
    return _curves(layout) if layout.curves.is_file() else None


def _curves(layout: Layout) -> pd.DataFrame:
    """curves.csv, which is there, with its ``model_key`` column."""
    return with_keys(pd.read_csv(layout.curves), layout.manual.spec.vocabulary, ("model",), str(layout.curves))


# --- run_info.json: the RunInfo record at its JSON edge, and back (the one codec of the file). ---


def run_info(
    config: Config[Any],
    manual: AnyManual,
    results: Results[Any],
    *,
    session: str,
    model: ModelSource | None = None,
    device: str = "",
    seconds: float | None = None,
    hardware: Hardware = Hardware(),
    software: dict[str, str | None] | None = None,
    mlflow: MlflowIds = MlflowIds(),
    memory: MemoryUse | None = None,
    provenance: Provenance | None = None,
) -> RunInfo:
    """The run's one record, built once at its end: its configuration and the facts of where and how it ran,
    with what a reader wants beside them (its manual's design, seeds and what they control, candidates, the
    fine-tuning runs by plain name, the headline)."""
    spec = manual.spec
    runs = {
        m.key: TrainedModel(spec.model_name(m.key), spec.model_name(m.parent), results.training[m.key])
        for m in trained(manual, config.options)
        if m.parent is not None and m.key in results.training
    }
    return RunInfo(
        protocol=spec.name,
        session=session,
        model=model or ModelSource(config.model, model_id(config.model)),
        profile=config.profile,
        profile_requested=config.profile_requested or config.profile,
        profile_note=config.profile_note,
        recipe=config.recipe,
        design=manual.design(results, config),
        seeds=Seeds(config.seeds, config.seeds_drawn, dict(spec.seed_roles)),
        candidates=spec.scoring.candidates,
        end_marker=spec.scoring.end_marker,
        device=device,
        hardware=hardware,
        software=dict(software or {}),
        mlflow=mlflow,
        training=runs,
        headline=manual.headline(results).metrics(),
        seconds=seconds,
        memory=memory,
        provenance=provenance,
    )


def info_json(info: RunInfo) -> dict[str, Any]:
    """``info`` as run_info.json writes it: the record's fields (its design's flat), its absent values left out."""
    return records.to_json(info, omit_none=True)


def info_from_json(data: dict[str, Any]) -> RunInfo:
    """run_info.json back into its record, whatever cctk version wrote it: a file from before protocols is
    2.0.0's, one from before ``--parts`` ran every part, a model key renamed since reads as today's."""
    return _decode(data)[1]


def _decode(data: dict[str, Any]) -> tuple[AnyManual, RunInfo]:
    """run_info.json's manual, resolved from its name here (the disk's edge), and the record (its design the
    manual's own record)."""
    manual = registry.get(data.get("protocol"))
    return manual, records.from_json(RunInfo, _upgrade(data, manual), {Design: manual.spec.design_type})


def _upgrade(data: dict[str, Any], manual: AnyManual) -> dict[str, Any]:
    """What a file written by an older cctk lacks, as that code meant it (its manual's design: ``upgrade``); the
    codec does the rest."""
    spec = manual.spec
    data = dict(data, protocol=spec.name)
    data.setdefault("profile_requested", data["profile"])
    data.setdefault("profile_note", data["profile"])
    data.setdefault("candidates", list(spec.scoring.candidates))
    data.setdefault("end_marker", spec.scoring.end_marker)
    for key in ("mlflow", "hardware", "software", "headline"):  # written as null by early files
        if data.get(key) is None:
            data.pop(key, None)
    stored = data.get("mlflow") or {}
    if stored.get("tracking_uri"):  # written whole before cctk redacted it: a report drawn again shows no password
        data["mlflow"] = {**stored, "tracking_uri": redact(stored["tracking_uri"])}
    data = spec.design_type.upgrade(data)
    data["training"] = {spec.renamed.get(key, key): t for key, t in (data.get("training") or {}).items()}
    return data


def write_run_info(layout: Layout, info: RunInfo) -> Path:
    layout.run_info.write_text(json.dumps(info_json(info), indent=2, ensure_ascii=False, default=_plain) + "\n")
    return layout.run_info


def _plain(value: Any) -> Any:
    """numpy scalars (and anything else odd) as plain JSON values (``json.dumps``' ``default``)."""
    return value.item() if hasattr(value, "item") else str(value)


def read_run_info(folder: Path) -> RunInfo:
    return read_stored(folder)[1]


def read_stored(folder: Path) -> tuple[AnyManual, RunInfo]:
    """A session folder's manual (the value) and its run record, from its run_info.json."""
    path = Path(folder) / RUN_INFO
    if not path.is_file():
        raise CctkError(f"{folder} is not a cctk session folder (no {RUN_INFO})")
    try:
        return _decode(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, KeyError, TypeError, AttributeError) as error:  # cut short, edited, not UTF-8
        raise CctkError(
            f"{path} is not a readable run record ({type(error).__name__}: {' '.join(str(error).split())[:200]})"
        ) from None


def layout_of(folder: Path) -> Layout:
    """The layout of a session folder, under the manual its run_info.json names."""
    return Layout(Path(folder), read_stored(folder)[0])


# --- Back from a folder: rebuild the results (no model), copy the inputs of a re-render. ---


@dataclass(frozen=True)
class Rebuilt:
    results: Results[Any]  # its manual's results (StudyResults under 2.0.0, ComparisonResults under 1.0.0)
    tables: dict[str, pd.DataFrame]
    info: RunInfo  # its run_info.json
    manual: AnyManual  # the manual it ran under


def rebuild(folder: Path) -> Rebuilt:
    """Results, tables and run record of a session from its folder alone (no model), under its manual: the
    draws drawn again from the recorded seed (and recipe), the tables computed again. A run of some parts
    (``--parts``) needs the measurements of those parts' models only."""
    manual, info = read_stored(folder)
    layout, config = Layout(Path(folder), manual), info.config
    measurements = read_measurements(layout, require=model_keys(manual, config.options))
    results = manual.results(manual.draw(config), config, measurements, info.records)
    if isinstance(manual, Curves):
        results = manual.with_curves(results, read_curves(layout))
    return Rebuilt(results, manual.tables(results), info, manual)


def copy_inputs(source: Layout, root: Path) -> Layout:
    """A new session folder under ``root`` holding what a re-render needs: run_info, the draws, the
    measurements and the training records."""
    target = Layout(Path(root) / read_run_info(source.folder).session, source.manual)
    inputs = [
        source.run_info,
        source.targets,
        source.curves,
        source.corpus,
        *(source.folder / "measurements").glob("*.csv"),
        *(source.folder / "training").glob("*.json"),
    ]
    for path in filter(Path.is_file, inputs):
        copy = target.folder / path.relative_to(source.folder)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, copy)
    return target


def read_tables(layout: Layout) -> dict[str, pd.DataFrame]:
    """Every table written, from its CSV (floats read back exactly, peak memory as nullable integers, as
    written), with its key columns: a table written before them gets them from its labels here, at the reading
    edge, so that every reader joins on keys."""
    vocabulary = layout.manual.spec.vocabulary
    return {
        name: with_keys(read_table(path), vocabulary, where=str(path)) for name, path in find_tables(layout).items()
    }


def read_table(path: Path) -> pd.DataFrame:
    """A table's CSV (floats read back exactly), its peak memory columns as nullable integers: empty where not
    measured, as a table written before 2026-12-07 held as 0 (a peak of 0 bytes is no measurement: read as the
    empty cell it now is)."""
    table = pd.read_csv(path, float_precision="round_trip", dtype=dict.fromkeys(PEAK_COLUMNS, "Int64"))
    for column in set(PEAK_COLUMNS) & set(table.columns):
        table[column] = table[column].mask(table[column] == 0)
    return table


def find_tables(layout: Layout) -> dict[str, Path]:
    """``tableNN`` -> its CSV, for every table written."""
    return {path.parent.name[:7]: path for path in sorted(layout.folder.glob("tables/table[0-9][0-9]_*/*.csv"))}


def find_figures(layout: Layout) -> dict[str, dict[str, Path]]:
    """Figure name (file stem, e.g. ``heatmap_recovery``) -> its files by format."""
    files = {}
    for sub in sorted(p for p in layout.figures.glob("[0-9][0-9]_*") if p.is_dir()):
        stem = sub.name[3:]
        found = {ext: sub / f"{stem}.{ext}" for ext in FORMATS if (sub / f"{stem}.{ext}").is_file()}
        if found:
            files[stem] = found
    return files


def write_zip(layout: Layout) -> Path:
    """``<session>.zip`` inside the folder: every file of the session (but the zip), under ``<session>/``."""
    path = layout.zip
    files = sorted(p for p in layout.folder.rglob("*") if p.is_file() and p != path)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        for file in files:
            archive.write(file, f"{layout.session}/{file.relative_to(layout.folder).as_posix()}")
    return path
