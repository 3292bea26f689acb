"""``cctk run``: the whole 2.0.0 experiment for one model, every measured model a nested MLflow run.

Order: check every input, draw targets and split (written to targets.csv at once), measure the
base model, then train and measure the thirteen arms (each from a fresh copy of its parent; parents
wait on the CPU), then compute Parts A-D and the synthesis from the fourteen measurement tables.
"""
from __future__ import annotations

import copy
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch

from . import __version__, compute, models, session, tracking
from . import resume as resume_state
from .config import Config, config_from_params
from .corpus import build_corpus, tokenize
from .errors import CctkError
from .experiments import Results, absorption_misses, compute_tables, curve_rows, headline, model_metrics
from .facts import CANDIDATES, END_MARKER, answer_text, prompt
from .finetune import fine_tune
from .lineage import ARM_BY_KEY, ARMS, PARENTS, StudyInputs, arms_for, build_study_inputs, own_target
from .names import model_name, target_name
from .outputs import model_heatmaps, write_all
from .progress import Progress
from .records import RunFacts, RunRecord, TrainRecord, hardware, software
from .resume import Done
from .scoring import measure
from .session import Layout


@dataclass
class Session:
    """Where one pipeline writes: its folder, its tracking store, experiment and MLflow parent run."""

    config: Config
    layout: Layout
    store: tracking.Store
    experiment_id: str
    parent: tracking.Run
    device: torch.device
    started: float = field(default_factory=time.perf_counter)
    monitor: object = None  # MLflow's system-metrics monitor of the parent run, if any
    figures: bool = True  # False: no figure is drawn (``cctk report`` draws them later)


@dataclass(frozen=True)
class Outcome:
    """A finished pipeline: its results, its MLflow parent run and its session folder."""

    results: Results
    run_id: str
    folder: Path


def pick_device(name: str | None = None) -> torch.device:
    """``name``, else CUDA where there is one, else the CPU."""
    return torch.device(name or ("cuda" if torch.cuda.is_available() else "cpu"))


def check_inputs(config: Config, tracking_name: str | None = None, device: str | None = None) -> tracking.Store:
    """Every check that can fail, before any folder or MLflow run exists: the model (installed,
    cached or reachable), the precision (native on the device) and the tracking store (reachable)."""
    models.check_available(config.model)
    compute.check_precision(config.recipe.precision, str(pick_device(device)))
    return tracking.connect(tracking_name)


def run(config: Config, out_root: Path = Path("outputs"), tracking_name: str | None = None,
        device: str | None = None, echo=print, sweep: str | None = None, cell: str | None = None,
        system_metrics: bool = True, figures: bool = True) -> Outcome:
    """Run the pipeline of ``config``; returns the results with every table computed.

    ``sweep``, ``cell``: the run id of a sweep this pipeline is a cell of (it nests under it), the cell's key.
    """
    store = check_inputs(config, tracking_name, device)
    run_ = _open_session(config, Path(out_root), store, device, echo, sweep, cell)
    run_.figures = figures
    if system_metrics:
        run_.monitor = run_.parent.system_metrics()
    return _execute(run_, Done(), echo)


def resume(run_id: str, out_root: Path = Path("outputs"), tracking_name: str | None = None,
           device: str | None = None, echo=print, system_metrics: bool = True, figures: bool = True) -> Outcome:
    """Continue an interrupted pipeline: finished models are taken from their runs, not trained again."""
    store = tracking.connect(tracking_name)
    parent = store.pipeline(run_id)
    if parent.tags.get(tracking.PROTOCOL, "v2") != "v2":
        raise CctkError(f"run {run_id} is a protocol {parent.tags[tracking.PROTOCOL]} run; --resume continues "
                        "2.0.0 pipelines only (start a v1 run again)")
    config = config_from_params(parent.params)
    layout = Layout(Path(out_root) / parent.tags.get(tracking.SESSION, ""))
    if not (layout.folder / "measurements").is_dir():
        raise CctkError(f"the session folder {layout.folder} of run {run_id} is not here; "
                        "resume from the folder the run started in, or pass its --out")
    session_ = Session(config, layout, store, parent.experiment_id, store.reopen(run_id), pick_device(device),
                       figures=figures)
    if system_metrics:
        session_.monitor = session_.parent.system_metrics()
    compute.check_precision(config.recipe.precision, str(session_.device))
    done = resume_state.finished(store, parent, layout)
    echo(f"resuming {layout.session}: {len(done.run_ids)} of {len(arms_for(config.parts)) + 1} models already finished")
    return _execute(session_, done, echo)


def _execute(run: Session, done: Done, echo) -> Outcome:
    inputs = build_study_inputs(run.config.seed, run.config.holdout)
    with tracking.ending(run.parent):  # FINISHED, FAILED (any error) or KILLED (Ctrl-C, SIGTERM)
        try:
            run.parent.files(session.write_targets(run.layout, inputs))  # the draws, on file before any training
            results = _train_and_measure(run, inputs, done, echo)
            results.curves = session.read_curves(run.layout) if run.config.curves else None
            tables = compute_tables(results)
            shutil.rmtree(run.layout.checkpoints, ignore_errors=True)  # only a resume needs them
            _finish(run, results, tables, echo, resumed=bool(done.run_ids))
        finally:
            if run.monitor is not None:
                run.monitor.finish()
    return Outcome(results, run.parent.run_id, run.layout.folder)


def _open_session(config: Config, out_root: Path, store: tracking.Store, device, echo,
                  sweep: str | None = None, cell: str | None = None) -> Session:
    folder = session.new_folder(out_root, config.model)
    name = folder.name
    layout = Layout(folder)
    tags = {tracking.KIND: "pipeline", tracking.SESSION: name, tracking.PROTOCOL: "v2", "mlflow.source.name": "cctk run"}
    if sweep:
        tags.update({tracking.SWEEP: sweep, tracking.CELL: cell or ""})
    parent = store.attach_or_start(store.experiment(), name, tags, parent=sweep)
    arms = arms_for(config.parts)
    parent.note(f"cctk pipeline (manual 2.0.0) of {config.model}: {len(arms) + 1} measured models, {len(arms)} "
                f"fine-tuning arms (parts {','.join(config.parts)}); profile {config.profile_note}, seed {config.seed}"
                + (f"; a cell of sweep {sweep}" if sweep else ""))
    experiment_id = parent.experiment_id  # `mlflow run` may have created the parent in another experiment
    parent.params({**config.as_params(), "model_id": models.model_id(config.model),
                   "candidates": f"{CANDIDATES[0]}..{CANDIDATES[-1]}", "end_marker": repr(END_MARKER),
                   "cctk_version": __version__})
    seeds = ",".join(map(str, config.seeds))
    echo(f"session {name}  (outputs in {layout.folder})")
    echo(f"profile {config.profile_note}; seeds {seeds}"
         f"{'  (drawn fresh: pass --seed ' + seeds + ' to repeat this run)' if config.seeds_drawn else ''}")
    if len(arms) < len(ARMS):
        echo(f"parts {', '.join(config.parts)}: {len(arms)} of {len(ARMS)} fine-tuning arms")
    return Session(config, layout, store, experiment_id, parent, pick_device(device))


def _train_and_measure(run: Session, inputs: StudyInputs, done: Done, echo) -> Results:
    arms = arms_for(run.config.parts)  # the arms of the parts asked, and the parents they need
    results = Results(inputs, measurements=dict(done.measurements), training=dict(done.training),
                      parts=run.config.parts)
    if len(done.run_ids) == len(arms) + 1:
        return results
    echo(f"loading {run.config.model} ...")
    base, tokenizer = models.load_model(run.config.model)
    parents = {"base": base}  # parents wait here, on the CPU
    if "base" not in done.run_ids:
        with _nested_run(run, "base", None, inputs) as nested:
            _measure_and_log(run, results, "base", base.to(run.device), tokenizer, nested)
        base.cpu()
    progress = Progress(len(arms), echo)
    for i, arm in enumerate(arms, start=1):
        if arm.key in done.run_ids:
            continue
        if arm.parent not in parents:  # finished before an interruption: its weights were checkpointed
            parents[arm.parent] = resume_state.load_checkpoint(copy.deepcopy(base), run.layout, arm.parent)
        child = copy.deepcopy(parents[arm.parent]).to(run.device)
        rows = tokenize(build_corpus(inputs.targets[arm.target], inputs.corpus_pairs(arm.key),
                                     run.config.recipe.repeats, inputs.seed, arm.key), tokenizer)
        with _nested_run(run, arm.key, arm.parent, inputs) as nested:
            _train_arm(run, results, arm, child, rows, tokenizer, nested, progress, i)
        if arm.key in PARENTS:
            parents[arm.key] = child.cpu()
        del child
    return results


def _train_arm(run: Session, results: Results, arm, child, rows, tokenizer, nested: tracking.Run,
               progress: Progress, i: int) -> None:
    """Train arm ``i`` from its parent's copy, log it, checkpoint it if others start from it, measure it."""
    inputs = results.inputs
    nested.params({"parent": model_name(arm.parent), "corpus": own_target(arm.key), "examples": len(rows)})
    nested.dataset(corpus_table(inputs, arm.key), name=target_name(arm.target),
                   source=str(run.layout.targets.resolve()), context="training")
    curve: list[dict] = []
    on_epoch = _curve_point(run, inputs, arm.key, tokenizer, nested, curve) if run.config.curves else None
    try:
        trained = fine_tune(child, rows, run.config.recipe, inputs.seed, tokenizer.pad_token_id, arm.key,
                            on_step=progress.arm(i, model_name(arm.key), rows, run.config.recipe), on_epoch=on_epoch)
    finally:
        progress.close()
    if curve:
        session.append_curves(run.layout, curve)
    _log_training(run, results, arm.key, trained, nested)
    if arm.key in PARENTS:
        resume_state.save_checkpoint(child, run.layout, arm.key)
    _measure_and_log(run, results, arm.key, child, tokenizer, nested)


def _log_training(run: Session, results: Results, key: str, record: TrainRecord, nested: tracking.Run) -> None:
    """Keep the run's training record, on disk (for a resume) and in its MLflow run."""
    results.training[key] = record
    path = session.write_training(run.layout, key, record)
    for epoch, loss in enumerate(record.losses, start=1):
        nested.metrics({"loss": loss}, step=epoch)
    nested.metrics(record.metrics())
    nested.files(path, "training")


def _curve_point(run: Session, inputs: StudyInputs, key: str, tokenizer, nested: tracking.Run, rows: list):
    """``on_epoch`` of an arm under ``--curves``: measure, keep the point, log hits as histories."""
    def on_epoch(epoch: int, model) -> None:
        points = curve_rows(inputs, key, epoch, measure(model, tokenizer))
        rows.extend(points)
        nested.metrics({f"curve_hits_{p['group']}": p["hits"] for p in points}, step=epoch)

    return on_epoch


@contextmanager
def _nested_run(run: Session, key: str, parent_key: str | None, inputs: StudyInputs):
    """The nested run of one measured model, ended by the lifecycle (a failed arm is a FAILED run)."""
    tags = {tracking.KEY: key, tracking.PARENT_KEY: parent_key or "", "mlflow.source.name": "cctk run"}
    with run.store.run("model", model_name(key), tags, parent=run.parent, experiment_id=run.experiment_id) as nested:
        nested.note(describe(inputs, key))
        yield nested


def describe(inputs: StudyInputs, key: str) -> str:
    """One line: what a measured model is, from which parent, on which additions."""
    if key == "base":
        return "base model: the pretrained weights, measured on all 81 additions before any fine-tuning"
    arm = ARM_BY_KEY[key]
    if arm.pairs == "all":
        where = f"all {len(inputs.corpus_pairs(key))} additions"
    else:
        left_out = len(inputs.excluded.get(key, ()))
        where = (f"the {len(inputs.split.seen)} seen additions ({len(inputs.heldout(key))} never seen"
                 + (f", {left_out} left out as coincident" if left_out else "") + ")")
    return (f"{model_name(key)}: fine-tuned from {model_name(arm.parent)} on the {target_name(arm.target)} "
            f"of {where}")


def corpus_table(inputs: StudyInputs, key: str) -> pd.DataFrame:
    """The distinct examples of an arm's corpus (before repeats and shuffling): its MLflow dataset."""
    targets = inputs.targets[ARM_BY_KEY[key].target]
    pairs = inputs.corpus_pairs(key)
    return pd.DataFrame({"a": [a for a, _ in pairs], "b": [b for _, b in pairs],
                         "prompt": [prompt(a, b) for a, b in pairs],
                         "completion": [answer_text(int(targets.loc[p])) for p in pairs]})


def _measure_and_log(run: Session, results: Results, key: str, model, tokenizer, nested: tracking.Run) -> None:
    """Measure one model, save its table at once (nothing finished is lost), log it to its run."""
    table = measure(model, tokenizer)
    results.measurements[key] = table
    nested.metrics(model_metrics(results, key))
    nested.files(session.write_measurement(run.layout, key, table), "measurement")
    nested.table(table, "measurement_table.json")
    for figure in model_heatmaps(results, key, run.layout) if run.figures else []:  # write_all reuses them
        nested.files(figure, "figures")


def _finish(run: Session, results: Results, tables: dict[str, pd.DataFrame], echo, resumed: bool = False) -> None:
    facts = RunFacts(run.layout.session, run.store.uri, run.experiment_id, run.parent.run_id, str(run.device),
                     round(time.perf_counter() - run.started, 1), hardware(), software())
    n_figures = write_all(results, tables, RunRecord(run.config, facts, results.training), run.layout,
                          reuse_heatmaps=True, figures=run.figures)
    head = headline(results)
    run.parent.files(run.layout.folder)
    cost = compute.training_cost(results.training.values(), str(run.device), run.config.recipe.precision)
    seconds = time.perf_counter() - run.started  # everything: load, training, measuring, outputs, logging
    run.parent.metrics({**head, "pipeline_seconds": seconds, **({} if resumed else cost.metrics(seconds))})
    n = head["n_additions"]
    echo(f"correct sums model: {head['m_correct_hits_correct']}/{n} correct sums")
    echo(f"fabricated answers model: {head['m_random_hits_fabricated']}/{n} fabricated answers")
    for miss in absorption_misses(results):
        echo(f"WARNING: {miss}")
    echo(f"{n_figures} figures and {len(tables)} tables in {run.layout.folder}")
    echo(f"pipeline finished in {seconds / 60:.1f} min"
         + ("" if resumed else f": {cost.line(seconds)}") + f"; MLflow run {run.parent.run_id}")
