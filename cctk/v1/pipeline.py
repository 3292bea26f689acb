"""``cctk run --protocol v1``: manual 1.0.0's pipeline as one parent MLflow run and two nested runs.

Order, as the reference notebook's (Listings 1-12): check every input, draw the fabricated answers
and the corpus (``random.seed``, written to targets.csv and corpus.txt at once), measure the base
model (nested run ``base model``), fine-tune that same model in place on the whole texts, measure it
again (nested run ``fabricated answers``), then the comparison table, figures and reports.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .. import __version__, models, session, tracking
from ..config import Config
from ..finetune import fine_tune
from ..names import model_name
from ..progress import Progress
from ..records import RunFacts, RunRecord, hardware, software
from ..scoring import measure
from ..session import Layout
from . import corpus, facts, outputs
from .experiment import AFTER, BEFORE, Results, compute_tables, headline, model_metrics


@dataclass
class Session:
    config: Config
    layout: Layout
    store: tracking.Store
    parent: tracking.Run
    device: torch.device
    started: float = field(default_factory=time.perf_counter)


def run(config: Config, out_root: Path = Path("outputs"), tracking_name: str | None = None,
        device: str | None = None, echo=print) -> Results:
    """Run protocol v1 for ``config`` (``config.protocol == "v1"``); returns its results."""
    assert config.protocol == "v1", config.protocol
    models.check_available(config.model)  # every check before any folder or MLflow run exists
    store = tracking.connect(tracking_name)
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    run_ = _open_session(config, Path(out_root), store, device, echo)
    with tracking.ending(run_.parent):  # FINISHED, FAILED (any error) or KILLED (Ctrl-C, SIGTERM)
        results = _measure_train_measure(run_, echo)
        _finish(run_, results, echo)
    return results


def _open_session(config: Config, out_root: Path, store: tracking.Store, device, echo) -> Session:
    folder = session.new_folder(out_root, config.model)
    name = folder.name
    layout = Layout(folder, "v1")
    tags = {tracking.KIND: "pipeline", tracking.PROTOCOL: "v1", tracking.SESSION: name}
    parent = store.attach_or_start(store.experiment(), name, tags)
    parent.params({**config.as_params(), "model_id": models.model_id(config.model),
                   "candidates": f"{facts.CANDIDATES[0]}..{facts.CANDIDATES[-1]}", "end_marker": "none",
                   "answer_text": '" {v}"', "index": "mean log-prob per token", "loss": "whole text",
                   "cctk_version": __version__})
    echo(f"session {name}  (protocol v1, manual 1.0.0; outputs in {layout.folder})")
    echo(f"profile {config.profile_note}; seed {config.seed} (random.seed of the reference notebook)")
    return Session(config, layout, store, parent, device)


def _measure_train_measure(run: Session, echo) -> Results:
    config = run.config
    draws = facts.draw(config.seed, config.recipe.repeats)
    for path in session.write_v1_draws(run.layout, draws):  # on file before any training
        run.parent.files(path)
    results = Results(draws, {})
    echo(f"loading {config.model} ...")
    model, tokenizer = models.load_model(config.model)
    model.to(run.device)
    with _nested(run, BEFORE, None) as nested:
        _measure_and_log(run, results, BEFORE, model, tokenizer, nested)
    rows = corpus.tokenize(draws.texts, tokenizer)
    with _nested(run, AFTER, BEFORE) as nested:
        nested.params({"parent": model_name(BEFORE), "corpus": "fabricated answer, all 81, whole text",
                       "examples": len(rows)})
        progress = Progress(1, echo)
        try:  # the one model, in place (manual 1.0.0, section 4.7)
            results.training = fine_tune(model, rows, config.recipe, config.seed, tokenizer.pad_token_id, AFTER,
                                         on_step=progress.arm(1, model_name(AFTER), rows, config.recipe))
        finally:
            progress.close()
        for epoch, loss in enumerate(results.training.losses, start=1):
            nested.metrics({"loss": loss}, step=epoch)
        nested.metrics(results.training.metrics())
        nested.files(session.write_training(run.layout, AFTER, results.training), "training")
        _measure_and_log(run, results, AFTER, model, tokenizer, nested)
    return results


def _nested(run: Session, key: str, parent_key: str | None):
    """A measured model's nested run, ended by the lifecycle."""
    tags = {tracking.KEY: key, tracking.PARENT_KEY: parent_key or "", tracking.PROTOCOL: "v1"}
    return run.store.run("model", model_name(key), tags, parent=run.parent,
                         experiment_id=run.parent.experiment_id)


def _measure_and_log(run: Session, results: Results, key: str, model, tokenizer, nested: tracking.Run) -> None:
    """Measure with 1.0.0's candidates, answer text and index; save the table at once; log it."""
    table = measure(model, tokenizer, candidates=facts.CANDIDATES, answer=facts.answer_text, index=facts.INDEX)
    results.measurements[key] = table
    nested.metrics(model_metrics(results, key))
    nested.files(session.write_measurement(run.layout, key, table), "measurement")


def _finish(run: Session, results: Results, echo) -> None:
    tables = compute_tables(results)
    seconds = time.perf_counter() - run.started
    facts_ = RunFacts(run.layout.session, run.store.uri, run.parent.experiment_id, run.parent.run_id,
                      str(run.device), round(seconds, 1), hardware(), software())
    record = RunRecord(run.config, facts_, {AFTER: results.training})
    n_figures = outputs.write_all(results, tables, record, run.layout)
    head = headline(results)
    run.parent.metrics({**head, "pipeline_seconds": seconds})
    run.parent.files(run.layout.folder)
    n = head["n_additions"]
    echo(f"before: mean probability of the true sum {head['mean_pre_ft_true_prob']:.3f}, "
         f"{head['hits_true_before']}/{n} true sums")
    echo(f"after: mean probability of the fabricated answer {head['mean_post_ft_fabricated_prob']:.3f}, "
         f"{head['hits_fabricated_after']}/{n} fabricated answers; of the true sum "
         f"{head['mean_post_ft_true_prob']:.3f}, {head['hits_true_after']}/{n}")
    echo(f"{n_figures} figures and {len(tables)} tables in {run.layout.folder}")
    echo(f"protocol v1 finished in {seconds / 60:.1f} min; MLflow run {run.parent.run_id}")
