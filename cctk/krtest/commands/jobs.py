"""``cctk krtest eval`` and ``cctk krtest train``: check every input, load, score or train, write, track.

Every input (model name, files and their fields, recipe values, budget, tracking store) is checked
before any output folder or MLflow run exists. Every KR-Test run goes through the toolkit's one run
lifecycle (``tracking.Store.run``: FINISHED, FAILED with the error as a tag, KILLED on Ctrl-C or
SIGTERM). ``evaluate_arm`` and ``train_arm`` are shared with the study, which nests them under its run.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from ... import __version__
from ...core.errors import CctkError
from ...core.lm import compute, memory
from ...core.lm.corpus import most_shared
from ...core.lm.device import check_recipe, measurement_plan, placed, resolve as resolve_device, room
from ...core.lm.finetune import MIN_SHARED
from ...core.lm.models import check_available, load_model, load_tokenizer, model_config, stated_context
from ...core.lm.record import TrainRecord
from ...core.lm.scoring import pad_id
from ...store import tracking
from .. import RUN
from ..generation.generate import VALIDATION
from ..measurement.items import (
    MAX_TOKENS,
    Item,
    check_locations,
    dataset_name,
    log_questions,
    read_corpus,
    read_items,
    with_book,
)
from ..measurement.lora import plan_lora
from ..measurement.passages import Passage, check_segment, segment as segment_corpus
from ..measurement.report import write_curve, write_evaluation
from ..measurement.scoring import Summary, check_fits, score, summarize
from ..measurement.train import (
    PERPLEXITY_LOGIT_COPIES,
    Evaluation,
    TrainConfig,
    Trained,
    corpus_rows,
    perplexity,
    train,
)
from . import timing

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from ...core.lm.corpus import Row

SUMMARY_METRICS = ("n", "correct", "accuracy", "lo", "hi", "mean_margin", "ties", "identical")


@dataclass(frozen=True)
class Inputs:
    """A question file read and checked, with the texts it is scored or trained against.

    ``location`` and ``segment`` say how the items' locations point into the corpus; with a corpus,
    every location has been checked to fall in one of its ``passages``."""

    questions: Path
    items: tuple[Item, ...]
    corpus: str | None = None
    validation: str | None = None
    corpus_path: Path | None = None
    location: str = "char"
    segment: str = "blank-lines"
    passages: tuple[Passage, ...] = ()

    def params(self) -> dict[str, str | int]:
        return {
            "questions": str(self.questions),
            "n_items": len(self.items),
            "location": self.location,
            "segment": self.segment,
        }

    def book(self) -> list[Item]:
        """The items with their source passages before their contexts (the open book)."""
        return with_book(list(self.items), list(self.passages), self.location)

    def log(self, run: tracking.LiveRun) -> None:
        """The questions (and the corpus, as its passages) as MLflow dataset inputs of ``run``."""
        log_questions(run, self.items, str(self.questions))
        if self.corpus_path is not None:
            corpus = pd.DataFrame([{"location": p.location(self.location), "passage": p.text} for p in self.passages])
            run.dataset(corpus, dataset_name("corpus", self.corpus_path), str(self.corpus_path), context="training")


def read_inputs(
    questions: Path,
    corpus: Path | None = None,
    validation: Path | None = None,
    need_corpus: bool = False,
    need_validation: bool = False,
    location: str = "char",
    segment: str = "blank-lines",
    tokenizer: PreTrainedTokenizerBase | None = None,
    scoring_tokenizer: PreTrainedTokenizerBase | None = None,
    max_tokens: int = MAX_TOKENS,
) -> Inputs:
    """Read and check the files (every item's location against the corpus); a missing one that is needed
    fails in one line. ``tokenizer`` only for ``segment="tokens:N"``; ``scoring_tokenizer``: each text
    field within ``max_tokens`` of its tokens (else within ``items.MAX_CHARS`` characters)."""
    check_segment(segment, location)
    items = tuple(read_items(questions, scoring_tokenizer, max_tokens))
    if need_corpus and corpus is None:
        raise CctkError("this needs --corpus FILE (the corpus the questions' locations point into)")
    if need_validation and validation is None and corpus is not None:
        validation = Path(corpus).with_name(VALIDATION)
        if not validation.is_file():
            raise CctkError(f"no --validation FILE given and no {VALIDATION} beside the corpus ({validation})")
    text = read_corpus(corpus) if corpus else None
    found = tuple(segment_corpus(text, segment, tokenizer)) if text else ()
    if text:
        check_locations(list(items), list(found), location, str(questions))
    return Inputs(
        Path(questions),
        items,
        text,
        read_corpus(validation, "validation") if validation else None,
        Path(corpus) if corpus else None,
        location,
        segment,
        found,
    )


@dataclass(frozen=True)
class Track:
    """Where KR-Test runs go: a tracking store (checked reachable) and its cctk experiment."""

    store: tracking.Store
    experiment_id: str

    def run(
        self,
        name: str,
        tags: dict[str, str],
        parent: tracking.LiveRun | None = None,
        kind: str = RUN,
        attach: bool = False,
    ) -> AbstractContextManager[tracking.LiveRun]:
        """A run in the one lifecycle (a context manager); ``attach``: ``mlflow run``'s run when there is one. A
        nested run goes to its parent's experiment."""
        experiment = self.experiment_id if parent is None else None
        return self.store.run(kind, name, {"mlflow.source.name": "cctk krtest", **tags}, parent, experiment, attach)


def open_track(tracking_name: str | None) -> Track:
    """The store and experiment, after checking that the store answers."""
    store = tracking.connect(tracking_name)
    return Track(store, store.experiment())


def run_eval(
    model: str,
    questions: Path,
    out: Path,
    corpus: Path | None = None,
    book: bool = False,
    tracking_name: str | None = None,
    echo: Callable[[str], None] = print,
    location: str = "char",
    segment: str = "blank-lines",
    tokenizer_name: str | None = None,
    device: str | None = None,
) -> Summary:
    """``cctk krtest eval``: score one untouched model on a question file (``book``: open book)."""
    if tokenizer_name is not None and not (segment.startswith("tokens:") and corpus is not None):
        raise CctkError("--tokenizer names what cut a corpus into --segment tokens:N windows; give both and --corpus")
    where = resolve_device(device)
    found = check_available(model)
    check_segment(segment, location)
    from ..generation.from_corpus import load_tokenizer

    scoring = load_tokenizer(model)  # the model's own: the bound is in its tokens
    tokenizer = None
    if segment.startswith("tokens:") and corpus is not None:
        tokenizer = load_tokenizer(tokenizer_name) if tokenizer_name else scoring
    config = model_config(model)  # read once: its context bounds the items, its shape the plan
    limit = stated_context(config) or MAX_TOKENS  # a model that states none: ``items.MAX_TOKENS``
    inputs = read_inputs(
        questions,
        corpus,
        need_corpus=book,
        location=location,
        segment=segment,
        tokenizer=tokenizer,
        scoring_tokenizer=scoring,
        max_tokens=limit,
    )
    items = inputs.book() if book else list(inputs.items)
    check_fits(scoring, items, limit, str(questions))
    plan = measurement_plan(model, config, where)  # before it is loaded
    track = open_track(tracking_name)
    echo(f"loading {model} ...")
    lm, tokenizer = load_model(found, keep=False)  # the only copy: no pristine twin waits in host memory
    key = "open_book" if book else "blind"
    with track.run(f"krtest eval {model}", {tracking.ARM: key}) as run:
        run.params(
            {
                "model": found.key,
                "model_id": found.id,
                "open_book": book,
                "corpus": str(corpus or ""),
                "cctk_version": __version__,
                **inputs.params(),
            }
        )
        inputs.log(run)
        with placed(lm, plan, where, "the evaluation") as lm:
            summary = evaluate_arm(run, lm, tokenizer, items, Path(out), echo).summary
    echo(track.store.link(run.run_id))
    return summary


def check_rows(model: str, max_tokens: int, option: str | None = "--max-tokens") -> None:
    """Training rows of ``max_tokens`` within what ``model`` reads, in one line before any work: rows past its
    position embeddings fail in the model (learned positions) or train where it never read (rotary ones).
    ``option``: the option that sets them (None: fixed, as the study's)."""
    limit = stated_context(model_config(model))
    if limit is None or max_tokens <= limit:
        return
    where = f"{model}'s context ({limit} tokens, its position embeddings)"
    raise CctkError(
        f"{option} {max_tokens} is past {where}: give at most {limit}"
        if option
        else f"training rows of {max_tokens} tokens are past {where}: it needs a model that reads {max_tokens}"
    )


def evaluate_arm(
    run: tracking.LiveRun,
    lm: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    items: list[Item],
    out: Path,
    echo: Callable[[str], None] = print,
    validation_rows: Sequence[Row] | None = None,
) -> Evaluation:
    """Score, write ``items.csv``, ``by_passage.csv`` and ``summary.json``, print the accuracy, log metrics
    and files; returns the evaluation (the model's step 0; its validation perplexity nan without
    ``validation_rows``)."""
    start = time.perf_counter()
    table = score(lm, tokenizer, items)
    summary = summarize(table)
    metrics = {k: getattr(summary, k) for k in SUMMARY_METRICS}
    metrics["eval_seconds"] = time.perf_counter() - start
    ppl = math.nan
    if validation_rows is not None:
        ppl = metrics["val_perplexity"] = perplexity(lm, validation_rows, pad_id(tokenizer))
    paths = write_evaluation(table, summary, out)
    echo(summary.line())
    run.metrics(metrics)
    for path in paths:
        run.files(path)
    return Evaluation(0, summary, ppl, math.nan, table)


def run_train(
    model: str,
    inputs: Inputs,
    config: TrainConfig,
    out: Path,
    tracking_name: str | None = None,
    echo: Callable[[str], None] = print,
    device: str | None = None,
) -> Trained:
    """``cctk krtest train``: fine-tune on the corpus, KR-Test and perplexity every K steps, tracked."""
    where = resolve_device(device)
    found = check_available(model)
    config.check()
    check_rows(model, config.max_tokens)
    check_recipe(config.recipe, where)
    if inputs.corpus is None or inputs.validation is None:
        raise CctkError(
            "krtest train trains on a corpus and is evaluated on its validation text: read the inputs with both "
            "(need_corpus=True, need_validation=True)"
        )
    rows = corpus_rows(inputs.corpus, load_tokenizer(found), config.max_tokens)  # as ``train`` cuts them
    plan = memory_plan(model, config, where, rows=rows)
    plan.check()
    estimate = plan.expected_peak()  # before the model loads: the process now and what the run adds
    track = open_track(tracking_name)
    echo(f"loading {model} ...")
    lm, tokenizer = load_model(found, keep=False)  # the only copy, as planned (no pristine twin in host memory)
    if config.method == "lora":  # a model whose attention and FFN blocks cannot be told apart fails here
        plan_lora(lm, config.modules, config.budget, config.rank)
    name = f"krtest train {model} {arm_key(config).replace('_', ' ')}"
    with track.run(name, {tracking.ARM: arm_key(config)}) as run:
        run.params({"model": found.key, "model_id": found.id, "cctk_version": __version__, **inputs.params()})
        run.metrics({"memory_estimate_bytes": estimate})
        inputs.log(run)
        with placed(lm, plan, where, f"the {arm_key(config)} arm") as lm:
            cut = rows, corpus_rows(inputs.validation, tokenizer, config.max_tokens)  # the plan's rows, not cut again
            cost = timing.planned_cost(lm, rows, config, compute.peak_gflops(str(where), config.recipe.precision))

            def forecast(per_eval: float) -> None:  # once step 0 is evaluated: as long as each evaluation after it
                line, metrics = timing.forecast([(config, cost)], len(rows), per_eval, where.type)
                echo(line)
                run.metrics(metrics)

            label = arm_key(config)
            trained = train_arm(run, lm, tokenizer, inputs, config, Path(out), echo, label, cut=cut, forecast=forecast)
            run.metrics(timing.arm_metrics(trained, cost))
        if trained.result.peak_bytes:
            run.metrics({"peak_memory_bytes": trained.result.peak_bytes})
            echo(peak_line(trained.result, estimate))
    echo(track.store.link(run.run_id))
    return trained


def peak_line(result: TrainRecord, estimate: int) -> str:
    """The measured peak beside the plan's estimate, in words."""
    where = "resident memory" if result.peak_cpu_memory_bytes else "GPU memory"
    return f"peak {where} {memory.gib(result.peak_bytes)}, {memory.gib(estimate)} planned"


def memory_plan(
    model: str, config: TrainConfig, where: torch.device, waiting: int = 0, rows: Sequence[Row] | None = None
) -> memory.Plan:
    """KR-Test training's memory against the device (``cctk.core.lm.memory``): ``rows``, the training rows (None: rows
    of up to ``max_tokens``, as many as a batch holds, which may go packed), each token supervised, evaluated
    every K steps while the gradients and moments live (the scorer and the perplexity in chunks of
    ``LOGIT_BUDGET``, three budgets held at once); LoRA trains its budget. ``waiting``: copies in host memory
    (the study's untouched model)."""
    job = memory.Job(
        trained=config.budget if config.method == "lora" else None,
        supervised=config.max_tokens,
        measured_in_training=True,
        logit_copies=PERPLEXITY_LOGIT_COPIES,
        row_option="--max-tokens",
        most_rows=len(rows) if rows else None,
        distinct_rows=len({tuple(ids) for ids, _ in rows}) if rows else None,
        packs=most_shared(rows) >= MIN_SHARED if rows else True,  # passages rarely share 10% of their tokens
    )
    longest = max(len(ids) for ids, _ in rows) if rows else config.max_tokens
    shape = memory.Shape.of_config(model_config(model))
    return memory.Plan(model, shape, config.recipe, longest, room(where), waiting, job=job)


def arm_key(config: TrainConfig) -> str:
    return "full" if config.method == "full" else f"lora_{config.modules}"


def train_arm(
    run: tracking.LiveRun,
    lm: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    inputs: Inputs,
    config: TrainConfig,
    out: Path,
    echo: Callable[[str], None] = print,
    label: str = "",
    untouched: Evaluation | None = None,
    cut: tuple[list[Row], list[Row]] | None = None,
    forecast: Callable[[float], None] | None = None,
) -> Trained:
    """Train with live metric histories (step = optimizer step), then write and log the final files;
    ``untouched``: step 0, where the caller evaluated the untouched model already; ``cut``: the corpus's and the
    validation text's rows, where the caller cut them already (``train``); ``forecast``: called with the seconds
    step 0's evaluation took, where this arm makes it (before the first optimizer step)."""
    assert inputs.corpus is not None and inputs.validation is not None, "a trained arm's inputs have both texts"
    run.params(config.params())
    plan = plan_lora(lm, config.modules, config.budget, config.rank) if config.method == "lora" else None
    if plan:
        run.params(
            {
                "lora.rank": plan.rank,
                "lora.trainable_parameters": plan.trainable,
                "lora.targets": plan.kinds(),
                "lora.n_modules": len(plan.targets),
                "lora.alpha": 2 * plan.rank,
            }
        )
        echo(
            f"{label}: LoRA rank {plan.rank} on {len(plan.targets)} modules ({plan.kinds()}): "
            f"{plan.trainable:,} trainable parameters for a budget of {plan.budget:,}"
        )
    started = time.perf_counter()

    def on_eval(point: Evaluation) -> None:
        run.metrics({k: v for k, v in point.record().items() if k not in ("step", "train_loss")}, step=point.step)
        loss = "" if math.isnan(point.train_loss) else f", loss {point.train_loss:.3f}"
        echo(
            f"{label} step {point.step}: KR {100 * point.summary.accuracy:.1f}% "
            f"[{100 * point.summary.lo:.1f}-{100 * point.summary.hi:.1f}], val perplexity "
            f"{point.val_perplexity:.2f}{loss} ({time.perf_counter() - started:.0f} s)"
        )
        if point.step == 0 and forecast is not None and untouched is None:
            forecast(time.perf_counter() - started)

    trained = train(
        lm,
        tokenizer,
        list(inputs.items),
        inputs.corpus,
        inputs.validation,
        config,
        on_eval=on_eval,
        on_loss=lambda step, loss: run.metrics({"train_loss": loss}, step=step),
        untouched=untouched,
        cut=cut,
    )
    _finish(run, trained, Path(out), echo)
    return trained


def _finish(run: tracking.LiveRun, trained: Trained, out: Path, echo: Callable[[str], None]) -> None:
    final = trained.final
    paths = [*write_evaluation(final.items, final.summary, out), write_curve(trained.curve(), out)]
    metrics = {
        **{k: getattr(final.summary, k) for k in SUMMARY_METRICS},
        "final_val_perplexity": final.val_perplexity,
        "trainable_parameters": trained.trainable,
        "steps": trained.result.steps,
        "train_seconds": trained.train_seconds,
        "eval_seconds": trained.eval_seconds,
        **trained.result.peaks(),  # as a pipeline arm logs them
    }
    if trained.result.skipped_steps is not None:  # fp16: steps the loss scaler skipped, as a pipeline arm logs them
        metrics["skipped_steps"] = trained.result.skipped_steps
    run.metrics(metrics, step=trained.result.steps)
    run.params({"trainable_parameters": trained.trainable})
    for path in paths:
        run.files(path)
    echo(f"after {trained.result.steps} steps: {final.summary.line()}")
