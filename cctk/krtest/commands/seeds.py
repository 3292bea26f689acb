"""``cctk krtest study --seeds ...``: the study once per seed, and what holds across the seeds.

One sweep run (``cctk.kind=krtest-sweep``) with one nested study per seed (each the parent of its five
arms: sweep > study > arm in the UI). Its folder, created exclusively, holds the studies' session
folders and the across-seeds tables of ``cctk.krtest.commands.compare`` (``kr_runs``, ``kr_pooled``: mean accuracy
over seeds with a t interval and the pooled exact interval, ``kr_paired``: exact McNemar tests of
every two arms, per seed and pooled), which are the sweep run's artifacts and metrics.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from ...store import tracking
from ...store.session import new_folder
from .. import ARMS, SWEEP_RUN
from . import compare as kr, study as study_module
from .jobs import open_track


@dataclass
class SweepOutcome:
    folder: Path
    run_id: str = ""
    studies: list[study_module.StudyOutcome] = field(default_factory=list)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    seconds: float = 0.0


def run(
    config: study_module.StudyConfig,
    seeds: tuple[int, ...],
    out_root: Path = Path("outputs/krtest"),
    tracking_name: str | None = None,
    echo: Callable[[str], None] = print,
) -> SweepOutcome:
    """Every check first (each seed's configuration), then one study per seed, then the tables across seeds."""
    started = time.perf_counter()
    configs = [replace(config, seed=seed) for seed in seeds]
    for one in configs:
        one.check()
    track = open_track(tracking_name)
    outcome = SweepOutcome(new_folder(Path(out_root), f"{study_module.model_label(config.model)}_seeds"))
    tags = {tracking.SESSION: outcome.folder.name, "mlflow.source.name": "cctk krtest study"}
    with track.run(outcome.folder.name, tags, kind=SWEEP_RUN, attach=True) as sweep:
        outcome.run_id = sweep.run_id
        sweep.params({k: v for k, v in config.params().items() if k != "seed"} | {"seeds": ",".join(map(str, seeds))})
        echo(f"KR-Test study over seeds {', '.join(map(str, seeds))}: sweep run {sweep.run_id}, {outcome.folder}")
        for one in configs:
            outcome.studies.append(study_module.run(one, outcome.folder, tracking_name, echo, parent=sweep))
        outcome.tables = kr.write(arms(outcome.studies, config.model), outcome.folder)
        outcome.seconds = time.perf_counter() - started
        _log(sweep, outcome)
    echo(f"across seeds {', '.join(map(str, seeds))} (mean [t 95% interval]; pooled items [exact 95% interval]):")
    for _, row in outcome.tables["kr_pooled"].iterrows():
        echo(
            f"{row['arm']:<20} {100 * row['mean_accuracy']:5.1f}% [{100 * row['t_lo']:.1f}-{100 * row['t_hi']:.1f}]"
            f"; {row['correct']}/{row['items']} = {100 * row['pooled_accuracy']:.1f}% "
            f"[{100 * row['lo']:.1f}-{100 * row['hi']:.1f}]"
        )
    echo(f"sweep {outcome.run_id} finished in {outcome.seconds / 60:.1f} min: {outcome.folder}")
    echo(track.store.link(outcome.run_id))
    return outcome


def arms(studies: list[study_module.StudyOutcome], model: str) -> list[kr.KrArm]:
    """Every arm of every study, as ``cctk compare`` reads them back from MLflow."""
    return [
        kr.KrArm(s.run_ids[key], ARMS[key], model, s.seed, s.run_id, s.tables[key]) for s in studies for key in ARMS
    ]


def _log(sweep: tracking.LiveRun, outcome: SweepOutcome) -> None:
    metrics = {"sweep_seconds": outcome.seconds}
    for _, row in outcome.tables["kr_pooled"].iterrows():
        key = next(k for k, name in ARMS.items() if name == row["arm"])
        metrics.update({f"{key}.{k}": row[k] for k in ("mean_accuracy", "pooled_accuracy", "lo", "hi")})
    sweep.metrics({k: v for k, v in metrics.items() if v == v})  # a t interval of one seed is nan: not logged
    sweep.files(outcome.folder / "tables", "tables")
    sweep.files(outcome.folder / "compare.html")
