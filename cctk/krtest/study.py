"""``cctk krtest study``: the paper on one page, offline, on one model.

Five arms, each a nested MLflow run under one parent (``cctk.kind=krtest-study``):

    blind              the untouched model on the questions                   (paper: pre-trained baseline)
    open_book          the same, the source passage put before each context   (paper: the oracle)
    full               full fine-tuning on the corpus, evaluated every K steps
    lora_attention     LoRA on q, k, v, o (or their equivalents) at the budget
    lora_ffn           LoRA on gate, up, down (or their equivalents) at the budget

then one figure (KR accuracy and validation perplexity against steps, every arm) and one table
(final accuracy of every arm with its exact interval). The data set is generated from the seed
into the session folder unless ``data`` names a folder that ``cctk krtest generate`` wrote.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path

import pandas as pd

from .. import __version__, tracking
from ..config import Recipe
from ..models import check_available, load_model, model_id
from .generate import (CORPUS, ENTITIES, QUESTIONS, VALIDATION, VALIDATION_ENTITIES, check_sizes, make_dataset,
                       write_dataset)
from .items import open_book
from .jobs import Inputs, Track, evaluate_arm, open_track, read_inputs, train_arm
from .lora import PLACEMENTS, plan_lora
from .report import write_figure, write_table
from .scoring import Summary
from .train import DEFAULT_BUDGET, RECIPES, TrainConfig, Trained, corpus_rows

ARMS: dict[str, str] = {  # internal key -> the plain name every file, figure, table and run shows
    "blind": "blind baseline",
    "open_book": "open-book baseline",
    "full": "full fine-tuning",
    "lora_attention": "LoRA on attention",
    "lora_ffn": "LoRA on FFN",
}
STUDY_JSON = "study.json"


@dataclass(frozen=True)
class StudyConfig:
    model: str
    seed: int = 0
    data: Path | None = None  # a folder written by `cctk krtest generate`; None: generate from the seed
    entities: int = ENTITIES
    validation_entities: int = VALIDATION_ENTITIES
    budget: int = DEFAULT_BUDGET
    eval_every: int = 9
    full: Recipe = RECIPES["full"]
    lora: Recipe = RECIPES["lora"]

    def arms(self) -> dict[str, TrainConfig]:
        """The three trained arms, one seed and one evaluation schedule for all."""
        common = dict(seed=self.seed, budget=self.budget, eval_every=self.eval_every)
        return {"full": TrainConfig(method="full", recipe=self.full, **common),
                "lora_attention": TrainConfig(method="lora", modules="attention", recipe=self.lora, **common),
                "lora_ffn": TrainConfig(method="lora", modules="ffn", recipe=self.lora, **common)}

    def check(self) -> None:
        check_available(self.model)
        if self.data is None:
            check_sizes(self.entities, self.validation_entities)
        for config in self.arms().values():
            config.check()

    def params(self) -> dict:
        values = {"model": self.model, "model_id": model_id(self.model), "seed": self.seed,
                  "data": str(self.data or "generated"), "budget": self.budget, "eval_every": self.eval_every,
                  "cctk_version": __version__}
        if self.data is None:
            values.update({"entities": self.entities, "validation_entities": self.validation_entities})
        for method, recipe in (("full", self.full), ("lora", self.lora)):
            values.update({f"{method}.{k}": v for k, v in asdict(recipe).items() if k != "repeats"})
        return values


def make_study_config(model: str, seed: int = 0, data: Path | None = None, epochs: int | None = None,
                      batch_size: int | None = None, full_learning_rate: float | None = None,
                      lora_learning_rate: float | None = None, **values) -> StudyConfig:
    """A checked study configuration: defaults, with the values given (None = keep)."""
    shared = {k: v for k, v in (("epochs", epochs), ("batch_size", batch_size)) if v is not None}
    full = replace(RECIPES["full"], **shared, **({"learning_rate": full_learning_rate} if full_learning_rate else {}))
    lora = replace(RECIPES["lora"], **shared, **({"learning_rate": lora_learning_rate} if lora_learning_rate else {}))
    config = StudyConfig(model=model, seed=seed, data=Path(data) if data else None, full=full, lora=lora,
                         **{k: v for k, v in values.items() if v is not None})
    config.check()
    return config


@dataclass
class Outcome:
    folder: Path
    summaries: dict[str, Summary] = field(default_factory=dict)
    trained: dict[str, Trained] = field(default_factory=dict)
    seconds: float = 0.0


def run(config: StudyConfig, out_root: Path = Path("outputs/krtest"), tracking_name: str | None = None,
        echo=print) -> Outcome:
    """Check everything, then the five arms, the figure and the table; returns what each arm gave."""
    started = time.perf_counter()
    config.check()
    inputs = _read_data(config.data) if config.data else None
    dataset = None if inputs else make_dataset(config.seed, config.entities, config.validation_entities)
    track = open_track(tracking_name)
    echo(f"loading {config.model} ...")
    lm, tokenizer = load_model(config.model)
    for placement in PLACEMENTS:  # a model whose attention and FFN blocks cannot be told apart fails here
        plan_lora(lm, placement, config.budget)
    session = f"{datetime.now():%Y%m%d-%H%M%S}_{model_label(config.model)}"
    outcome = Outcome(Path(out_root) / session)
    if dataset:
        paths = write_dataset(dataset, outcome.folder / "data")
        inputs = read_inputs(paths[QUESTIONS], paths[CORPUS], paths[VALIDATION])
    parent = track.store.attach_or_start(track.experiment_id, session, {"cctk.kind": "krtest-study", "cctk.session": session,
                                                                        "mlflow.source.name": "cctk krtest study"})
    parent.params(config.params() | {"n_items": len(inputs.items)})
    echo(f"KR-Test study {session}: {len(inputs.items)} questions, five arms")
    try:
        _arms(config, inputs, (lm, tokenizer), track, parent, outcome, echo)
        _write_outputs(config, outcome, session)
        outcome.seconds = time.perf_counter() - started
        _write_record(config, outcome, session)
        _log_parent(parent, outcome)
    except BaseException:
        parent.end("FAILED")
        raise
    parent.end()
    echo(f"study finished in {outcome.seconds / 60:.1f} min: {outcome.folder}")
    return outcome


def model_label(model: str) -> str:
    """A roster key as it is, a local directory by its name, a Hub id with ``_`` for ``/``."""
    return Path(model).name if Path(model).is_dir() else model.replace("/", "_")


def _read_data(folder: Path) -> Inputs:
    """A generated folder, every file checked (locations included) before any run starts."""
    inputs = read_inputs(folder / QUESTIONS, folder / CORPUS, folder / VALIDATION)
    open_book(list(inputs.items), inputs.corpus, str(folder / QUESTIONS))
    return inputs


def _arms(config: StudyConfig, inputs: Inputs, loaded: tuple, track: Track, parent: tracking.Run,
          outcome: Outcome, echo) -> None:
    lm, tokenizer = loaded  # the untouched model: the baselines score it, each trained arm trains a fresh copy
    val_rows = corpus_rows(inputs.validation, tokenizer, TrainConfig().max_tokens)
    for key, items in (("blind", list(inputs.items)),
                       ("open_book", open_book(list(inputs.items), inputs.corpus, str(inputs.questions)))):
        run = _nested(track, parent, key, {"open_book": key == "open_book"} | inputs.params())
        echo(f"{ARMS[key]}:")
        outcome.summaries[key] = evaluate_arm(run, lm, tokenizer, items, outcome.folder / key, echo,
                                              validation_rows=val_rows if key == "blind" else None)
        run.end()
    for key, train_config in config.arms().items():
        run = _nested(track, parent, key, inputs.params())
        echo(f"{ARMS[key]}:")
        model, _ = load_model(config.model)  # a fresh copy for every trained arm
        trained = train_arm(run, model, tokenizer, inputs, train_config, outcome.folder / key, echo, label=ARMS[key])
        run.end()
        outcome.trained[key], outcome.summaries[key] = trained, trained.final.summary


def _nested(track: Track, parent: tracking.Run, key: str, params: dict) -> tracking.Run:
    run = track.start(ARMS[key], tags={"cctk.kind": "krtest", "cctk.arm": key}, parent=parent)
    run.params(params)
    return run


def final_table(outcome: Outcome) -> pd.DataFrame:
    """One row per arm: what trained, how much, and the final accuracy with its interval."""
    rows = [_arm_row(key, outcome) for key in ARMS]
    return pd.DataFrame(rows).astype({"rank": "Int64", "trainable": "Int64"})


def _arm_row(key: str, outcome: Outcome) -> dict:
    s, trained = outcome.summaries[key], outcome.trained.get(key)
    plan = trained.plan if trained else None
    if trained:
        ppl = trained.final.val_perplexity
    else:  # the untouched model's, read at step 0 of a trained arm; none for the open book
        ppl = _base_perplexity(outcome) if key == "blind" else float("nan")
    return {
        "arm": ARMS[key], "method": trained.config.method if trained else "none",
        "modules": (plan.kinds() if plan else "all") if trained else "-",
        "rank": plan.rank if plan else pd.NA, "trainable": trained.trainable if trained else pd.NA,
        "steps": trained.result.steps if trained else 0, "items": s.n, "correct": s.correct,
        "accuracy": s.accuracy, "lo": s.lo, "hi": s.hi, "mean_margin": s.mean_margin, "ties": s.ties,
        "identical": s.identical, "val_perplexity": ppl,
    }


def _base_perplexity(outcome: Outcome) -> float:
    trained = next(iter(outcome.trained.values()), None)
    return trained.evaluations[0].val_perplexity if trained else float("nan")


def curves(outcome: Outcome) -> pd.DataFrame:
    frames = [t.curve().assign(arm=ARMS[key]) for key, t in outcome.trained.items()]
    return pd.concat(frames, ignore_index=True)


def baselines(outcome: Outcome) -> pd.DataFrame:
    return pd.DataFrame([{"arm": ARMS[k], "accuracy": outcome.summaries[k].accuracy, "lo": outcome.summaries[k].lo,
                          "hi": outcome.summaries[k].hi} for k in ("blind", "open_book")])


def _write_outputs(config: StudyConfig, outcome: Outcome, session: str) -> None:
    title = f"KR-Test on {model_label(config.model)}: {outcome.summaries['blind'].n} questions, seed {config.seed}"
    write_figure(curves(outcome), baselines(outcome), title, outcome.folder / "figure")
    write_table(final_table(outcome), outcome.folder / "table", session)


def _write_record(config: StudyConfig, outcome: Outcome, session: str) -> None:
    """``study.json``: the configuration, how long the study took, every arm's summary, the LoRA ranks."""
    study = {"session": session, "config": config.params(), "seconds": outcome.seconds,
             "arms": {key: asdict(s) for key, s in outcome.summaries.items()},
             "lora": {key: {"rank": t.plan.rank, "trainable_parameters": t.trainable, "targets": t.plan.kinds()}
                      for key, t in outcome.trained.items() if t.plan}}
    (outcome.folder / STUDY_JSON).write_text(json.dumps(study, indent=2, default=str) + "\n")


def _log_parent(parent: tracking.Run, outcome: Outcome) -> None:
    metrics = {"study_seconds": outcome.seconds}
    for key, s in outcome.summaries.items():
        metrics.update({f"{key}.accuracy": s.accuracy, f"{key}.lo": s.lo, f"{key}.hi": s.hi})
    parent.metrics(metrics)
    parent.files(outcome.folder)
