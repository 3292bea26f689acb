"""``cctk run``: the whole 2.0.0 experiment for one model, every measured model a nested MLflow run.

Order: check every input, draw targets and split, measure the base model, then train and measure
the thirteen arms (each from a fresh copy of its parent; parents wait on the CPU), then compute
Parts A-D and the synthesis from the fourteen measurement tables.
"""
from __future__ import annotations

import copy
import json
import shutil
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pandas as pd
import torch

from . import __version__, tracking
from . import resume as resume_state
from .config import Config, config_from_params
from .corpus import build_corpus, tokenize
from .experiments import Results, part_a, part_b, part_c, part_d, runs, synthesis
from .facts import CANDIDATES, END_MARKER
from .errors import CctkError
from .finetune import NonFiniteLoss, fine_tune
from .lineage import ARMS, PARENTS, StudyInputs, build_study_inputs, own_target
from .models import check_model_name, load_model, model_id
from .names import file_stem, model_name
from .outputs import model_heatmaps, write_all
from .outputs.session import measurement_path
from .progress import Progress
from .readings import summarize
from .resume import Done
from .scoring import measure

PARTS = (part_a, part_b, part_c, part_d, synthesis, runs)


@dataclass
class Session:
    """Where one pipeline writes: its folder, its MLflow parent run and experiment."""

    config: Config
    folder: Path
    experiment_id: str
    parent: tracking.Run
    tracking_uri: str
    device: torch.device
    started: float = field(default_factory=time.perf_counter)


def run(config: Config, out_root: Path = Path("outputs"), tracking_name: str | None = None,
        device: str | None = None, echo=print) -> Results:
    """Run the pipeline of ``config``; returns the results with every table computed."""
    check_model_name(config.model)
    track = tracking.resolve(tracking_name)
    tracking.check_reachable(track)
    return _execute(_open_session(config, out_root, track, device, echo), Done(), echo)


def resume(run_id: str, out_root: Path = Path("outputs"), tracking_name: str | None = None,
           device: str | None = None, echo=print) -> Results:
    """Continue an interrupted pipeline: finished models are taken from their runs, not trained again."""
    track = tracking.resolve(tracking_name)
    tracking.check_reachable(track)
    tracking.activate(track)
    parent_run = resume_state.pipeline_run(run_id)
    config = config_from_params(parent_run.data.params)
    folder = Path(out_root) / parent_run.data.tags.get("cctk.session", "")
    if not (folder / "measurements").is_dir():
        raise CctkError(f"the session folder {folder} of run {run_id} is not here; "
                        "resume from the folder the run started in, or pass its --out")
    session = Session(config, folder, parent_run.info.experiment_id, tracking.reopen(run_id),
                      track.tracking_uri, _device(device))
    done = resume_state.finished(run_id, session.experiment_id, folder)
    echo(f"resuming {folder.name}: {len(done.run_ids)} of {len(ARMS) + 1} models already finished")
    return _execute(session, done, echo)


def _execute(session: Session, done: Done, echo) -> Results:
    inputs = build_study_inputs(session.config.seed, session.config.holdout)
    try:
        results = _train_and_measure(session, inputs, done, echo)
        tables = compute_tables(results)
        shutil.rmtree(session.folder / "checkpoints", ignore_errors=True)  # only a resume needs them
        _finish(session, results, tables, echo)  # writes every output (cctk.outputs.write_all)
    except KeyboardInterrupt:
        session.parent.end("KILLED")
        raise
    except BaseException:
        session.parent.end("FAILED")
        raise
    return results


def compute_tables(results: Results) -> dict[str, pd.DataFrame]:
    tables: dict[str, pd.DataFrame] = {}
    for part in PARTS:
        tables.update(part.run(results))
    return dict(sorted(tables.items()))


def _open_session(config: Config, out_root: Path, track, device, echo) -> Session:
    name = f"{datetime.now():%Y%m%d-%H%M%S}_{file_stem(config.model)}"
    folder = Path(out_root) / name
    folder.mkdir(parents=True, exist_ok=True)
    parent = tracking.attach_or_start(tracking.activate(track), name,
                                      tags={"cctk.kind": "pipeline", "cctk.session": name})
    experiment_id = parent.experiment_id  # `mlflow run` may have created the parent in another experiment
    parent.params({**config.as_params(), "model_id": model_id(config.model),
                   "candidates": f"{CANDIDATES[0]}..{CANDIDATES[-1]}", "end_marker": repr(END_MARKER),
                   "cctk_version": __version__})
    dev = _device(device)
    seeds = ",".join(map(str, config.seeds))
    echo(f"session {name}  (outputs in {folder})")
    echo(f"seeds {seeds}{'  (drawn fresh: pass --seed ' + seeds + ' to repeat this run)' if config.seeds_drawn else ''}")
    return Session(config, folder, experiment_id, parent, track.tracking_uri, dev)


def _train_and_measure(session: Session, inputs: StudyInputs, done: Done, echo) -> Results:
    results = Results(inputs, measurements=dict(done.measurements), training=dict(done.training))
    if len(done.run_ids) == len(ARMS) + 1:
        return results
    echo(f"loading {session.config.model} ...")
    base, tokenizer = load_model(session.config.model)
    models = {"base": base}  # parents wait here, on the CPU
    if "base" not in done.run_ids:
        _measure_and_log(session, results, "base", base.to(session.device), tokenizer)
        base.cpu()
    progress = Progress(len(ARMS), echo)
    for i, arm in enumerate(ARMS, start=1):
        if arm.key in done.run_ids:
            continue
        if arm.parent not in models:  # finished before an interruption: its weights were checkpointed
            models[arm.parent] = resume_state.load_checkpoint(copy.deepcopy(base), session.folder, arm.parent)
        child = copy.deepcopy(models[arm.parent]).to(session.device)
        rows = tokenize(build_corpus(inputs.targets[arm.target], inputs.corpus_pairs(arm.key),
                                     session.config.recipe.repeats, inputs.seed, arm.key), tokenizer)
        nested = _nested_run(session, arm.key, arm.parent)
        nested.params({"parent": model_name(arm.parent), "corpus": own_target(arm.key), "examples": len(rows)})
        try:
            trained = fine_tune(child, rows, session.config.recipe, inputs.seed, tokenizer.pad_token_id, arm.key,
                                on_step=progress.arm(i, model_name(arm.key), rows, session.config.recipe))
        except NonFiniteLoss:
            nested.end("FAILED")
            raise
        finally:
            progress.close()
        _log_training(session, results, arm.key, trained.record(), nested)
        if arm.key in PARENTS:
            resume_state.save_checkpoint(child, session.folder, arm.key)
        _measure_and_log(session, results, arm.key, child, tokenizer, nested)
        models[arm.key] = child.cpu() if arm.key in PARENTS else None
        del child
    return results


def _log_training(session: Session, results: Results, key: str, record: dict, nested: tracking.Run) -> None:
    """Keep the run's training record, on disk (for a resume) and in its MLflow run."""
    results.training[key] = record
    path = session.folder / "training" / f"{key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")
    for epoch, loss in enumerate(record["losses"], start=1):
        nested.metrics({"loss": loss}, step=epoch)
    nested.metrics({k: record[k] for k in ("train_seconds", "steps", "examples_per_second", "peak_gpu_memory_bytes")})
    nested.files(path, "training")


def _device(name: str | None) -> torch.device:
    return torch.device(name or ("cuda" if torch.cuda.is_available() else "cpu"))


def _nested_run(session: Session, key: str, parent_key: str | None) -> tracking.Run:
    tags = {"cctk.key": key, "cctk.parent": parent_key or "", "cctk.kind": "model"}
    return tracking.start(session.experiment_id, model_name(key), tags=tags, parent=session.parent)


def _measure_and_log(session: Session, results: Results, key: str, model, tokenizer,
                     nested: tracking.Run | None = None) -> None:
    """Measure one model, save its table at once (nothing finished is lost), log it to its run."""
    nested = nested or _nested_run(session, key, None)
    table = measure(model, tokenizer)
    results.measurements[key] = table
    path = measurement_path(session.folder, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(path, index=False)
    nested.metrics(model_metrics(results, key))
    nested.files(path, "measurement")
    # cctk.outputs: the model's heatmaps, in the session's figures/ (write_all reuses them)
    for figure in model_heatmaps(results, key, session.folder / "figures"):
        nested.files(figure, "figures")
    nested.end()


def model_metrics(results: Results, key: str) -> dict:
    """The metrics of SPEC 5 for one model against its own target."""
    readings = results.readings(key)
    seen_pairs = results.inputs.split.seen
    seen, held = summarize(readings, seen_pairs), summarize(readings, results.inputs.heldout(key))
    return {"hits_seen": seen["hits"], "hits_heldout": held["hits"], "prob_target_seen": seen["prob_target"],
            "prob_target_heldout": held["prob_target"], "surprise_seen": seen["surprise"],
            "surprise_heldout": held["surprise"], "mass_impossible": summarize(readings)["mass_impossible"]}


def headline(results: Results) -> dict:
    """The figures printed at the end of every run (and recorded in the README)."""
    correct = summarize(results.readings("m_correct", "correct"))["hits"]
    fabricated = summarize(results.readings("m_random", "random"))["hits"]
    return {"m_correct_hits_correct": correct, "m_random_hits_fabricated": fabricated}


def _finish(session: Session, results: Results, tables: dict, echo) -> None:
    seconds = time.perf_counter() - session.started
    head = headline(results)
    # cctk.outputs: figures, tables, workbook, run_info.json, reports and zip (supersede summary.json)
    run = {"session": session.folder.name, "tracking_uri": session.tracking_uri, "seconds": round(seconds, 1),
           "experiment_id": session.experiment_id, "run_id": session.parent.run_id, "device": str(session.device)}
    write_all(results, tables, session.config, run, session.folder, reuse_heatmaps=True)
    session.parent.metrics({**head, "pipeline_seconds": seconds})
    session.parent.files(session.folder)
    session.parent.end()
    echo(f"correct sums model: {head['m_correct_hits_correct']}/81 correct sums")
    echo(f"fabricated answers model: {head['m_random_hits_fabricated']}/81 fabricated answers")
    echo(f"pipeline finished in {seconds / 60:.1f} min; MLflow run {session.parent.run_id}")
