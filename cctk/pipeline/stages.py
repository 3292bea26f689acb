"""``cctk run``: a manual's whole experiment for one model, every measured model a nested MLflow run.

Order: check every input, draw (targets, split, a v1 corpus: written at once), measure the base model,
then train and measure every fine-tuned model (2.0.0: the thirteen arms, each from a fresh copy of its
parent, parents waiting on the CPU; 1.0.0: the base model itself, in place), then compute the tables
from the measurement tables and write every output. What differs between the manuals comes from each one's
``Manual`` (``cctk.manuals.manual``); this is the one orchestration of all of them.
"""

from __future__ import annotations

import copy
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import torch

from .. import __version__
from ..core import provenance
from ..core.config import AUTO, Config
from ..core.errors import CctkError
from ..core.labels import counted
from ..core.lm import compute, memory, models
from ..core.lm.device import (
    auto_on_cpu,
    check_placed,
    check_recipe,
    on_device,
    out_of_memory_as_line,
    resolve as resolve_device,
    room,
)
from ..core.lm.finetune import fine_tune
from ..core.lm.scoring import measure
from ..core.progress import Progress
from ..core.records import MemoryUse, MlflowIds, hardware, software
from ..figures import warm_up
from ..manuals import configure, registry, words
from ..manuals.manual import AnyManual, Curves, Datasets, ManualOptions, Measured, Results, Resumable, Row, trained
from ..outputs import model_heatmaps, write_all
from ..store import session as session_files, tracking
from ..store.session import Layout
from . import resume as resume_state
from .resume import Done

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from .sweep import Cell


@dataclass(frozen=True)
class Where:
    """Where a pipeline runs and writes: the folder that receives its session folder, the tracking store
    (configuration name or URI; None: the embedded one) and the device (None: CUDA where there is one)."""

    out: Path = Path("outputs")
    tracking: str | None = None
    device: str | None = None


@dataclass(frozen=True)
class Options:
    """How a pipeline runs, not what it computes."""

    echo: Callable[[str], None] = print  # the console's lines
    system_metrics: bool = True  # log CPU, memory (and GPU) use to the parent run
    figures: bool = True  # False: no figure is drawn (``cctk report`` draws them later)
    sweep: str | None = None  # the run id of a sweep this pipeline is a cell of (it nests under it)
    cell: str | None = None  # that cell's key


QUIET = Options(echo=lambda *_: None)


@dataclass(frozen=True)
class RunContext:
    """What one pipeline runs with, fixed once known: its configuration and manual, folder, tracking store,
    experiment and MLflow parent run, device, model source, memory plan and provenance. What the run learns
    on its way (the GEMM peak, the estimate it logs, a Hub revision) makes a new context (``replace``)."""

    config: Config[Any]
    manual: AnyManual
    layout: Layout
    store: tracking.Store
    experiment_id: str
    mlflow_run: tracking.LiveRun  # the pipeline's (parent) MLflow run
    device: torch.device
    source: models.ModelSource  # the model, as the input checks resolved it (loaded from it, never re-resolved)
    plan: memory.Plan  # the memory the run was estimated to need (checked before it started)
    provenance: provenance.Provenance  # model file, git state, reproduce (``_record_provenance``)
    figures: bool = True  # False: no figure is drawn (``cctk report`` draws them later)
    started: float = field(default_factory=time.perf_counter)
    peak_gflops: float | None = None  # the device's GEMM peak measured at the start (the compute limit)
    memory_estimate: int = 0  # the peak the plan expects of this run (``Plan.expected_peak``)


@dataclass(frozen=True)
class Outcome:
    """A finished pipeline: its results, its MLflow parent run and its session folder."""

    results: Results[Any]  # its manual's results (StudyResults under 2.0.0, ComparisonResults under 1.0.0)
    run_id: str
    folder: Path


AUTO_PROFILE = "cctk.auto_profile"  # tag: why the auto profile took the CPU's recipe (absent where it did not)
Echo = Callable[[str], None]  # the console's lines
# What a resume hands ``_finished_weights``: the run's draws (its manual's), tokenizer, finished models and console.
Resumed = tuple[Any, "PreTrainedTokenizerBase", Done, Echo]

LONGEST_ROW = 16  # tokens of the longest arithmetic training row, an upper bound for any tokenizer


def check_inputs(
    config: Config[Any],
    manual: AnyManual,
    tracking_name: str | None = None,
    device: str | None = None,
    out_root: Path | None = None,
) -> tuple[tracking.Store, torch.device, memory.Plan, models.ModelSource]:
    """Every check that can fail, before any session folder or MLflow run exists: the model (installed,
    cached or reachable, its configuration readable), the device, the recipe and memory on it
    (``check_device``), ``out_root`` (takes files), and the tracking store (reachable, openable)."""
    source = models.check_available(config.model)
    where, plan = check_device(config, manual, device)
    if out_root is not None:
        session_files.check_out(out_root)
    return tracking.connect(tracking_name), where, plan, source


def check_device(config: Config[Any], manual: AnyManual, device: str | None) -> tuple[torch.device, memory.Plan]:
    """The device (present), the recipe on it (precision, optimizer) and the memory the run needs against
    what is free there: one line naming what fits where it does not."""
    where = resolve_device(device)
    check_recipe(config.recipe, where)
    compute.pinned_peak()  # a CCTK_GEMM_PEAK_GFLOPS that is not a number of GFLOP/s, refused here
    plan = memory_plan(config, manual, where)
    if plan.shortfall():  # name the roster's models that would fit, in the one line
        replace(plan, others=models.roster_shapes()).check()
    return where, plan


def memory_plan(config: Config[Any], manual: AnyManual, where: torch.device) -> memory.Plan:
    """The run's memory against the device: one arm trained at a time, its parent waiting in host memory
    (none where every model is trained in place, protocol v1); ``--curves`` measures every epoch while the
    arm's gradients and moments live; a batch holds at most an arm's rows (``ManualSpec.most_rows``)."""
    shape = memory.Shape.of_config(models.model_config(config.model))
    copies = any(not m.in_place for m in trained(manual, config.options))
    job = memory.Job(
        measured_in_training=_curves(manual, config),
        most_rows=manual.spec.most_rows(config.recipe),
        distinct_rows=manual.spec.distinct_rows,
    )
    return memory.Plan(config.model, shape, config.recipe, LONGEST_ROW, room(where), waiting=int(copies), job=job)


def _curves(manual: AnyManual, config: Config[Any]) -> bool:
    """Whether a run of ``config`` measures every arm after every epoch (a manual with curves, asked to)."""
    return isinstance(manual, Curves) and manual.curves(config)


def _context(
    config: Config[Any],
    manual: AnyManual,
    layout: Layout,
    store: tracking.Store,
    mlflow_run: tracking.LiveRun,
    checked: tuple[torch.device, models.ModelSource, memory.Plan],
    figures: bool,
    echo: Echo,
) -> RunContext:
    """The context of a run (new or resumed) once its MLflow run is open: its provenance recorded there, and a line
    where its artifacts stay in a folder of this machine while its store is shared (a database server's)."""
    device, source, plan = checked
    found = _record_provenance(config, manual, store, mlflow_run)
    unshared = store.unshared_artifacts(mlflow_run.artifact_uri)
    if unshared:
        echo(unshared)
    experiment = mlflow_run.experiment_id
    return RunContext(config, manual, layout, store, experiment, mlflow_run, device, source, plan, found, figures)


def sweep_cell(
    cell: Cell,
    profile: str,
    out: str,
    tracking_uri: str,
    sweep_id: str,
    resume_id: str | None = None,
    figures: bool = True,
    protocol: str = registry.DEFAULT,
    options: ManualOptions | None = None,
) -> str:
    """One cell of a sweep (locally or in a Ray worker): ``cctk run`` of manual ``protocol`` with ``options`` (None:
    its defaults) nested under the sweep, quietly; returns its run id. Top-level (Ray pickles it by name), its
    arguments plain values."""
    where, quiet = Where(Path(out), tracking_uri), replace(QUIET, figures=figures, sweep=sweep_id, cell=cell.key)
    if resume_id:
        return resume(resume_id, where, quiet).run_id
    device = str(resolve_device(None))
    config = configure.make_config(
        cell.model, profile, (cell.seed,), device=device, protocol=protocol, **dict(cell.overrides)
    )
    return run(config if options is None else replace(config, options=options), where, quiet).run_id


def run(config: Config[Any], where: Where = Where(), options: Options = Options()) -> Outcome:
    """Run the pipeline of ``config`` under its manual; returns the results with every table computed."""
    manual = registry.get(config.protocol)  # the library's entry: the one resolution of the Config's name
    echo, sweep = options.echo, options.sweep
    store, device, plan, source = check_inputs(config, manual, where.tracking, where.device, where.out)
    layout = Layout(session_files.new_folder(Path(where.out), config.model), manual)
    tags = {tracking.SESSION: layout.session, tracking.PROTOCOL: manual.spec.name, "mlflow.source.name": "cctk run"}
    if sweep:
        tags.update({tracking.SWEEP: sweep, tracking.CELL: options.cell or ""})
    # the folder is let go after the run has ended (a resume that takes it finds it ended); the run is
    # opened here and ended here, so no fault between (the GEMM peak, a Ctrl-C) leaves it RUNNING
    with _held(layout.folder), store.run("pipeline", layout.session, tags, parent=sweep, attach=True) as mlflow_run:
        _set_up(mlflow_run, config, manual, source, layout, sweep, echo, where.device)
        context = _context(config, manual, layout, store, mlflow_run, (device, source, plan), options.figures, echo)
        results = _stages(context, Done(), echo, options.system_metrics, peak=True)
    return Outcome(results, mlflow_run.run_id, layout.folder)


def resume(run_id: str, where: Where = Where(), options: Options = Options()) -> Outcome:
    """Continue an interrupted pipeline from wherever it stopped (a folder holding only its draws too):
    finished models are taken from their runs, not trained again. A FINISHED run, and a run whose
    process still holds its session folder, are refused (nothing of theirs is rewritten)."""
    store, echo = tracking.connect(where.tracking, create=False, writes=True), options.echo  # the run's store exists
    parent = store.pipeline(run_id)
    manual = registry.get(parent.tags.get(tracking.PROTOCOL))  # MLflow's edge: resolved once, passed on
    if not isinstance(manual, Resumable):
        resumes = ", ".join(m.spec.label for m in registry.every() if isinstance(m, Resumable))
        raise CctkError(
            f"run {run_id} is a protocol {manual.spec.name} run; --resume continues the pipelines of a manual that "
            f"resumes ({resumes}): start it again"
        )
    if parent.status == "FINISHED":
        raise CctkError(f"run {run_id} is FINISHED: there is nothing to resume (start a new run to repeat it)")
    config = configure.config_from_params(manual, parent.params)
    layout = Layout(Path(where.out) / parent.tags.get(tracking.SESSION, ""), manual)
    if options.sweep and parent.tags.get(tracking.SESSION):  # a cell on another machine than its lost one's:
        layout.folder.mkdir(parents=True, exist_ok=True)  # what it finished comes back from MLflow
    if not parent.tags.get(tracking.SESSION) or not layout.folder.is_dir():
        raise CctkError(
            f"the session folder {layout.folder} of run {run_id} is not here; "
            "resume from the folder the run started in, or pass its --out"
        )
    session_files.check_out(layout.folder, "the session folder")
    busy = f"run {run_id} is still running: its process holds {layout.folder} (stop it first, or wait for it to end)"
    with _held(layout.folder, busy):  # first: a live run's own memory use would fail the plan
        _check_own(layout, store, run_id)
        device, plan = check_device(config, manual, where.device)
        source = models.check_available(config.model)  # before the run is reopened, as run()'s input checks
        done = resume_state.finished(store, parent, layout)
        with store.run("pipeline", layout.session, reopen=run_id) as reopened:  # ended here, as run()'s
            context = _context(config, manual, layout, store, reopened, (device, source, plan), options.figures, echo)
            echo(
                f"resuming {layout.session}: {len(done.run_ids)} of {len(manual.models(config.options))} models "
                "already finished"
            )
            results = _stages(context, done, echo, options.system_metrics, peak=False)
    return Outcome(results, run_id, layout.folder)


def _check_own(layout: Layout, store: tracking.Store, run_id: str) -> None:
    """Refuse a session folder of the run's name that holds another run's draws (another seed's or model's: a
    folder copied from elsewhere, another machine's in the --out given), whose measurements and checkpoints the
    resume would take for the run's own: its targets.csv must be the one the run logged as it started (a folder
    without draws, a run that logged none, has nothing to compare)."""
    if not layout.targets.is_file():
        return
    with tempfile.TemporaryDirectory() as scratch:
        logged = Path(scratch) / layout.targets.name
        if store.fetch(run_id, layout.targets.name, logged) and logged.read_bytes() != layout.targets.read_bytes():
            raise CctkError(
                f"the session folder {layout.folder} holds another run's draws (its targets.csv is not the one run "
                f"{run_id} logged): resume from the folder the run started in, or pass its --out"
            )


@contextmanager
def _held(folder: Path, busy: str | None = None) -> Iterator[int]:
    """The session folder, held by this process for the block (``cctk.store.session.hold``); ``busy``: the line that
    refuses a folder another live process holds."""
    try:
        lock = session_files.hold(folder)
    except session_files.Busy as error:
        raise CctkError(busy or str(error)) from None
    try:
        yield lock
    finally:
        session_files.release(lock)


def _stages(context: RunContext, done: Done, echo: Echo, system_metrics: bool, peak: bool) -> Results[Any]:
    """Draw, measure and train, compute the tables, write the outputs; returns the manual's results.
    ``peak``: measure the device's GEMM peak first (the compute limit; a resume reports no cost)."""
    monitor = None  # MLflow's system-metrics monitor of the parent run, if any
    gone = False  # the tracking server stopped answering
    try:
        draws = context.manual.draw(context.config)
        gflops = compute.peak_gflops(str(context.device), context.config.recipe.precision) if peak else None
        if system_metrics:
            monitor = context.mlflow_run.system_metrics()
        context = replace(context, peak_gflops=gflops, memory_estimate=context.plan.expected_peak())
        context.mlflow_run.metrics({"memory_estimate_bytes": context.memory_estimate})
        for path in session_files.write_draws(context.layout, draws):  # on file before any training
            context.mlflow_run.files(path)
        results, context = _train_and_measure(context, draws, done, echo)
        manual = context.manual
        if isinstance(manual, Curves) and manual.curves(context.config):  # every arm's points, a resume's too
            results = manual.with_curves(results, session_files.read_curves(context.layout))
        tables = manual.tables(results)
        shutil.rmtree(context.layout.checkpoints, ignore_errors=True)  # only a resume needs them
        _finish(context, results, tables, echo, resumed=bool(done.run_ids))
        return results
    except tracking.Unreachable:
        gone = True
        raise
    finally:
        if monitor is not None:
            tracking.finish_monitor(monitor, gone)


def _set_up(
    mlflow_run: tracking.LiveRun,
    config: Config[Any],
    manual: AnyManual,
    source: models.ModelSource,
    layout: Layout,
    sweep: str | None,
    echo: Echo,
    device: str | None = None,
) -> None:
    """The parent run's description and parameters, and the session's first lines: the session, then what its
    manual says before it starts (the profile and the seeds: how to repeat the run; the parts when not all); where
    the ``auto`` profile took the CPU's recipe, why, in the profile's place and in tag ``cctk.auto_profile``
    (``device``: the device asked for, None where none was)."""
    note = words.run_note(manual, config) + (f"; a cell of sweep {sweep}" if sweep else "")
    mlflow_run.note(f"{note}. {tracking.nested_runs_hint(mlflow_run.run_id)}")
    mlflow_run.params({**configure.params(manual, config), "model_id": source.id, "cctk_version": __version__})
    auto = (
        auto_on_cpu(config.profile, device) if config.profile_requested == AUTO and config.profile != "paper" else None
    )
    if auto:
        mlflow_run.tags({AUTO_PROFILE: auto})
    echo(f"session {layout.session}  ({words.heading(manual)}outputs in {layout.folder})")
    for line in words.setup_lines(manual, config):
        echo(line.replace(f"profile {config.profile_note};", f"profile auto: {auto};", 1) if auto else line)


def _record_provenance(
    config: Config[Any],
    manual: AnyManual,
    store: tracking.Store,
    mlflow_run: tracking.LiveRun,
    revision: str | None = None,
) -> provenance.Provenance:
    """The run's provenance (model file and hash, git state, its manual's reproduce command, every package's
    version) and where it is stored (absolute URI, artifact location) as tags of the parent run; returned for
    run_info.json."""
    found = provenance.gather(config, configure.reproduce(manual, config), revision)
    where = {tracking.TRACKING_URI: store.uri, tracking.ARTIFACT_URI: mlflow_run.artifact_uri}
    versions = provenance.package_versions(config)
    mlflow_run.tags({**tracking.provenance_tags(found.flat(), versions), **where})
    return found


def _train_and_measure(context: RunContext, draws: Any, done: Done, echo: Echo) -> tuple[Results[Any], RunContext]:
    """Every model not finished yet, trained and measured in its nested run; returns the results and the
    context (with the provenance of the Hub revision loaded, where it differs from the one checked)."""
    measured = training_order(context.manual.models(context.config.options))
    results = context.manual.results(draws, context.config, done.measurements, done.training)
    if len(done.run_ids) == len(measured):
        return results, context
    echo(f"loading {context.config.model} ...")
    base, tokenizer = models.load_model(context.source, keep=False)  # the only copy: no pristine twin
    revision = getattr(base.config, "_commit_hash", None)  # the Hub commit the config was read from
    if revision and context.provenance.model.kind == "hub" and revision != context.provenance.model.revision:
        found = _record_provenance(context.config, context.manual, context.store, context.mlflow_run, revision)
        context = replace(context, provenance=found)
    forecast = context.peak_gflops is not None  # not on a resume: its wall time is no cost
    per_model = 0.0  # seconds the base model's measurement and logging took: each trained model's after it
    per_point = 0.0  # and its measurement alone: each learning-curve point's (--curves)
    copied = {m.parent for m in measured if m.parent and not m.in_place}  # kept (and checkpointed) once trained
    last_child = {m.parent: m.key for m in measured if m.parent and m.key not in done.run_ids}
    # parents wait here, on the CPU, until their last child takes them
    weights: dict[str, PreTrainedModel] = {"base": base}
    progress = Progress(len(measured) - 1, echo)
    for i, arm in enumerate(measured):
        if arm.key in done.run_ids:
            continue
        if arm.parent is None:
            if context.figures:  # Matplotlib's one-time costs kept out of the time each arm's is forecast from
                warm_up()
            began = time.perf_counter()
            with _nested_run(context, arm, draws) as nested:
                placed = on_device(base, context.device)
                per_point = _measure_and_log(context, results, arm.key, placed, tokenizer, nested)
            base.cpu()
            per_model = time.perf_counter() - began
            continue
        if forecast:  # the base model measured, the first arm about to train
            arms = [m for m in measured if m.parent and m.key not in done.run_ids]
            _forecast(context, draws, arms, base, tokenizer, echo, per_model, per_point)
            forecast = False
        if arm.parent not in weights:  # finished before an interruption: checkpointed, or trained again
            resumed = (draws, tokenizer, done, echo)
            weights[arm.parent] = _finished_weights(context, arm.parent, weights, last_child, resumed)
        child = _child(weights, arm, last_child)
        rows = context.manual.rows(draws, arm.key, context.config.recipe, tokenizer)
        with _nested_run(context, arm, draws) as nested:  # the move is the arm's: an OOM there ends it FAILED
            child = on_device(child, context.device)
            check_placed(context.plan, context.device)
            _train_model(context, results, arm, child, rows, tokenizer, nested, progress, i, arm.key in copied)
        if arm.key in copied:
            weights[arm.key] = child.cpu()
        del child
    return results, context


def _forecast(
    context: RunContext,
    draws: Any,
    arms: list[Measured],
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    echo: Echo,
    per_model: float,
    per_point: float,
) -> None:
    """Before the first arm trains, the base model measured (``per_model``: the seconds its measurement and
    logging took; ``per_point``: its measurement alone): the compute limit of the training to come (each arm's
    rows over its epochs, at the GEMM peak measured at the start) and what the whole run should take, printed
    and logged on the parent run (``estimated_limit_seconds``, ``estimated_seconds``), to set beside
    ``compute_limit_seconds`` and ``pipeline_seconds`` at its end."""
    recipe, peak = context.config.recipe, context.peak_gflops
    assert peak is not None  # measured at the start of every run that is not a resume
    rows = [context.manual.rows(draws, arm.key, recipe, tokenizer) for arm in arms]
    arms_cost = [(len(r) * recipe.epochs, compute.example_flops(model, r) / 1e9) for r in rows]
    points = len(arms) * recipe.epochs if _curves(context.manual, context.config) else 0  # after every epoch
    rest = compute.Rest(time.perf_counter() - context.started, len(arms), per_model, points, per_point, context.figures)
    cost = compute.planned_cost(arms_cost, peak, recipe.precision)
    line, metrics = compute.forecast(cost, context.device.type, rest)
    echo(line)
    context.mlflow_run.metrics(metrics)


def _finished_weights(
    context: RunContext, key: str, weights: dict[str, PreTrainedModel], last_child: dict[str, str], resumed: Resumed
) -> PreTrainedModel:
    """A finished model's weights, for arms that start from it: in memory, its checkpoint, or, where the
    checkpoint is gone (written on a machine that was lost), trained again from its parent as the first time
    (seeded by its name: the same weights), its run saying so (tag ``cctk.trained_again``)."""
    draws, tokenizer, done, echo = resumed
    arm = next(m for m in context.manual.models(context.config.options) if m.key == key)
    if key in weights:
        return copy.deepcopy(weights[key])
    if arm.parent is None:
        return models.load_model(context.source, keep=False)[0]
    if context.layout.checkpoint(key).is_file():
        skeleton = _skeleton(weights, last_child, lambda: models.load_model(context.source, keep=False)[0])
        return resume_state.load_checkpoint(skeleton, context.layout, key)
    model = on_device(_finished_weights(context, arm.parent, weights, last_child, resumed), context.device)
    rows = context.manual.rows(draws, key, context.config.recipe, tokenizer)
    fine_tune(model, rows, context.config.recipe, context.config.seed, tokenizer.pad_token_id, arm.stream or key)
    resume_state.save_checkpoint(model, context.layout, key)
    why = "its checkpoint was not where the pipeline resumed (written on a machine that was lost): trained again"
    tracking.LiveRun(done.run_ids[key], context.store.client).tags({tracking.TRAINED_AGAIN: why})
    echo(f"{context.manual.spec.model_name(key)}: {why}, seeded as before")
    return model.cpu()


def training_order(measured: tuple[Measured, ...]) -> tuple[Measured, ...]:
    """Every parent followed by its children, the children that are parents themselves last: a parent
    then waits in memory only until its last child takes its very weights (no copy), so at most one
    parent waits while an arm trains. The arms' results do not depend on the order (each is seeded by
    its own name)."""
    children: dict[str | None, list[Measured]] = {}
    for m in measured:
        children.setdefault(m.parent, []).append(m)
    order: list[Measured] = []

    def visit(m: Measured) -> None:
        order.append(m)
        for child in sorted(children.get(m.key, []), key=lambda c: c.key in children):  # stable: leaves first
            visit(child)

    for root in children.get(None, []):
        visit(root)
    return tuple(order)


def _child(weights: dict[str, PreTrainedModel], arm: Measured, last_child: dict[str, str]) -> PreTrainedModel:
    """The weights an arm trains: its parent's very weights when it is the parent's last child (or the
    model is trained in place), else a fresh copy of them."""
    parent = arm.parent
    assert parent is not None  # a trained arm's: the base model is measured, never trained
    if arm.in_place:
        return weights[parent]
    if last_child.get(parent) == arm.key:
        return weights.pop(parent)
    return copy.deepcopy(weights[parent])


def _skeleton(
    weights: dict[str, PreTrainedModel], last_child: dict[str, str], load: Callable[[], PreTrainedModel]
) -> PreTrainedModel:
    """A model of the run's architecture to load a checkpoint into (a resume): the base model itself once
    no arm left needs it, else a copy of a model in memory, else the model loaded again (``load()``)."""
    if "base" in weights and "base" not in last_child:
        return weights.pop("base")
    if weights:
        return copy.deepcopy(next(iter(weights.values())))
    return load()


def _train_model(
    context: RunContext,
    results: Results[Any],
    arm: Measured,
    child: PreTrainedModel,
    rows: list[Row],
    tokenizer: PreTrainedTokenizerBase,
    nested: tracking.LiveRun,
    progress: Progress,
    i: int,
    checkpoint: bool,
) -> None:
    """Train model ``i`` from its parent (a copy, or in place), log it, checkpoint it if others start from
    a copy of it, measure it."""
    draws, recipe = results.draws, context.config.recipe
    recipe_params = {k: v for k, v in context.config.as_params().items() if k.startswith("recipe.")}  # the parent's
    parent = context.manual.spec.model_name(arm.parent or "")  # a trained model's: never none
    nested.params({"parent": parent, "corpus": arm.corpus, "examples": len(rows), **recipe_params})
    if isinstance(context.manual, Datasets):
        name, table = context.manual.dataset(draws, arm.key)
        # its source: the run's targets.csv in the store, where every user of the store reads it (this machine's
        # session folder where the store's copy cannot be addressed)
        stored = context.store.artifact_address(context.mlflow_run, context.layout.targets.name)
        nested.dataset(table, name=name, source=stored or str(context.layout.targets.resolve()), context="training")
    curve: list[dict[str, Any]] = []
    on_epoch = (
        _curve_point(context, draws, arm.key, tokenizer, nested, curve)
        if _curves(context.manual, context.config)
        else None
    )
    trained = None
    try:
        trained = fine_tune(
            child,
            rows,
            recipe,
            context.config.seed,
            tokenizer.pad_token_id,
            arm.stream or arm.key,
            on_step=progress.arm(i, context.manual.spec.model_name(arm.key), rows, recipe),
            on_epoch=on_epoch,
            on_loss=lambda epoch, loss: nested.metrics({"loss": loss}, step=epoch),
        )
    finally:
        progress.close(finished=trained is not None, losses=trained.losses if trained else ())
    if curve:
        session_files.append_curves(context.layout, curve)
    results.training[arm.key] = trained  # on disk for a resume; its loss history was logged epoch by epoch
    nested.metrics(trained.metrics())
    nested.files(session_files.write_training(context.layout, arm.key, trained), "training")
    if checkpoint:
        resume_state.save_checkpoint(child, context.layout, arm.key)
    _measure_and_log(context, results, arm.key, child, tokenizer, nested)


def _curve_point(
    context: RunContext,
    inputs: Any,
    key: str,
    tokenizer: PreTrainedTokenizerBase,
    nested: tracking.LiveRun,
    rows: list[dict[str, Any]],
) -> Callable[[int, PreTrainedModel], None]:
    """``on_epoch`` of an arm under ``--curves``: measure, keep the point, log hits as histories."""

    def on_epoch(epoch: int, module: PreTrainedModel) -> None:
        assert isinstance(context.manual, Curves)  # on_epoch is given where it measures curves
        table = measure(module, tokenizer, scoring=context.manual.spec.scoring)
        points = context.manual.curve_rows(inputs, key, epoch, table)
        rows.extend(points)
        nested.metrics({f"curve_hits_{p['group']}": p["hits"] for p in points}, step=epoch)

    return on_epoch


@contextmanager
def _nested_run(context: RunContext, arm: Measured, draws: Any) -> Iterator[tracking.LiveRun]:
    """The nested run of one measured model, ended by the lifecycle (a failed arm is a FAILED run)."""
    tags = {
        tracking.KEY: arm.key,
        tracking.PARENT_KEY: arm.parent or "",
        tracking.PROTOCOL: context.manual.spec.name,
        "mlflow.source.name": "cctk run",
        tracking.PARENT_RUN: context.mlflow_run.run_id,
    }
    name = context.manual.spec.model_name(arm.key)
    with context.store.run(
        "model", name, tags, parent=context.mlflow_run, experiment_id=context.experiment_id
    ) as nested:
        nested.params({"parent_run_id": context.mlflow_run.run_id, "seed": context.config.seed})  # the seed it used
        nested.note(context.manual.describe(draws, arm.key))
        # an arm's out-of-memory error as one line (the run ends FAILED with it): the estimate it was checked
        # against and the options that fit, instead of the allocator's traceback
        plan = replace(context.plan, others=models.roster_shapes())
        with out_of_memory_as_line(plan, context.device, f"the {name} arm"):
            yield nested


def _measure_and_log(
    context: RunContext,
    results: Results[Any],
    key: str,
    module: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    nested: tracking.LiveRun,
) -> float:
    """Measure one model, save its table at once (nothing finished is lost), log it to its run; returns the
    seconds the measurement alone took."""
    began = time.perf_counter()
    table = measure(module, tokenizer, scoring=context.manual.spec.scoring)
    seconds = time.perf_counter() - began
    results.measurements[key] = table
    nested.metrics(context.manual.readings(results, key).metrics())
    nested.files(session_files.write_measurement(context.layout, key, table), "measurement")
    nested.table(table, "measurement_table.json")
    drawn = model_heatmaps(results, key, context.layout) if context.figures else []
    for figure in drawn:  # write_all
        nested.files(figure, "figures")  # reuses them
    return seconds


def _finish(
    context: RunContext, results: Results[Any], tables: dict[str, pd.DataFrame], echo: Echo, resumed: bool = False
) -> None:
    used = _memory_use(context, results)
    info = session_files.run_info(
        context.config,
        context.manual,
        results,
        session=context.layout.session,
        model=context.source,
        device=str(context.device),
        seconds=round(time.perf_counter() - context.started, 1),
        hardware=hardware(context.device),
        software=software(context.config),
        mlflow=MlflowIds(
            context.store.uri, context.experiment_id, context.mlflow_run.run_id, context.mlflow_run.artifact_uri
        ),
        memory=used,
        provenance=context.provenance,
    )
    n_figures = write_all(results, tables, info, context.layout, reuse_heatmaps=True, figures=context.figures)
    head = context.manual.headline(results)
    context.mlflow_run.files(context.layout.folder)
    cost = (
        None
        if resumed
        else compute.training_cost(  # a resumed run's wall time is not its cost
            results.training.values(), str(context.device), context.config.recipe.precision, earlier=context.peak_gflops
        )
    )
    seconds = time.perf_counter() - context.started  # everything: load, training, measuring, outputs, logging
    cost_metrics = cost.metrics(seconds) if cost else {}
    context.mlflow_run.metrics(
        {**head.metrics(), "pipeline_seconds": seconds, **cost_metrics, "peak_memory_bytes": used.peak_bytes}
    )
    for line in head.lines():
        echo(line)
    echo(f"{counted(n_figures, 'figure')} and {counted(len(tables), 'table')} in {context.layout.folder}")
    echo(
        f"{words.title(context.manual)} finished in {seconds / 60:.1f} min"
        + (f": {cost.line(seconds)}" if cost else "")
        + f"; MLflow run {context.mlflow_run.run_id}"
    )
    echo(tracking.run_link(context.store, context.experiment_id, context.mlflow_run.run_id))


def _memory_use(context: RunContext, results: Results[Any]) -> MemoryUse:
    """The run's peak beside its estimate: the GPU allocator's largest arm on CUDA; elsewhere the process's
    resident memory, the largest over the arms (each arm starts the counter over) and what came after."""
    if context.device.type == "cuda":
        peak = max((r.peak_gpu_memory_bytes for r in results.training.values()), default=0)
        return MemoryUse("gpu", context.memory_estimate, peak)
    arms = max((r.peak_cpu_memory_bytes for r in results.training.values()), default=0)
    return MemoryUse("process", context.memory_estimate, max(arms, memory.process_peak()))
