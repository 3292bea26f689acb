"""``cctk sweep``: a grid of pipelines over models, seeds and recipe values, as one MLflow sweep run.

The sweep is a run tagged ``cctk.kind=sweep`` with the grid as parameters; every cell is an ordinary
pipeline run nested under it and tagged ``cctk.sweep`` (the sweep's id) and ``cctk.cell`` (the cell's
key), so the UI shows sweep > pipeline > arm. Cells run one after another in this process
(``local``) or as Ray tasks (``ray``). A cell is run by a function the CLI hands in (``run_cell``),
so this module never imports the pipeline.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ..core.config import parse_set, seeds_or_count
from ..core.errors import CctkError
from ..core.lm.models import check_available, model_config
from ..manuals import registry
from ..store import tracking

EXECUTORS = ("local", "ray")


def cell_parts(text: str | None) -> tuple[str, ...]:
    """The parts every cell runs, as the default manual (what a cell runs) reads ``--parts``; None or empty: all."""
    manual = registry.default()
    return manual.parts(manual.options(parts=text))


ALL_PARTS = cell_parts(None)


@dataclass(frozen=True)
class Cell:
    """One pipeline of the grid: a model, a seed and recipe overrides."""

    model: str
    seed: int
    overrides: tuple[tuple[str, object], ...] = ()

    @property
    def key(self) -> str:
        """A stable name of the cell, its ``cctk.cell`` tag: ``model|seed=7|learning_rate=0.0003``."""
        return "|".join([self.model, f"seed={self.seed}"] + [f"{k}={v}" for k, v in self.overrides])


@dataclass(frozen=True)
class Grid:
    models: tuple[str, ...]
    seeds: tuple[int, ...]
    sets: tuple[tuple[str, tuple], ...]  # recipe value name -> the values it takes
    profile: str
    parts: tuple[str, ...] = ALL_PARTS  # the parts every cell runs (``--parts``)

    def cells(self) -> list[Cell]:
        names = [name for name, _ in self.sets]
        combos = itertools.product(*(values for _, values in self.sets)) if self.sets else [()]
        return [
            Cell(model, seed, tuple(zip(names, combo, strict=True)))
            for combo in combos
            for model in self.models
            for seed in self.seeds
        ]

    def as_params(self) -> dict:
        return {
            "models": ",".join(self.models),
            "seeds": ",".join(map(str, self.seeds)),
            "profile": self.profile,
            "set": json.dumps({name: list(values) for name, values in self.sets}),
            "cells": len(self.cells()),
            "parts": ",".join(self.parts),
        }

    @classmethod
    def from_params(cls, params: dict) -> Grid:
        sets = tuple((name, tuple(values)) for name, values in json.loads(params.get("set") or "{}").items())
        return cls(
            tuple(params["models"].split(",")),
            tuple(int(s) for s in params["seeds"].split(",")),
            sets,
            params["profile"],
            cell_parts(params.get("parts")),
        )  # a sweep from before --parts: all


def parse_grid(
    models: str,
    seeds: str,
    sets: tuple[str, ...] = (),
    profile: str = "auto",
    device: str = "cpu",
    parts: str | None = None,
) -> Grid:
    """The grid of ``--models A,B --seeds N|S1,S2 --set NAME=V1,V2 ... [--parts A,C]``, every cell checked
    before any work.

    ``--seeds N`` (one number) draws N fresh seeds; a comma-separated list gives the seeds themselves.
    """
    names = tuple(m.strip() for m in models.split(",") if m.strip())
    if not names:
        raise CctkError("--models needs at least one model")
    for name in names:  # every model's files and configuration, before any cell starts
        check_available(name)
        model_config(name)
    grid = Grid(names, seeds_or_count(seeds), tuple(parse_set(text) for text in sets), profile, cell_parts(parts))
    for cell in grid.cells():  # every combination is a valid recipe
        registry.make_config(cell.model, profile, (cell.seed,), device=device, parts=grid.parts, **dict(cell.overrides))
    return grid


def absolute_store(store: tracking.Store) -> str:
    """The store's URI as every worker can use it: an absolute SQLite path, waiting for a busy database.

    SQLite takes one writer at a time; a second writer waits up to ``timeout`` seconds for the lock
    (Python's default is 5 s, too short for cells that log at once), so concurrent cells all complete.
    """
    uri = store.uri
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        uri = "sqlite:///" + str(Path(uri.removeprefix("sqlite:///")).resolve())
    if uri.startswith("sqlite:") and "timeout=" not in uri:
        uri += ("&" if "?" in uri else "?") + "timeout=120"
    return uri


@dataclass(frozen=True)
class Sweep:
    run_id: str | None  # None until ``execute`` opens a new sweep's run
    grid: Grid
    out: Path
    executor: str
    address: str | None
    tracking_uri: str
    figures: bool = True


def open_sweep(
    store: tracking.Store, grid: Grid, out: Path, executor: str, address: str | None, figures: bool = True
) -> Sweep:
    """A new sweep (its MLflow run is opened by ``execute``, which ends it)."""
    if executor not in EXECUTORS:
        raise CctkError(f"unknown executor {executor!r}; choose one of {', '.join(EXECUTORS)}")
    return Sweep(None, grid, Path(out).resolve(), executor, address, absolute_store(store), figures)


def _describe(run: tracking.LiveRun, sweep: Sweep) -> None:
    """A new sweep's run: the grid as parameters, a one-line description."""
    grid = sweep.grid
    run.params(
        {
            **grid.as_params(),
            "out": str(sweep.out),
            "executor": sweep.executor,
            "address": sweep.address or "",
            "figures": sweep.figures,
        }
    )
    run.note(
        f"cctk sweep: {len(grid.cells())} pipelines over models {', '.join(grid.models)}, seeds "
        f"{', '.join(map(str, grid.seeds))}"
        + (f", recipe values {dict(grid.sets)}" if grid.sets else "")
        + (f", parts {','.join(grid.parts)}" if grid.parts != ALL_PARTS else "")
    )


def reopen_sweep(store: tracking.Store, sweep_id: str) -> Sweep:
    """An interrupted sweep, read back (``execute`` sets its run RUNNING again and ends it)."""
    run = store.get(sweep_id)
    if run.tags.get(tracking.KIND) != "sweep":
        raise CctkError(
            f"MLflow run {sweep_id} is not a cctk sweep (tag {tracking.KIND} is {run.tags.get(tracking.KIND)!r})"
        )
    p = run.params
    return Sweep(
        sweep_id,
        Grid.from_params(p),
        Path(p["out"]),
        p["executor"],
        p.get("address") or None,
        absolute_store(store),
        p.get("figures", "True") == "True",
    )


def cell_runs(store: tracking.Store, sweep_id: str) -> dict[str, tracking.TrackedRun]:
    """The pipeline run of every cell started so far, by cell key (the latest, if a cell ran twice)."""
    runs = store.search([store.get(sweep_id).experiment_id], f"tags.`{tracking.SWEEP}` = '{sweep_id}'")
    return {r.tags[tracking.CELL]: r for r in runs if tracking.CELL in r.tags}


# run_cell(cell, profile, out, tracking_uri, sweep_id, resume_id, figures, parts) -> the cell's run id
RunCell = Callable[..., str]


@dataclass(frozen=True)
class PerCell:
    """What one Ray task asks of the cluster: CPUs, and GPUs (Ray hides every GPU from a task that asks for
    none, so a cell on a GPU machine would run the CPU recipe)."""

    cpus: float = 1.0
    gpus: float = 0.0


def per_cell(cpus: float = 1.0, gpus: float | None = None) -> PerCell:
    """``gpus`` None: one GPU a cell where this machine has a CUDA device, none elsewhere."""
    if gpus is None:
        import torch

        gpus = 1.0 if torch.cuda.is_available() else 0.0
    if cpus <= 0 or gpus < 0:
        raise CctkError(f"--cpus-per-cell must be > 0 and --gpus-per-cell >= 0, got {cpus} and {gpus}")
    return PerCell(cpus, gpus)


def execute(store: tracking.Store, sweep: Sweep, run_cell: RunCell, echo=print, per_cell: PerCell = PerCell()) -> dict:
    """Open the sweep's run (a new one, or the interrupted one again), run every cell not yet finished
    (interrupted ones are resumed) and end the run here: FINISHED, FAILED or KILLED (Ctrl-C, SIGTERM).
    Returns cell key -> run id."""
    tags = {"mlflow.source.name": "cctk sweep"}
    with store.run("sweep", f"sweep {len(sweep.grid.cells())} cells", tags, reopen=sweep.run_id) as run:
        if sweep.run_id is None:
            _describe(run, sweep)
        sweep = replace(sweep, run_id=run.run_id)
        _say_plan(sweep, echo)
        started = cell_runs(store, sweep.run_id)
        jobs = []
        for cell in sweep.grid.cells():
            previous = started.get(cell.key)
            if previous is not None and previous.status == "FINISHED":
                echo(f"cell {cell.key}: finished before, run {previous.run_id}")
                continue
            jobs.append((cell, previous.run_id if previous is not None else None))
        finished = (_ray if sweep.executor == "ray" else _local)(sweep, jobs, run_cell, echo, per_cell)
    echo(f"sweep {sweep.run_id} finished; compare it with: cctk compare --sweep {sweep.run_id} --out DIR")
    return {**{k: r.run_id for k, r in started.items() if r.status == "FINISHED"}, **finished}


def _say_plan(sweep: Sweep, echo) -> None:
    cells = sweep.grid.cells()
    echo(f"sweep {sweep.run_id}: {len(cells)} cells ({sweep.executor}), outputs in {sweep.out}")
    echo(
        f"seeds {', '.join(map(str, sweep.grid.seeds))}; profile {sweep.grid.profile}"
        + (f"; parts {','.join(sweep.grid.parts)}" if sweep.grid.parts != ALL_PARTS else "")
    )


def _local(sweep: Sweep, jobs, run_cell: RunCell, echo, per_cell: PerCell) -> dict:
    finished = {}
    for cell, resume_id in jobs:
        run_id = run_cell(
            cell,
            sweep.grid.profile,
            str(sweep.out),
            sweep.tracking_uri,
            sweep.run_id,
            resume_id,
            sweep.figures,
            sweep.grid.parts,
        )
        finished[cell.key] = run_id
        echo(f"cell {cell.key}: finished, run {run_id}")
    return finished


def _ray(sweep: Sweep, jobs, run_cell: RunCell, echo, per_cell: PerCell) -> dict:
    ray = ray_module()
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(
            address=sweep.address or None,
            include_dashboard=False,
            log_to_driver=False,
            runtime_env={"env_vars": {"MLFLOW_TRACKING_URI": sweep.tracking_uri}},
        )
    task = ray.remote(num_cpus=per_cell.cpus, num_gpus=per_cell.gpus)(run_cell)
    pending = {
        task.remote(
            cell,
            sweep.grid.profile,
            str(sweep.out),
            sweep.tracking_uri,
            sweep.run_id,
            resume_id,
            sweep.figures,
            sweep.grid.parts,
        ): cell
        for cell, resume_id in jobs
    }
    finished = {}
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            cell = pending.pop(ready[0])
            finished[cell.key] = ray.get(ready[0])
            echo(f"cell {cell.key}: finished, run {finished[cell.key]}")
    finally:
        if started_here:
            ray.shutdown()
    return finished


def ray_module():
    """Ray, or a one-line error saying how to install it (it is an optional extra)."""
    try:
        import ray
    except ImportError:
        raise CctkError("--executor ray needs Ray, an optional extra: pip install -e '.[ray]'") from None
    return ray


def check_executor(executor: str, address: str | None) -> None:
    """Fail before any work on an unknown executor, or Ray missing."""
    if executor not in EXECUTORS:
        raise CctkError(f"unknown executor {executor!r}; choose one of {', '.join(EXECUTORS)}")
    if executor == "ray":
        ray_module()
    elif address:
        raise CctkError("--address is for --executor ray")
