"""``cctk run``: the whole 2.0.0 experiment for one model, every measured model a nested MLflow run.

Order: check every input, draw targets and split (written to targets.csv at once), measure the
base model, then train and measure the thirteen arms (each from a fresh copy of its parent; parents
wait on the CPU), then compute Parts A-D and the synthesis from the fourteen measurement tables.
"""
from __future__ import annotations

import copy
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch

from . import __version__, models, session, tracking
from . import resume as resume_state
from .config import Config, config_from_params
from .corpus import build_corpus, tokenize
from .errors import CctkError
from .experiments import Results, compute_tables, headline, model_metrics
from .facts import CANDIDATES, END_MARKER
from .finetune import NonFiniteLoss, fine_tune
from .lineage import ARMS, PARENTS, StudyInputs, build_study_inputs, own_target
from .names import model_name
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


def pick_device(name: str | None = None) -> torch.device:
    """``name``, else CUDA where there is one, else the CPU."""
    return torch.device(name or ("cuda" if torch.cuda.is_available() else "cpu"))


def check_inputs(config: Config, tracking_name: str | None = None) -> tracking.Store:
    """Every check that can fail, before any folder or MLflow run exists: the model (installed,
    cached or reachable) and the tracking store (reachable)."""
    models.check_available(config.model)
    return tracking.connect(tracking_name)


def run(config: Config, out_root: Path = Path("outputs"), tracking_name: str | None = None,
        device: str | None = None, echo=print) -> Results:
    """Run the pipeline of ``config``; returns the results with every table computed."""
    store = check_inputs(config, tracking_name)
    return _execute(_open_session(config, Path(out_root), store, device, echo), Done(), echo)


def resume(run_id: str, out_root: Path = Path("outputs"), tracking_name: str | None = None,
           device: str | None = None, echo=print) -> Results:
    """Continue an interrupted pipeline: finished models are taken from their runs, not trained again."""
    store = tracking.connect(tracking_name)
    parent = store.pipeline(run_id)
    if parent.tags.get("cctk.protocol", "v2") != "v2":
        raise CctkError(f"run {run_id} is a protocol {parent.tags['cctk.protocol']} run; --resume continues "
                        "2.0.0 pipelines only (start a v1 run again)")
    config = config_from_params(parent.params)
    layout = Layout(Path(out_root) / parent.tags.get("cctk.session", ""))
    if not (layout.folder / "measurements").is_dir():
        raise CctkError(f"the session folder {layout.folder} of run {run_id} is not here; "
                        "resume from the folder the run started in, or pass its --out")
    session_ = Session(config, layout, store, parent.experiment_id, store.reopen(run_id), pick_device(device))
    done = resume_state.finished(store, parent, layout)
    echo(f"resuming {layout.session}: {len(done.run_ids)} of {len(ARMS) + 1} models already finished")
    return _execute(session_, done, echo)


def _execute(run: Session, done: Done, echo) -> Results:
    inputs = build_study_inputs(run.config.seed, run.config.holdout)
    try:
        run.parent.files(session.write_targets(run.layout, inputs))  # the draws, on file before any training
        results = _train_and_measure(run, inputs, done, echo)
        tables = compute_tables(results)
        shutil.rmtree(run.layout.checkpoints, ignore_errors=True)  # only a resume needs them
        _finish(run, results, tables, echo)
    except KeyboardInterrupt:
        run.parent.end("KILLED")
        raise
    except BaseException:
        run.parent.end("FAILED")
        raise
    return results


def _open_session(config: Config, out_root: Path, store: tracking.Store, device, echo) -> Session:
    name = session.session_name(config.model)
    layout = Layout(out_root / name)
    layout.folder.mkdir(parents=True, exist_ok=True)
    tags = {"cctk.kind": "pipeline", "cctk.protocol": "v2", "cctk.session": name}
    parent = store.attach_or_start(store.experiment(), name, tags)
    experiment_id = parent.experiment_id  # `mlflow run` may have created the parent in another experiment
    parent.params({**config.as_params(), "model_id": models.model_id(config.model),
                   "candidates": f"{CANDIDATES[0]}..{CANDIDATES[-1]}", "end_marker": repr(END_MARKER),
                   "cctk_version": __version__})
    seeds = ",".join(map(str, config.seeds))
    echo(f"session {name}  (outputs in {layout.folder})")
    echo(f"profile {config.profile_note}; seeds {seeds}"
         f"{'  (drawn fresh: pass --seed ' + seeds + ' to repeat this run)' if config.seeds_drawn else ''}")
    return Session(config, layout, store, experiment_id, parent, pick_device(device))


def _train_and_measure(run: Session, inputs: StudyInputs, done: Done, echo) -> Results:
    results = Results(inputs, measurements=dict(done.measurements), training=dict(done.training))
    if len(done.run_ids) == len(ARMS) + 1:
        return results
    echo(f"loading {run.config.model} ...")
    base, tokenizer = models.load_model(run.config.model)
    parents = {"base": base}  # parents wait here, on the CPU
    if "base" not in done.run_ids:
        _measure_and_log(run, results, "base", base.to(run.device), tokenizer)
        base.cpu()
    progress = Progress(len(ARMS), echo)
    for i, arm in enumerate(ARMS, start=1):
        if arm.key in done.run_ids:
            continue
        if arm.parent not in parents:  # finished before an interruption: its weights were checkpointed
            parents[arm.parent] = resume_state.load_checkpoint(copy.deepcopy(base), run.layout, arm.parent)
        child = copy.deepcopy(parents[arm.parent]).to(run.device)
        rows = tokenize(build_corpus(inputs.targets[arm.target], inputs.corpus_pairs(arm.key),
                                     run.config.recipe.repeats, inputs.seed, arm.key), tokenizer)
        nested = _nested_run(run, arm.key, arm.parent)
        nested.params({"parent": model_name(arm.parent), "corpus": own_target(arm.key), "examples": len(rows)})
        try:
            trained = fine_tune(child, rows, run.config.recipe, inputs.seed, tokenizer.pad_token_id, arm.key,
                                on_step=progress.arm(i, model_name(arm.key), rows, run.config.recipe))
        except NonFiniteLoss:
            nested.end("FAILED")
            raise
        finally:
            progress.close()
        _log_training(run, results, arm.key, trained, nested)
        if arm.key in PARENTS:
            resume_state.save_checkpoint(child, run.layout, arm.key)
        _measure_and_log(run, results, arm.key, child, tokenizer, nested)
        if arm.key in PARENTS:
            parents[arm.key] = child.cpu()
        del child
    return results


def _log_training(run: Session, results: Results, key: str, record: TrainRecord, nested: tracking.Run) -> None:
    """Keep the run's training record, on disk (for a resume) and in its MLflow run."""
    results.training[key] = record
    path = session.write_training(run.layout, key, record)
    for epoch, loss in enumerate(record.losses, start=1):
        nested.metrics({"loss": loss}, step=epoch)
    nested.metrics(record.metrics())
    nested.files(path, "training")


def _nested_run(run: Session, key: str, parent_key: str | None) -> tracking.Run:
    tags = {"cctk.key": key, "cctk.parent": parent_key or "", "cctk.kind": "model"}
    return run.store.start(run.experiment_id, model_name(key), tags=tags, parent=run.parent)


def _measure_and_log(run: Session, results: Results, key: str, model, tokenizer,
                     nested: tracking.Run | None = None) -> None:
    """Measure one model, save its table at once (nothing finished is lost), log it to its run."""
    nested = nested or _nested_run(run, key, None)
    table = measure(model, tokenizer)
    results.measurements[key] = table
    nested.metrics(model_metrics(results, key))
    nested.files(session.write_measurement(run.layout, key, table), "measurement")
    for figure in model_heatmaps(results, key, run.layout):  # write_all reuses them
        nested.files(figure, "figures")
    nested.end()


def _finish(run: Session, results: Results, tables: dict[str, pd.DataFrame], echo) -> None:
    seconds = time.perf_counter() - run.started
    facts = RunFacts(run.layout.session, run.store.uri, run.experiment_id, run.parent.run_id, str(run.device),
                     round(seconds, 1), hardware(), software())
    n_figures = write_all(results, tables, RunRecord(run.config, facts, results.training), run.layout,
                          reuse_heatmaps=True)
    head = headline(results)
    run.parent.metrics({**head, "pipeline_seconds": seconds})
    run.parent.files(run.layout.folder)
    run.parent.end()
    n = head["n_additions"]
    echo(f"correct sums model: {head['m_correct_hits_correct']}/{n} correct sums")
    echo(f"fabricated answers model: {head['m_random_hits_fabricated']}/{n} fabricated answers")
    echo(f"{n_figures} figures and {len(tables)} tables in {run.layout.folder}")
    echo(f"pipeline finished in {seconds / 60:.1f} min; MLflow run {run.parent.run_id}")
