"""The session folder: its layout, and every read and write of it, in one place.

Torch-free and MLflow-free; the pipeline writes through it, ``cctk.outputs`` writes through it,
resume and ``cctk.results`` read through it::

    <session>/                         YYYYmmdd-HHMMSS_<model>
      run_info.json                    the run record (RunRecord) and the facts derived from it
      targets.csv                      the draws: split, every target table, exclusions
      measurements/<model>.csv         the measurement table of each measured model
      training/<key>.json              the TrainRecord of each fine-tuning run
      curves.csv                       learning curves, one row per arm, epoch and group (--curves)
      checkpoints/<key>.pt             parents of unfinished arms (only while a run is unfinished)
      figures/NN_<name>/<name>.{png,pdf,eps}
      tables/tableNN_<name>/tableNN_<name>.{csv,xlsx,tex}
      workbook/<session>.xlsx
      run_report.pdf, run_report.png, report.html, <session>.zip

A protocol v1 session (manual 1.0.0, ``cctk.v1``) has the same layout with its own tables, figures
and two models (base model, fabricated answers), and ``corpus.txt``: the shuffled corpus texts.
"""
from __future__ import annotations

import json
import shutil
import zipfile
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

import pandas as pd

from .config import PARTS, Config, Recipe
from .errors import CctkError
from .experiments import CURVE_COLUMNS, Results, compute_tables
from .facts import CANDIDATES, END_MARKER
from .lineage import ARMS, MODEL_KEYS, StudyInputs, build_study_inputs, models_for, targets_table
from .models import model_id
from .names import TABLES, V1_TABLES, file_stem, model_name
from .readings import COLUMNS
from .records import RunFacts, RunRecord, TrainRecord
from .v1 import experiment as v1_experiment
from .v1 import facts as v1_facts

RUN_INFO = "run_info.json"
FORMATS = ("png", "pdf", "eps")  # every figure, in this order
SEED_ROLES = {
    "seeds[0]": "every random draw of the run: the held-out split, the fabricated answers, the control answers, "
                "the corpus shuffles, the batch order and dropout of every fine-tuning run (re-seeded at its "
                "start), and the bootstrap of the deviation bands",
    "seeds[1:]": "reserved for repetitions; not used by this run",
}
V1_SEED_ROLES = {
    "seeds[0]": "Python's random.seed of the reference notebook: the fabricated answers (random.choice per "
                "addition) and the corpus order (random.shuffle, the same stream), exactly as Listings 6-7; "
                "cctk also seeds from it what the notebook left unseeded: the batch order of every epoch and "
                "torch's generator (dropout) of the fine-tuning run",
}


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


@dataclass(frozen=True)
class Layout:
    """Every path of one session folder."""

    folder: Path
    protocol: str = "v2"  # names its tables: names.TABLES, or names.V1_TABLES for "v1"

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
        """Protocol v1: the fine-tuning texts, one per line, in the corpus order."""
        return self.folder / "corpus.txt"

    def measurement(self, key: str) -> Path:
        return self.folder / "measurements" / f"{file_stem(model_name(key))}.csv"

    def training(self, key: str) -> Path:
        return self.folder / "training" / f"{key}.json"

    @property
    def checkpoints(self) -> Path:
        return self.folder / "checkpoints"

    def checkpoint(self, key: str) -> Path:
        return self.checkpoints / f"{key}.pt"

    @property
    def figures(self) -> Path:
        return self.folder / "figures"

    def figure(self, number: int, stem: str) -> dict[str, Path]:
        """The files of figure ``number`` by format: ``figures/NN_<stem>/<stem>.<ext>``."""
        folder = self.figures / f"{number:02d}_{stem}"
        return {ext: folder / f"{stem}.{ext}" for ext in FORMATS}

    def table(self, name: str) -> dict[str, Path]:
        """The files of ``tableNN`` by format: ``tables/tableNN_<title>/tableNN_<title>.<ext>``."""
        stem = table_stem(name, self.protocol)
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


def table_stem(name: str, protocol: str = "v2") -> str:
    """``table01`` -> ``table01_corpus_absorption`` (``table01_comparison`` under protocol v1)."""
    titles = V1_TABLES if protocol == "v1" else TABLES
    return f"{name}_{file_stem(titles[name]).lower()}"


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


def read_measurement(path: Path) -> pd.DataFrame:
    """A measurement CSV, floats read back exactly (round trip), columns as a measurement table's."""
    table = pd.read_csv(path, float_precision="round_trip")
    missing = set(COLUMNS) - set(table.columns)
    if missing:
        raise CctkError(f"{path} is not a measurement table (missing {', '.join(sorted(missing))})")
    return table[COLUMNS]


def read_measurements(layout: Layout, require: tuple[str, ...] = ()) -> dict[str, pd.DataFrame]:
    """The measurement tables on disk, by model key; a model of ``require`` missing is an error."""
    found = {}
    for key in MODEL_KEYS:
        path = layout.measurement(key)
        if path.is_file():
            found[key] = read_measurement(path)
        elif key in require:
            raise CctkError(f"{layout.folder} has no measurement of the {model_name(key)} model ({path.name})")
    return found


def write_training(layout: Layout, key: str, record: TrainRecord) -> Path:
    path = layout.training(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record.to_json(), indent=2) + "\n")
    return path


def read_training(layout: Layout, key: str) -> TrainRecord | None:
    path = layout.training(key)
    return TrainRecord.from_json(json.loads(path.read_text())) if path.is_file() else None


def write_targets(layout: Layout, inputs: StudyInputs) -> Path:
    layout.folder.mkdir(parents=True, exist_ok=True)
    targets_table(inputs).to_csv(layout.targets, index=False, lineterminator="\n")
    return layout.targets


def write_v1_draws(layout: Layout, draws: v1_facts.Draws) -> list[Path]:
    """Protocol v1's draws: targets.csv (a, b, correct sum, fabricated answer) and corpus.txt."""
    layout.folder.mkdir(parents=True, exist_ok=True)
    draws.table().to_csv(layout.targets, index=False, lineterminator="\n")
    layout.corpus.write_text("".join(f"{t}\n" for t in draws.texts), encoding="utf-8")
    return [layout.targets, layout.corpus]


def read_targets(layout: Layout) -> pd.DataFrame | None:
    if not layout.targets.is_file():
        return None
    return pd.read_csv(layout.targets, keep_default_na=False, dtype={"excluded": str})


def append_curves(layout: Layout, rows: list[dict]) -> Path:
    """Add one finished arm's learning-curve rows to curves.csv (written whole per arm: a resume
    never finds half an arm)."""
    new = not layout.curves.is_file()
    pd.DataFrame(rows, columns=CURVE_COLUMNS).to_csv(layout.curves, mode="a", header=new, index=False,
                                                     lineterminator="\n")
    return layout.curves


def read_curves(layout: Layout) -> pd.DataFrame | None:
    return pd.read_csv(layout.curves) if layout.curves.is_file() else None


# --- run_info.json: the run record at its JSON edge, and back. ---

def _about(record: RunRecord) -> dict:
    """The session, the model and the recipe in force: the head of run_info.json under both protocols."""
    config = record.config
    return {
        "session": record.facts.session,
        "model": {"key": config.model, "id": model_id(config.model)},
        "profile": config.profile,
        "profile_requested": config.profile_requested or config.profile,
        "profile_note": config.profile_note,
        "recipe": asdict(config.recipe),
    }


def run_info(record: RunRecord, inputs: StudyInputs, head: dict, warnings: list[str] | None = None) -> dict:
    """Everything run_info.json holds: the record, plus the facts a reader wants beside it."""
    config, facts = record.config, record.facts
    return {
        **_about(record),
        "holdout": config.holdout,
        "curves": config.curves,
        "parts": list(config.parts),
        "heldout_additions": [list(p) for p in inputs.split.heldout],
        "seeds": {"values": list(config.seeds), "drawn_fresh": config.seeds_drawn, "roles": SEED_ROLES},
        "candidates": list(CANDIDATES),
        "end_marker": END_MARKER,
        "device": facts.device,
        "hardware": facts.hardware,
        "software": facts.software,
        "mlflow": facts.mlflow(),
        "training": {a.key: {"model": model_name(a.key), "parent": model_name(a.parent),
                             **record.training[a.key].to_json()}
                     for a in ARMS if a.key in record.training},
        "headline": head,
        "warnings": list(warnings or []),
        "seconds": facts.seconds,
    }


def v1_run_info(record: RunRecord, head: dict) -> dict:
    """run_info.json of a protocol v1 run: the record, and how 1.0.0 measures and trains."""
    config, facts = record.config, record.facts
    return {
        "protocol": "v1",
        **_about(record),
        "seeds": {"values": list(config.seeds), "drawn_fresh": config.seeds_drawn, "roles": V1_SEED_ROLES},
        "candidates": list(v1_facts.CANDIDATES),
        "answer_text": " {v}",  # a template: a space and the number
        "end_marker": "",
        "index": v1_facts.INDEX,
        "loss": "whole text, every token after the first (padding masked)",
        "pairs_plotted": [list(p) for p in v1_facts.PAIRS],
        "device": facts.device,
        "hardware": facts.hardware,
        "software": facts.software,
        "mlflow": facts.mlflow(),
        "training": {key: {"model": model_name(key), "parent": model_name(v1_experiment.BEFORE), **t.to_json()}
                     for key, t in record.training.items()},
        "headline": head,
        "seconds": facts.seconds,
    }


def write_run_info(layout: Layout, info: dict) -> Path:
    layout.run_info.write_text(json.dumps(info, indent=2, ensure_ascii=False, default=_plain) + "\n")
    return layout.run_info


def _plain(value):
    """numpy scalars (and anything else odd) as plain JSON values."""
    return value.item() if hasattr(value, "item") else str(value)


def load_info(folder: Path) -> dict:
    path = Path(folder) / RUN_INFO
    if not path.is_file():
        raise CctkError(f"{folder} is not a cctk session folder (no {RUN_INFO})")
    return json.loads(path.read_text())


def record_from_info(info: dict) -> RunRecord:
    """The run record that run_info.json was written from."""
    config = Config(info["model"]["key"], info["profile"], Recipe(**info["recipe"]), tuple(info["seeds"]["values"]),
                    info.get("holdout"), seeds_drawn=info["seeds"]["drawn_fresh"],
                    profile_requested=info.get("profile_requested", info["profile"]), curves=bool(info.get("curves")),
                    protocol=info.get("protocol", "v2"), parts=tuple(info.get("parts", PARTS)))
    ml = info.get("mlflow", {})
    facts = RunFacts(info["session"], ml.get("tracking_uri"), ml.get("experiment_id"), ml.get("run_id"),
                     info.get("device", ""), info.get("seconds"), info.get("hardware") or {},
                     info.get("software") or {})
    training = {key: TrainRecord.from_json(data) for key, data in info.get("training", {}).items()}
    return RunRecord(config, facts, training)


# --- Back from a folder: rebuild the results (no model), copy the inputs of a re-render. ---

@dataclass(frozen=True)
class Rebuilt:
    results: Results
    tables: dict[str, pd.DataFrame]
    record: RunRecord


def rebuild(folder: Path) -> Rebuilt:
    """Results, tables and run record of a session from its folder alone (no model).

    Targets, split and exclusions are redrawn from the recorded seed; tables are recomputed. A run of
    some parts (``--parts``) needs the measurements of those parts' models only.
    """
    layout = Layout(Path(folder))
    record = record_from_info(load_info(layout.folder))
    parts = record.config.parts
    results = Results(build_study_inputs(record.config.seed, record.config.holdout),
                      read_measurements(layout, require=models_for(parts)), dict(record.training),
                      read_curves(layout), parts)
    return Rebuilt(results, compute_tables(results), record)


@dataclass(frozen=True)
class RebuiltV1:
    results: v1_experiment.Results
    tables: dict[str, pd.DataFrame]
    record: RunRecord


def rebuild_v1(folder: Path) -> RebuiltV1:
    """The same for a protocol v1 session: draws redrawn from the seed and repeats, tables recomputed."""
    layout = Layout(Path(folder), "v1")
    record = record_from_info(load_info(layout.folder))
    measurements = {}
    for key in (v1_experiment.BEFORE, v1_experiment.AFTER):
        if not layout.measurement(key).is_file():
            raise CctkError(f"{layout.folder} has no measurement of the {model_name(key)} model")
        measurements[key] = read_measurement(layout.measurement(key))
    draws = v1_facts.draw(record.config.seed, record.config.recipe.repeats)
    results = v1_experiment.Results(draws, measurements, read_training(layout, v1_experiment.AFTER))
    return RebuiltV1(results, v1_experiment.compute_tables(results), record)


def protocol(folder: Path) -> str:
    """``v1`` or ``v2``: the protocol a session folder was run under (v2 before protocols existed)."""
    return load_info(folder).get("protocol", "v2")


def copy_inputs(source: Layout, root: Path) -> Layout:
    """A new session folder under ``root`` holding what a re-render needs: run_info, the draws, the
    measurements and the training records."""
    target = Layout(Path(root) / load_info(source.folder)["session"], source.protocol)
    inputs = [source.run_info, source.targets, source.curves, source.corpus,
              *(source.folder / "measurements").glob("*.csv"),
              *(source.folder / "training").glob("*.json")]
    for path in inputs:
        if path.is_file():
            (target.folder / path.relative_to(source.folder)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target.folder / path.relative_to(source.folder))
    return target


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

