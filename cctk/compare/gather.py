"""The finished pipelines to compare, pulled from MLflow: their session folders, rebuilt into results."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from .. import results as run_results
from ..core.errors import CctkError
from ..manuals.manual import Parts
from ..manuals.pooled import PooledRun
from ..store import session, tracking


def run_ids(
    store: tracking.Store, sweep: tracking.TrackedRun | None = None, runs: list[str] | None = None
) -> list[str]:
    """The pipeline runs of ``--sweep ID`` (``sweep``, its run: its finished cells) or of ``--runs ID1,ID2,...``
    (each once)."""
    if (sweep is None) == (not runs):
        raise CctkError("cctk compare needs --sweep ID or --runs ID1,ID2,... (one of them)")
    if runs:
        for run_id in runs:
            if store.pipeline(run_id).status != "FINISHED":
                raise CctkError(f"pipeline run {run_id} is not finished; resume it first (cctk run --resume)")
        return runs
    assert sweep is not None  # one of the two, checked above
    return [r.run_id for r in run_results.finished_cells(store, sweep)]


def gather(ids: list[str], tracking_name: str | None = None, cache: Path | None = None) -> list[PooledRun[Any]]:
    """Each run's session folder (downloaded once into the cache) rebuilt into results and tables. Each
    carries the recipe it logged (run_info.json, the same values as its ``recipe.<name>`` parameters):
    compare groups runs by it, never by a cell's name."""
    gathered = []
    for run_id in ids:
        back = session.rebuild(run_results.download(run_id, tracking_name, cache))
        config = back.info.config
        gathered.append(
            PooledRun.of(
                run_id,
                config.model,
                config.seed,
                back.manual,
                back.results,
                asdict(config.recipe),
                tables=back.tables,
                parts=back.manual.parts(config.options) if isinstance(back.manual, Parts) else (),
            )
        )
    return gathered
