"""``cctk sweep``: a grid of pipelines over models, seeds and recipe values, as one MLflow sweep run.

The sweep is a run tagged ``cctk.kind=sweep`` with the grid as parameters; every cell is an ordinary
pipeline run nested under it and tagged ``cctk.sweep`` (the sweep's id) and ``cctk.cell`` (the cell's
key), so the UI shows sweep > pipeline > arm. Cells run one after another in this process
(``local``) or as Ray tasks (``ray``), on a local instance or a cluster (``--address``). A cell has one
pipeline run, whatever happens to the processes that run it: an attempt that Ray makes again (its worker
or node was lost) or a resumed sweep continues the cell's own run (``run_attempt``), and a run that no
process runs any more when the sweep ends is ended (``settle``). A cell is run by a function the CLI hands
in (``run_cell``), so this module never imports the pipeline.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..core import errors
from ..core.config import parse_set, seeds_or_count
from ..core.errors import CctkError
from ..core.lm.device import GPU_SHARE, unusable_gpu
from ..core.lm.models import check_available, model_config
from ..manuals import configure, registry
from ..manuals.manual import ManualOptions, RecipeValue
from ..store import tracking

if TYPE_CHECKING:
    from ray import ObjectRef

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Cell:
    """One pipeline of the grid: a model, a seed and recipe overrides."""

    model: str
    seed: int
    overrides: tuple[tuple[str, RecipeValue], ...] = ()

    @property
    def key(self) -> str:
        """A stable name of the cell, its ``cctk.cell`` tag: ``model|seed=7|learning_rate=0.0003``."""
        return "|".join([self.model, f"seed={self.seed}"] + [f"{k}={v}" for k, v in self.overrides])


@dataclass(frozen=True)
class Grid:
    models: tuple[str, ...]
    seeds: tuple[int, ...]
    sets: tuple[tuple[str, tuple[RecipeValue, ...]], ...]  # recipe value name -> the values it takes
    profile: str
    protocol: str  # the manual every cell runs (``--protocol``)
    options: ManualOptions  # its options, every cell's (``--parts`` ...)

    def cells(self) -> list[Cell]:
        names = [name for name, _ in self.sets]
        combos = itertools.product(*(values for _, values in self.sets)) if self.sets else [()]
        return [
            Cell(model, seed, tuple(zip(names, combo, strict=True)))
            for combo in combos
            for model in self.models
            for seed in self.seeds
        ]

    def as_params(self) -> dict[str, str | int | float]:
        return {
            "models": ",".join(self.models),
            "seeds": ",".join(map(str, self.seeds)),
            "profile": self.profile,
            "set": json.dumps({name: list(values) for name, values in self.sets}),
            "cells": len(self.cells()),
            "protocol": self.protocol,
            **self.options.params(),
        }

    @property
    def options_words(self) -> str:
        """The manual and options of every cell as ``cctk run`` takes them (nothing for the defaults)."""
        protocol = ["--protocol", self.protocol] if self.protocol != registry.DEFAULT else []
        return " ".join(protocol + self.options.words())

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> Grid:
        sets = tuple((name, tuple(values)) for name, values in json.loads(params.get("set") or "{}").items())
        manual = registry.get(params.get("protocol"))  # a sweep from before --protocol: the legacy manual's cells
        return cls(
            tuple(params["models"].split(",")),
            tuple(int(s) for s in params["seeds"].split(",")),
            sets,
            params["profile"],
            manual.spec.name,
            manual.spec.options_type.from_params(params),
        )


def parse_grid(
    models: str,
    seeds: str,
    sets: tuple[str, ...] = (),
    profile: str = "auto",
    device: str = "cpu",
    protocol: str = registry.DEFAULT,
    **options: object,
) -> Grid:
    """The grid of ``--models A,B --seeds N|S1,S2 --set NAME=V1,V2 ... [--protocol P] [its options]``, every cell
    checked before any work.

    ``--seeds N`` (one number) draws N fresh seeds; a comma-separated list gives the seeds themselves.
    """
    names = tuple(m.strip() for m in models.split(",") if m.strip())
    if not names:
        raise CctkError("--models needs at least one model")
    if len(set(names)) != len(names):  # its cells would be one cell, run once: said, as a repeated seed is
        raise CctkError(f"--models repeats a model: {models}")
    if lost := unusable_gpu():  # a GPU this torch cannot use: one line now, not a failed cell (or the CPU) each
        raise CctkError(lost)
    for name in names:  # every model's files and configuration, before any cell starts
        check_available(name)
        model_config(name)
    chosen = configure.options(registry.get(protocol).spec, **options)
    parsed = tuple(parse_set(text) for text in sets)
    twice = [name for i, (name, _) in enumerate(parsed) if name in {n for n, _ in parsed[:i]}]
    if twice:  # the second would replace the first without a word
        raise CctkError(f"--set {twice[0]} is given twice: give its values once, --set {twice[0]}=V1,V2")
    grid = Grid(names, seeds_or_count(seeds), parsed, profile, protocol, chosen)
    for cell in grid.cells():  # every combination is a valid recipe
        configure.make_config(
            cell.model, profile, (cell.seed,), device=device, protocol=protocol, **dict(cell.overrides)
        )
    return grid


def absolute_store(store: tracking.Store) -> str:
    """The store's URI as every worker can use it: an absolute SQLite path, waiting for a busy database.

    SQLite takes one writer at a time; a second writer waits up to ``tracking.BUSY_TIMEOUT`` seconds for the
    lock (``tracking.waiting``; MLflow's own sessions wait 20 s, too short for cells that log at once), so concurrent
    cells all complete.
    A database's password stays in it: the cells connect with it (a Ray worker through its environment),
    and every line that names the store shows it redacted (``tracking.redact``).
    """
    uri = store.config.tracking_uri
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        uri = "sqlite:///" + str(Path(uri.removeprefix("sqlite:///")).resolve())
    return tracking.waiting(uri)


RETRIES = 3  # Ray's own default for a task whose worker or node was lost: tried again up to 3 times
CONNECT_TIMEOUT = 20.0  # seconds a Ray cluster at --address has to answer before the sweep gives up
# and then seconds Ray has to connect: its handshake took over 20 s on two loaded cores (a CI run's slow tests)
HANDSHAKE_TIMEOUT = 60.0
SCRATCH = "cctk-sweeps"  # a cluster cell's folder: <the worker's temporary folder>/cctk-sweeps/<sweep>/<cell>/


@dataclass(frozen=True)
class Sweep:
    run_id: str | None  # None until ``execute`` opens a new sweep's run
    grid: Grid
    out: Path | None  # None on a cluster: each cell writes in its worker's temporary folder, and logs it all
    executor: str
    address: str | None
    tracking_uri: str
    figures: bool = True
    retries: int = RETRIES  # Ray: attempts after the first, for a cell whose worker or node was lost


def open_sweep(
    store: tracking.Store,
    grid: Grid,
    out: Path,
    executor: str,
    address: str | None,
    figures: bool = True,
    retries: int = RETRIES,
) -> Sweep:
    """A new sweep (its MLflow run is opened by ``execute``, which ends it)."""
    if executor not in EXECUTORS:
        raise CctkError(f"unknown executor {executor!r}; choose one of {', '.join(EXECUTORS)}")
    where = None if address else Path(out).resolve()
    return Sweep(None, grid, where, executor, address, absolute_store(store), figures, check_retries(retries))


def check_retries(retries: int) -> int:
    if retries < 0:
        raise CctkError(f"--retries takes 0 or more attempts after a cell's first, got {retries}")
    return retries


def _describe(run: tracking.LiveRun, sweep: Sweep) -> None:
    """A new sweep's run: the grid as parameters, a one-line description."""
    grid = sweep.grid
    run.params(
        {
            **grid.as_params(),
            "out": str(sweep.out or ""),  # "": a cluster's cells keep their files in MLflow only
            "executor": sweep.executor,
            "address": sweep.address or "",
            "figures": sweep.figures,
            "retries": sweep.retries,
        }
    )
    run.note(
        f"cctk sweep: {len(grid.cells())} pipelines over models {_few(grid.models)}, seeds {_few(grid.seeds)}"
        + (f", recipe values {dict(grid.sets)}" if grid.sets else "")
        + (f", cells run with {grid.options_words}" if grid.options_words else "")
    )


def _few(values: Sequence[object], shown: int = 10) -> str:
    """``values`` for a run's description, the first ``shown`` of a longer list and how many in all (MLflow cuts a
    description past 8,000 characters with a warning; the parameters hold every one)."""
    words = [str(v) for v in values]
    return ", ".join(words) if len(words) <= shown else f"{', '.join(words[:shown])}, ... ({len(words)} in all)"


def reopen_sweep(store: tracking.Store, sweep_id: str, address: str | None = None, retries: int | None = None) -> Sweep:
    """An interrupted sweep, read back (``execute`` sets its run RUNNING again and ends it). ``address``:
    the cluster it goes on with, where that differs from the one it started on (a head started again)."""
    run = store.sweep(sweep_id)
    p = run.params
    address = address or p.get("address") or None
    return Sweep(
        sweep_id,
        Grid.from_params(p),
        None if address or not p.get("out") else Path(p["out"]),
        p["executor"],
        address,
        absolute_store(store),
        p.get("figures", "True") == "True",
        check_retries(retries if retries is not None else int(p.get("retries", RETRIES))),
    )


def cell_runs(store: tracking.Store, sweep_id: str) -> dict[str, tracking.TrackedRun]:
    """The pipeline run of every cell started so far, by cell key: its FINISHED one, else its latest (a
    cell has one run; an attempt that could not be resumed leaves a KILLED one beside it)."""
    found: dict[str, tracking.TrackedRun] = {}
    for run in store.cells(store.get(sweep_id)):  # the latest first (MLflow orders a search by start time)
        key = run.tags[tracking.CELL]
        if key not in found or (run.status == "FINISHED" and found[key].status != "FINISHED"):
            found[key] = run
    return found


# run_cell(cell, profile, out, tracking_uri, sweep_id, resume_id, figures, protocol, options) -> the cell's run id
RunCell = Callable[..., str]
Echo = Callable[[str], None]  # the console's lines


@dataclass(frozen=True)
class CellJob:
    """What one attempt at a cell is handed (plain values: a Ray task pickles them)."""

    cell: Cell
    profile: str
    out: str | None  # None: the worker's temporary folder (a cluster)
    tracking_uri: str
    sweep_id: str
    figures: bool
    protocol: str  # the manual the cell runs
    options: ManualOptions  # and its options


@dataclass(frozen=True)
class CellEnd:
    """How a cell ended: its run id, or the one line it failed with."""

    key: str
    run_id: str | None = None
    error: str | None = None


@dataclass
class Pace:
    """The cells this sweep runs (``total``: those not finished before it), how many have ended and since when:
    what is left at the pace so far (ended cells per second, one at a time here or several at once on Ray)."""

    total: int
    started: float  # time.monotonic() when the first cell was handed out
    ended: int = 0

    def tick(self, now: float) -> str:
        """One more cell ended at ``now``: the words that follow its line."""
        self.ended += 1
        spent = now - self.started
        said = f"{self.ended} of {self.total} cells ended in {_minutes(spent)}"
        left = self.total - self.ended
        if left == 0:
            return f"({said})"
        return f"({said}; the other {left} about {_minutes(spent / self.ended * left)} at this pace)"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def run_attempt(run_cell: RunCell, job: CellJob) -> str:
    """One attempt at a cell, wherever it runs (this process, a Ray worker, a retry on another node): the
    cell's earlier run, if any, is continued as ``cctk run --resume`` continues one (every finished arm
    kept), never a second one opened; returns the cell's run id."""
    store = tracking.connect(job.tracking_uri)
    earlier = cell_runs(store, job.sweep_id).get(job.cell.key)
    if earlier is not None and earlier.status == "FINISHED":
        return earlier.run_id  # finished, but the word never reached the driver (its node was lost after)
    resume_id = _resumable(store, earlier)
    out = job.out or str(scratch(job.sweep_id, job.cell))
    with gpu_share():
        run_id = run_cell(
            job.cell,
            job.profile,
            out,
            job.tracking_uri,
            job.sweep_id,
            resume_id,
            job.figures,
            job.protocol,
            job.options,
        )
    if job.out is None:  # everything is in MLflow: the worker's disk keeps nothing of it
        shutil.rmtree(out, ignore_errors=True)
    return run_id


def scratch(sweep_id: str, cell: Cell) -> Path:
    """Where a cluster cell keeps its session folder on a worker's disk: a folder of the cell's own. Cells on
    different machines start sessions of one model in the same second under one name (``new_folder`` keeps
    names apart on one disk only); in a folder shared by the sweep, a cell resumed on another machine would
    take the other cell's files of that name for its own (its measurements and checkpoints, another seed's)."""
    digest = hashlib.sha256(cell.key.encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / SCRATCH / sweep_id / f"cell-{digest}"


def _resumable(store: tracking.Store, earlier: tracking.TrackedRun | None) -> str | None:
    """The id of the cell's earlier run when it can be resumed; one that cannot (its attempt was lost before
    it logged its configuration) is ended KILLED, a tag saying why, and the cell starts a run of its own."""
    if earlier is None:
        return None
    try:
        configure.config_from_params(registry.get(earlier.tags.get(tracking.PROTOCOL)), earlier.params)
    except (KeyError, ValueError, CctkError) as error:
        why = f"not resumable: its attempt was lost before it logged its configuration ({type(error).__name__})"
        end_run(store, earlier, "KILLED", why)
        return None
    attempt = int(earlier.tags.get(tracking.ATTEMPT, "1")) + 1
    tracking.LiveRun(earlier.run_id, store.client).tags({tracking.ATTEMPT: attempt})
    return earlier.run_id


def end_run(store: tracking.Store, run: tracking.TrackedRun, status: str, why: str) -> None:
    """End a run no process runs any more, and its RUNNING children: ``status``, ``why`` as tag ``cctk.error``
    (FAILED) or ``cctk.ended`` (KILLED, FINISHED)."""
    tag = tracking.ERROR if status == "FAILED" else tracking.ENDED
    for stale in [*(c for c in store.children(run) if c.status == "RUNNING"), run]:
        live = tracking.LiveRun(stale.run_id, store.client)
        live.tags({tag: why})
        live.end(status)


@contextmanager
def gpu_share() -> Iterator[None]:
    """Inside a Ray task given part of a GPU (``--gpus-per-cell 0.5``), that share, for the memory plan to
    count only it; Ray itself shows the task only the GPUs it was given (``CUDA_VISIBLE_DEVICES``)."""
    ray = sys.modules.get("ray")
    share = None
    if ray is not None and ray.is_initialized():
        share = ray.get_runtime_context().get_assigned_resources().get("GPU")
    if not share or share >= 1:
        yield
        return
    os.environ[GPU_SHARE] = repr(float(share))
    try:
        yield
    finally:
        del os.environ[GPU_SHARE]  # the worker process may run another cell next


@dataclass(frozen=True)
class PerCell:
    """What one Ray task asks of the cluster: CPUs, and GPUs (Ray hides every GPU from a task that asks for
    none, so a cell on a GPU machine would run the CPU recipe). ``gpus`` None: one where the cluster has a
    GPU, none elsewhere."""

    cpus: float = 1.0
    gpus: float | None = None


def per_cell(cpus: float = 1.0, gpus: float | None = None) -> PerCell:
    """A cell trains on one device: up to one GPU, a fraction sharing one between cells."""
    if cpus <= 0:
        raise CctkError(f"--cpus-per-cell must be > 0, got {cpus}")
    if gpus is not None and not 0 <= gpus <= 1:
        raise CctkError(
            f"--gpus-per-cell must be between 0 and 1 (a cell trains on one GPU; a fraction shares one), got {gpus}"
        )
    return PerCell(cpus, gpus)


def execute(
    store: tracking.Store, sweep: Sweep, run_cell: RunCell, echo: Echo = print, per_cell: PerCell = PerCell()
) -> dict[str, str]:
    """Connect to the cluster (Ray), open the sweep's run (a new one, or the interrupted one again), run every
    cell not yet finished (interrupted ones are resumed), one cell's failure stopping no other, and end the
    run here: FINISHED, FAILED when a cell failed, or KILLED (Ctrl-C, SIGTERM). No cell's run is left
    RUNNING. Returns cell key -> run id of the finished cells."""
    tags = {"mlflow.source.name": "cctk sweep"}
    ends: dict[str, CellEnd] = {}
    opened = None
    try:
        with (
            _connected(sweep) as ray,
            store.run("sweep", f"sweep {len(sweep.grid.cells())} cells", tags, reopen=sweep.run_id) as run,
        ):
            if sweep.run_id is None:
                _describe(run, sweep)
            sweep = replace(sweep, run_id=run.run_id)
            opened = run.run_id
            _say_plan(store, sweep, run, echo)
            started = cell_runs(store, opened)
            jobs = [_job(sweep, cell) for cell in sweep.grid.cells() if not _finished_before(cell, started, echo)]
            pace = Pace(len(jobs), time.monotonic())
            if ray is None:
                _local(jobs, run_cell, _saying(echo, pace), ends)
            else:
                _ray(ray, sweep, jobs, run_cell, _saying(echo, pace), per_cell, ends)
            _raise_failed(ends, len(jobs))
    except tracking.NotEnded as refused:
        if refused.run_id != opened:
            raise
        _end_late(store, refused)
    finally:
        if opened is not None:  # the cells' processes are gone now: what they left RUNNING is ended
            settle(store, opened, ends)
    compare = tracking.on_store(store, f"cctk compare --sweep {opened} --out DIR")  # its store, as the user named it
    echo(f"sweep {opened} finished; compare it with: {compare}")
    echo(store.link(opened))
    before = {k: r.run_id for k, r in started.items() if r.status == "FINISHED"}
    return {**before, **{key: end.run_id for key, end in ends.items() if end.run_id is not None}}


def _end_late(store: tracking.Store, refused: tracking.NotEnded) -> None:
    """The sweep's own run, whose end the store refused (both tries): tried once more now, as the sweep left
    (KILLED when stopped, FAILED when a cell failed, else FINISHED), its tag saying why and what the store said.
    Written, what ended the sweep leaves (a stop, the failed cells), as if the store had taken the first try;
    refused again, ``refused`` leaves, naming the run left RUNNING."""
    cause = refused.leaving
    if cause is None:
        why = "the sweep finished"
    else:
        why = f"the sweep {'stopped' if isinstance(cause, KeyboardInterrupt) else 'failed'} ({one_line(cause)})"
    why += f" and its end was written on a later try (the store refused it twice: {one_line(refused.refused)})"
    try:
        end_run(store, store.get(refused.run_id), refused.status, why)
    except Exception:  # the store refuses still: ``refused`` says which run stays RUNNING
        raise refused from None
    if cause is not None:
        raise cause from None


def _finished_before(cell: Cell, started: dict[str, tracking.TrackedRun], echo: Echo) -> bool:
    previous = started.get(cell.key)
    if previous is not None and previous.status == "FINISHED":
        echo(f"cell {cell.key}: finished before, run {previous.run_id}")
        return True
    return False


def _job(sweep: Sweep, cell: Cell) -> CellJob:
    assert sweep.run_id is not None
    out = None if sweep.out is None else str(sweep.out)
    grid = sweep.grid
    return CellJob(
        cell, grid.profile, out, sweep.tracking_uri, sweep.run_id, sweep.figures, grid.protocol, grid.options
    )


def _raise_failed(ends: dict[str, CellEnd], cells: int) -> None:
    """The sweep fails (after every cell has ended) when a cell failed, naming each one and why."""
    failed = [end for end in ends.values() if end.error is not None]
    if failed:
        raise CctkError(
            f"{len(failed)} of {cells} cells failed: " + "; ".join(f"cell {end.key}: {end.error}" for end in failed)
        )


def _say_plan(store: tracking.Store, sweep: Sweep, run: tracking.LiveRun, echo: Echo) -> None:
    """The sweep's first lines: its id, and where its results are (a folder here, or MLflow alone: the
    experiment and the server, for a cluster's cells), then its seeds, profile, manual and options."""
    if sweep.out is None:
        experiment = run.experiment_id
        where = (
            f"(ray cluster at {sweep.address}), results in MLflow experiment {store.name_of(experiment)} "
            f"(id {experiment}) at {tracking.redact(sweep.tracking_uri)}"
        )
    else:
        where = f"({sweep.executor}), outputs in {sweep.out}"
    echo(f"sweep {sweep.run_id}: {len(sweep.grid.cells())} cells {where}")
    echo(
        f"seeds {', '.join(map(str, sweep.grid.seeds))}; profile {sweep.grid.profile}"
        + (f"; cells run with {sweep.grid.options_words}" if sweep.grid.options_words else "")
    )


def _saying(echo: Echo, pace: Pace) -> Callable[[CellEnd], None]:
    """How each cell's end is said: its line, with how many cells have ended and what is left (``Pace``)."""

    def say(end: CellEnd) -> None:
        outcome = f"finished, run {end.run_id}" if end.error is None else f"FAILED: {end.error}"
        echo(f"cell {end.key}: {outcome} {pace.tick(time.monotonic())}")

    return say


def _local(jobs: list[CellJob], run_cell: RunCell, say: Callable[[CellEnd], None], ends: dict[str, CellEnd]) -> None:
    """The cells one after another in this process; a cell that fails (its run ended FAILED by the
    pipeline itself) stops no other."""
    for job in jobs:
        try:
            end = CellEnd(job.cell.key, run_id=run_attempt(run_cell, job))
        except Exception as error:  # any failure of one cell is that cell's, said in one line
            end = CellEnd(job.cell.key, error=one_line(error))
        ends[end.key] = end
        say(end)


def one_line(error: BaseException) -> str:
    """A cell's failure as the line users read (``errors.one_line``), at most 1000 characters."""
    return errors.one_line(error)[:1000]


def _ray(
    ray: ModuleType,
    sweep: Sweep,
    jobs: list[CellJob],
    run_cell: RunCell,
    say: Callable[[CellEnd], None],
    per_cell: PerCell,
    ends: dict[str, CellEnd],
) -> None:
    """The cells as Ray tasks, each tried again up to ``sweep.retries`` times where its worker or node is
    lost (the attempt resumes the cell's own run); waits for every cell. Ctrl-C or SIGTERM cancels the
    cells still running (their runs end KILLED)."""
    gpus = per_cell.gpus if per_cell.gpus is not None else float(ray.cluster_resources().get("GPU", 0) >= 1)
    task = ray.remote(num_cpus=per_cell.cpus, num_gpus=gpus, max_retries=sweep.retries)(run_attempt)
    pending = {task.remote(run_cell, job): job.cell for job in jobs}
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            cell = pending.pop(ready[0])
            ends[cell.key] = _ended(ray, ready[0], cell, sweep.retries)
            say(ends[cell.key])
    except KeyboardInterrupt:
        for ref in pending:
            ray.cancel(ref, force=True)  # the sweep ends KILLED; ``settle`` ends their runs KILLED
        raise


def _ended(ray: ModuleType, ref: ObjectRef[str], cell: Cell, retries: int) -> CellEnd:
    """A Ray task's outcome: the cell's run id; the cell's own error (``RayTaskError`` carries it as
    ``cause``); or, where Ray lost the task on every attempt (its worker or node died each time), that."""
    try:
        return CellEnd(cell.key, run_id=ray.get(ref))
    except ray.exceptions.RayTaskError as error:
        return CellEnd(cell.key, error=one_line(error.cause if error.cause is not None else error))
    except ray.exceptions.RayError as error:
        lost = one_line(error).split(". ")[0]
        return CellEnd(cell.key, error=f"its Ray task was lost on all {retries + 1} attempts (last: {lost})")


def settle(store: tracking.Store, sweep_id: str, ends: dict[str, CellEnd]) -> None:
    """Once no cell of the sweep runs any more: a cell run still RUNNING (its process was lost and no attempt
    continued it, or the sweep was stopped) is ended FAILED with its cell's error, else KILLED; so are its
    RUNNING arms."""
    for key, run in cell_runs(store, sweep_id).items():
        if run.status != "RUNNING":
            continue
        end = ends.get(key)
        if end is not None and end.error is not None:
            end_run(store, run, "FAILED", end.error)
        else:
            end_run(store, run, "KILLED", "the sweep stopped while this cell ran, and nothing continued it")


@contextmanager
def _connected(sweep: Sweep) -> Iterator[ModuleType | None]:
    """Ray for the sweep (None for ``local``), connected before the sweep's run exists: to the cluster at
    ``--address`` (no cluster answering fails in one line within ``CONNECT_TIMEOUT``), or a local instance
    started here. The workers get the tracking URI in their environment (where it wins over a machine's own)
    and the experiment this process names (MLFLOW_EXPERIMENT_NAME or _ID, where set: a cell's access is checked
    against the sweep's experiment, whose runs it nests in), and nothing else of this process's environment
    (credentials come from each machine's own). A URI with a
    database's password stays out of it: Ray writes a runtime environment into its session's logs, which anyone
    on the machine may read. Such a URI runs only locally (a cluster refuses it), where the workers inherit this
    process's environment and each cell connects with the URI its job carries."""
    if sweep.executor != "ray":
        yield None
        return
    ray = ray_module()
    if ray.is_initialized():  # a caller's own session (the tests', a notebook's): theirs to end
        yield ray
        return
    uri = sweep.tracking_uri
    where = {} if tracking.has_password(uri) else {"MLFLOW_TRACKING_URI": uri}
    environment = {"env_vars": {**where, **tracking.experiment_variables()}}
    if sweep.address:
        check_cluster(sweep.address)
    _init(ray, sweep.address, environment)
    try:
        yield ray
    finally:
        ray.shutdown()


def check_cluster(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Something answers at ``address`` (HOST:PORT, the head's address as ``ray start --head`` prints it),
    or one line within ``timeout`` seconds, before any run exists (Ray itself would retry for minutes)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise CctkError(
            f"--address takes HOST:PORT of a Ray cluster's head (as `ray start --head` prints it), got {address!r}"
        )
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as error:
        raise CctkError(_no_cluster(address, timeout, error.strerror or type(error).__name__)) from None


def _no_cluster(address: str, timeout: float, why: str) -> str:
    return (
        f"no Ray cluster answers at {address} ({why}; connection timeout {timeout:g} s): start one with "
        "`ray start --head`, or give the address its head printed"
    )


def _init(
    ray: ModuleType, address: str | None, environment: dict[str, dict[str, str]], timeout: float = HANDSHAKE_TIMEOUT
) -> None:
    """``ray.init``: a local instance, or the cluster at ``address`` given ``timeout`` seconds to connect (a
    port that answers but is no Ray head would hold it for many minutes), waiting in a thread of its own
    that is left behind when the time is up."""
    if not address:
        ray.init(include_dashboard=False, log_to_driver=False, runtime_env=environment)
        return
    failed: list[BaseException] = []

    def connect() -> None:
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False, runtime_env=environment)
        except BaseException as error:  # said in one line below
            failed.append(error)

    waiting = threading.Thread(target=connect, daemon=True)
    waiting.start()
    waiting.join(timeout)
    if waiting.is_alive():
        raise CctkError(
            _no_cluster(address, timeout, "something answers there, but no Ray head let this process in")
            + "; a cluster with token authentication needs RAY_AUTH_MODE=token and its token (RAY_AUTH_TOKEN) "
            "in this machine's environment"
        )
    if failed:
        raise CctkError(_no_cluster(address, timeout, one_line(failed[0])))


def check_cluster_store(uri: str) -> None:
    """A cluster's cells run on other machines: the store must be a tracking server they all reach, never
    a local file (each machine would write its own), and its URI carries no password (each machine takes
    its credentials from its own environment: MLFLOW_TRACKING_USERNAME, MLFLOW_TRACKING_PASSWORD)."""
    if not uri.startswith(("http://", "https://")):
        raise CctkError(
            f"--address runs the cells on other machines, which cannot reach the local store {tracking.redact(uri)}: "
            "use a tracking server (start one with `cctk server`, then --tracking server, or a configuration with a "
            "[server] table)"
        )
    if tracking.has_password(uri):
        raise CctkError(
            "the tracking URI carries a password: give it to every machine in MLFLOW_TRACKING_USERNAME and "
            "MLFLOW_TRACKING_PASSWORD instead (the URI is handed to the cells and recorded)"
        )


def check_artifacts(store: tracking.Store) -> None:
    """The experiment keeps its artifacts where every machine reaches them: through the server (proxied,
    ``mlflow-artifacts:``) or in an object store, never on a local disk."""
    experiment = store.experiment()
    location = store.artifact_location(experiment)
    if urlsplit(location).scheme in ("", "file"):
        raise CctkError(
            f"experiment {store.name_of(experiment)} on {store.uri} keeps its artifacts at {location}, a "
            "local folder "
            "that other machines cannot reach: serve them through the server (`cctk server` does: "
            "mlflow server --serve-artifacts), in a new experiment"
        )


def ray_module() -> ModuleType:
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
