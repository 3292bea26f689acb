"""Everything a run leaves in its session folder, written from a ``Results``; and the way back.

``write_all`` writes the 25 figures, 11 tables, workbook, run_info.json, run report, HTML report
and zip; ``rebuild`` reconstructs the results from run_info.json and the measurement CSVs alone.
"""
from __future__ import annotations

import json
import zipfile
from functools import partial
from pathlib import Path

import pandas as pd

from ..config import Config, Recipe
from ..errors import CctkError
from ..experiments import Results
from ..lineage import MODEL_KEYS, build_study_inputs
from ..names import file_stem, model_name
from ..scoring import COLUMNS
from . import catalog, html_report, info as run_info, render, run_report
from .tables import write_tables

RUN_INFO = "run_info.json"
FORMATS = ("png", "pdf", "eps")


def model_heatmaps(results: Results, key: str, folder: Path) -> list[Path]:
    """The heatmaps of one model (own target; m_random also on the correct sum), PNG/PDF/EPS.

    ``folder`` is the session's ``figures/``: each heatmap goes to its numbered folder there,
    where ``write_all(..., reuse_heatmaps=True)`` finds it again.
    """
    paths = []
    for figure in catalog.heatmap_keys(key):
        spec = catalog.heatmap_spec(results, figure)
        paths += catalog.draw_and_save(spec, Path(folder) / spec.folder)
    return paths


def write_all(results: Results, tables: dict[str, pd.DataFrame], config: Config, run: dict, folder: Path,
              reuse_heatmaps: bool = False) -> None:
    """Write every output of a run into ``folder`` (the measurement CSVs are already there).

    ``run``: session, tracking_uri, experiment_id, run_id, seconds, device (and, when re-rendering,
    the original run's hardware and software). ``reuse_heatmaps`` keeps heatmaps already drawn
    by ``model_heatmaps`` during the run instead of drawing them again.
    """
    from ..pipeline import headline  # the pipeline imports this package

    folder = Path(folder)
    write_tables(tables, folder, run["session"])  # first: the cheapest and most precious
    facts = run_info.run_info(results, config, run, headline(results))
    run_info.write(facts, folder / RUN_INFO)
    specs = catalog.specs(results, tables, config.model)
    job = partial(_figure, root=folder / "figures", reuse=reuse_heatmaps)
    uris = render.run_all(job, specs)
    run_report.write(facts, tables["table11"], catalog.losses(results),
                     [model_name(k) for k in catalog.MAIN_SEQUENCE], folder)
    page = html_report.render(facts, tables, list(zip(specs, uris)))
    (folder / "report.html").write_text(page, encoding="utf-8")
    write_zip(folder, run["session"])


def _figure(spec: catalog.Spec, root: Path, reuse: bool) -> str:
    """Draw and save one figure (unless a drawn heatmap may be reused); its PNG as a data URI."""
    out = root / spec.folder
    files = [out / f"{spec.stem}.{ext}" for ext in FORMATS]
    if not (reuse and spec.key.startswith("heatmap:") and all(p.is_file() for p in files)):
        catalog.draw_and_save(spec, out)
    return html_report.data_uri(files[0])


def write_zip(folder: Path, session: str) -> Path:
    """``<session>.zip`` inside the folder: every file of the session (but the zip), under ``<session>/``."""
    path = folder / f"{session}.zip"
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p != path)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        for file in files:
            archive.write(file, f"{session}/{file.relative_to(folder).as_posix()}")
    return path


def measurement_path(folder: Path, key: str) -> Path:
    return Path(folder) / "measurements" / f"{file_stem(model_name(key))}.csv"


def read_measurement(path: Path) -> pd.DataFrame:
    """A measurement CSV, floats read back exactly (round trip), columns as cctk.scoring.COLUMNS."""
    table = pd.read_csv(path, float_precision="round_trip")
    missing = set(COLUMNS) - set(table.columns)
    if missing:
        raise CctkError(f"{path} is not a measurement table (missing {', '.join(sorted(missing))})")
    return table[COLUMNS]


def rebuild(folder: Path) -> tuple[Results, dict[str, pd.DataFrame], Config, dict]:
    """Results, tables, config and run facts of a session from its folder alone (no model).

    Targets, split and exclusions are redrawn from the recorded seed; tables are recomputed.
    """
    from ..pipeline import compute_tables  # the pipeline imports this package

    folder = Path(folder)
    facts = load_info(folder)
    config = Config(facts["model"]["key"], facts["profile"], Recipe(**facts["recipe"]),
                    tuple(facts["seeds"]["values"]), facts["holdout"], seeds_drawn=facts["seeds"]["drawn_fresh"])
    measurements = {}
    for key in MODEL_KEYS:
        path = measurement_path(folder, key)
        if not path.is_file():
            raise CctkError(f"{folder} has no measurement of the {model_name(key)} model ({path.name})")
        measurements[key] = read_measurement(path)
    training = {key: {k: v for k, v in record.items() if k not in ("model", "parent")}
                for key, record in facts["training"].items()}
    results = Results(build_study_inputs(config.seed, config.holdout), measurements, training)
    run = {"session": facts["session"], "seconds": facts.get("seconds"), "device": facts.get("device"),
           "hardware": facts.get("hardware"), "software": facts.get("software"), **facts.get("mlflow", {})}
    return results, compute_tables(results), config, run


def load_info(folder: Path) -> dict:
    path = Path(folder) / RUN_INFO
    if not path.is_file():
        raise CctkError(f"{folder} is not a cctk session folder (no {RUN_INFO})")
    return json.loads(path.read_text())
