"""``cctk krtest study``: the paper on one page, offline, on one model.

Five arms, each a nested MLflow run under one parent (``cctk.kind=krtest-study``):

    blind              the untouched model on the questions                   (paper: pre-trained baseline)
    open_book          the same, the source passage put before each context   (an upper bound, as the paper's
                                                                              oracle is; that is krtest oracle)
    full               full fine-tuning on the corpus, evaluated every K steps
    lora_attention     LoRA on q, k, v, o (or their equivalents) at the budget
    lora_ffn           LoRA on gate, up, down (or their equivalents) at the budget

then one figure (KR accuracy and validation perplexity against steps, every arm) and one table
(final accuracy of every arm with its exact interval). The data set is generated from the seed
into the session folder unless ``data`` names a folder that ``cctk krtest generate`` wrote. The two
LoRA arms train the same number of parameters as nearly as their ranks allow (``lora.plan_pair``):
both counts and their difference are printed, logged and recorded. The session folder is created
exclusively (``cctk.store.session.new_folder``): two studies started in the same second get two folders.
``cctk.krtest.commands.seeds`` runs the study once per seed under one sweep run.
"""

from __future__ import annotations

import copy
import functools
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from ... import __version__
from ...core.config import Recipe
from ...core.errors import CctkError
from ...core.lm import compute, memory
from ...core.lm.device import check_recipe, placed, resolve as resolve_device
from ...core.lm.models import check_available, load_model, load_tokenizer, model_id
from ...store import tracking
from ...store.session import new_folder
from .. import ARMS, STUDY_RUN
from ..generation.generate import (
    CORPUS,
    ENTITIES,
    QUESTIONS,
    VALIDATION,
    VALIDATION_ENTITIES,
    check_sizes,
    make_dataset,
    write_dataset,
)
from ..measurement.lora import DEFAULT_BUDGET, PairPlan, plan_pair
from ..measurement.passages import check_segment
from ..measurement.report import write_figure, write_table
from ..measurement.scoring import Summary
from ..measurement.train import RECIPES, TrainConfig, Trained, corpus_rows
from . import timing
from .jobs import (
    Inputs,
    Track,
    check_rows,
    evaluate_arm,
    memory_plan,
    open_track,
    read_inputs,
    train_arm,
)

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from ...core.lm.corpus import Row
    from ...core.lm.models import Loaded
    from ..measurement.train import Evaluation

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
    location: str = "char"  # what the locations of a --data folder's items count
    corpus: Path | None = None  # with --data: the text its questions point into (default: its corpus.txt)
    validation: Path | None = None  # with --data: the validation text (default: its validation.txt, else beside
    # the corpus)
    device: str = "cpu"  # where every arm is scored and trained (resolved and checked: cctk.core.lm.device)

    def arms(self, ranks: tuple[int, int] | None = None) -> dict[str, TrainConfig]:
        """The three trained arms, one seed and one evaluation schedule for all; ``ranks``: the LoRA ranks
        (attention, FFN) of the matched pair (None: each the closest to the budget)."""
        arm = functools.partial(TrainConfig, seed=self.seed, budget=self.budget, eval_every=self.eval_every)
        attention, ffn = ranks or (None, None)
        return {
            "full": arm(method="full", recipe=self.full),
            "lora_attention": arm(method="lora", modules="attention", recipe=self.lora, rank=attention),
            "lora_ffn": arm(method="lora", modules="ffn", recipe=self.lora, rank=ffn),
        }

    def check(self) -> None:
        where = resolve_device(self.device)
        check_available(self.model)
        check_segment("blank-lines", self.location)
        if self.data is None:
            check_sizes(self.entities, self.validation_entities)
        else:
            check_data(self.data, self.corpus, self.validation)
        for config in self.arms().values():
            config.check()
            check_rows(self.model, config.max_tokens, option=None)
            check_recipe(config.recipe, where)
        for plan in self.plans.values():
            plan.check()

    @functools.cached_property
    def plans(self) -> dict[str, memory.Plan]:
        """Each trained arm's memory by key: it trains a fresh copy on the study's rows while the untouched model
        waits in host memory. Worked out once, at the check, against the memory free then: the start's estimate
        and each arm's checks once placed are against these."""
        where = resolve_device(self.device)
        arms = self.arms().items()
        return {key: memory_plan(self.model, config, where, waiting=1, rows=self.training_rows) for key, config in arms}

    @functools.cached_property
    def training_rows(self) -> list[Row]:
        """The rows every trained arm trains on (one ``max_tokens`` for all), cut as ``train`` cuts them: the corpus
        of ``--data``, or the one the seed generates, in the model's tokens (its tokenizer alone, read once)."""
        (max_tokens,) = {arm.max_tokens for arm in self.arms().values()}
        if self.data:
            text = _read_data(self).corpus
        else:
            text = make_dataset(self.seed, self.entities, self.validation_entities).corpus
        assert text is not None  # a --data folder's corpus is checked present
        return corpus_rows(text, load_tokenizer(self.model), max_tokens)

    def params(self) -> dict[str, Any]:
        values = {
            "model": self.model,
            "model_id": model_id(self.model),
            "seed": self.seed,
            "data": str(self.data or "generated"),
            "budget": self.budget,
            "eval_every": self.eval_every,
            "cctk_version": __version__,
        }
        if self.data is None:
            values.update({"entities": self.entities, "validation_entities": self.validation_entities})
        else:
            inputs = data_files(self.data, self.corpus, self.validation)
            values.update({"corpus": str(inputs[1]), "validation": str(inputs[2])})
        for method, recipe in (("full", self.full), ("lora", self.lora)):
            values.update({f"{method}.{k}": v for k, v in asdict(recipe).items() if k != "repeats"})
        return values


def make_study_config(
    model: str,
    seed: int = 0,
    data: Path | None = None,
    epochs: int | None = None,
    batch_size: int | None = None,
    full_learning_rate: float | None = None,
    lora_learning_rate: float | None = None,
    full_epochs: int | None = None,
    lora_epochs: int | None = None,
    **values: Any,
) -> StudyConfig:
    """A checked study configuration: defaults, with the values given (None = keep); ``full_*`` and
    ``lora_*`` override ``epochs`` and the default rate for full fine-tuning or both LoRA arms."""
    shared = _given(epochs=epochs, batch_size=batch_size)
    full = replace(RECIPES["full"], **shared | _given(epochs=full_epochs, learning_rate=full_learning_rate))
    lora = replace(RECIPES["lora"], **shared | _given(epochs=lora_epochs, learning_rate=lora_learning_rate))
    values["device"] = str(resolve_device(values.get("device")))
    config = StudyConfig(
        model=model, seed=seed, data=Path(data) if data else None, full=full, lora=lora, **_given(**values)
    )
    config.check()
    return config


def _given(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


@dataclass
class StudyOutcome:
    folder: Path
    pair: PairPlan  # the matched LoRA pair, planned before any arm
    seed: int = 0
    memory_estimate: int = 0  # the largest trained arm's expected peak (``Plan.expected_peak``), at the start
    run_id: str = ""  # the study's parent run
    summaries: dict[str, Summary] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)  # the final item table of every arm
    run_ids: dict[str, str] = field(default_factory=dict)  # every arm's run
    trained: dict[str, Trained] = field(default_factory=dict)
    seconds: float = 0.0


def run(
    config: StudyConfig,
    out_root: Path = Path("outputs/krtest"),
    tracking_name: str | None = None,
    echo: Callable[[str], None] = print,
    parent: tracking.LiveRun | None = None,
) -> StudyOutcome:
    """Check everything, then the five arms, the figure and the table; returns what each arm gave.
    ``parent``: the run to nest the study under (a seed sweep); else a run of its own (or ``mlflow run``'s)."""
    started = time.perf_counter()
    config.check()
    estimate = max(plan.expected_peak() for plan in config.plans.values())  # nothing loaded yet
    inputs = _read_data(config) if config.data else None
    dataset = None if inputs else make_dataset(config.seed, config.entities, config.validation_entities)
    track = open_track(tracking_name)
    echo(f"loading {config.model} ...")
    lm, tokenizer = load_model(config.model, keep=False)  # the untouched model; the arms train copies of it
    pair = plan_pair(lm, config.budget)  # a model whose attention and FFN blocks cannot be told apart fails here
    outcome = StudyOutcome(new_folder(Path(out_root), model_label(config.model)), pair, config.seed, estimate)
    session = outcome.folder.name
    if dataset:
        paths = write_dataset(dataset, outcome.folder / "data")
        inputs = read_inputs(paths[QUESTIONS], paths[CORPUS], paths[VALIDATION])
    assert inputs is not None  # read from --data, or from the data set generated just above
    tags = {tracking.SESSION: session, "mlflow.source.name": "cctk krtest study"}
    with track.run(session, tags, parent, kind=STUDY_RUN, attach=parent is None) as study:
        outcome.run_id = study.run_id
        study.params(config.params() | {"n_items": len(inputs.items)} | _pair_params(pair))
        echo(f"KR-Test study {session}: {len(inputs.items)} questions, five arms, seed {config.seed}")
        echo(pair.line())
        _arms(config, inputs, (lm, tokenizer), track, study, outcome, echo)
        _write_outputs(config, outcome, session)
        outcome.seconds = time.perf_counter() - started
        _write_record(config, outcome, session)
        _log_parent(study, outcome)
    for key, name in ARMS.items():
        s = outcome.summaries[key]
        echo(f"{name:<20} {100 * s.accuracy:5.1f}% [{100 * s.lo:.1f}-{100 * s.hi:.1f}]")
    echo(f"study finished in {outcome.seconds / 60:.1f} min: {outcome.folder}")
    if parent is None:  # a seed sweep's study: the sweep's line ends the command
        echo(track.store.link(study.run_id))
    return outcome


def _pair_params(pair: PairPlan) -> dict[str, int | float | bool]:
    return {
        "lora.attention.rank": pair.attention.rank,
        "lora.ffn.rank": pair.ffn.rank,
        "lora.attention.trainable": pair.attention.trainable,
        "lora.ffn.trainable": pair.ffn.trainable,
        "lora.difference_percent": round(100 * pair.difference, 4),
        "lora.pair_searched": pair.searched,
    }


def model_label(model: str) -> str:
    """A roster key as it is, a local directory by its name, a Hub id with ``_`` for ``/``."""
    return Path(model).name if Path(model).is_dir() else model.replace("/", "_")


def data_files(folder: Path, corpus: Path | None, validation: Path | None) -> tuple[Path, Path, Path]:
    """A ``--data`` folder's questions, the corpus they point into and the validation text: ``corpus`` or the
    folder's corpus.txt (``generate``'s fictional set has one; ``generate --corpus`` keeps the questions only),
    ``validation`` or the folder's validation.txt, else the validation.txt beside the corpus."""
    if corpus is None and not (folder / CORPUS).is_file():
        raise CctkError(
            f"{folder} holds no {CORPUS} (generate --corpus keeps the questions only): give --corpus FILE, the text "
            "its questions point into, and --validation FILE unless a validation.txt lies beside it"
        )
    for path, what in ((corpus, "corpus"), (validation, "validation")):
        if path is not None and not path.is_file():
            raise CctkError(f"{what} file {path} does not exist")
    corpus = corpus or folder / CORPUS
    if validation is None:
        validation = next((p for p in (folder / VALIDATION, corpus.with_name(VALIDATION)) if p.is_file()), None)
        if validation is None:
            raise CctkError(
                f"no --validation FILE given and no {VALIDATION} beside the corpus ({corpus.with_name(VALIDATION)}) "
                f"or in {folder}"
            )
    return folder / QUESTIONS, corpus, validation


def check_data(folder: Path, corpus: Path | None, validation: Path | None) -> tuple[Path, Path, Path]:
    """``data_files``, and questions written from passages split by blank lines (generation.json's ``segment``),
    the passages the study trains on."""
    from ..generation.from_corpus import GENERATION

    recorded = folder / GENERATION
    segment = json.loads(recorded.read_text()).get("segment", "blank-lines") if recorded.is_file() else "blank-lines"
    if segment != "blank-lines":
        raise CctkError(
            f"the questions of {folder} were written from passages of --segment {segment}; krtest study trains "
            "on passages split by blank lines (krtest eval and train read the same)"
        )
    return data_files(folder, corpus, validation)


def _read_data(config: StudyConfig) -> Inputs:
    """A ``--data`` folder, every file checked (locations included) before any run starts."""
    assert config.data is not None
    questions, corpus, validation = check_data(config.data, config.corpus, config.validation)
    return read_inputs(questions, corpus, validation, location=config.location)


def _arms(
    config: StudyConfig,
    inputs: Inputs,
    loaded: Loaded,
    track: Track,
    parent: tracking.LiveRun,
    outcome: StudyOutcome,
    echo: Callable[[str], None],
) -> None:
    lm, tokenizer = loaded  # the untouched model: the baselines score it, each trained arm trains a fresh copy
    where = resolve_device(config.device)
    largest = max(config.plans.values(), key=lambda plan: plan.estimate.device)  # bounds the baselines' scoring too
    assert inputs.validation is not None  # a study's data set has its validation text
    arms = config.arms((outcome.pair.attention.rank, outcome.pair.ffn.rank))
    (max_tokens,) = {arm.max_tokens for arm in arms.values()}  # one for all: the blind arm's rows are each arm's
    val_rows = corpus_rows(inputs.validation, tokenizer, max_tokens)
    params = {"model": config.model, "seed": config.seed} | inputs.params()
    evaluated: dict[str, Evaluation] = {}
    per_eval = 0.0  # the blind arm's evaluation: its items and validation perplexity, as every arm's every K steps
    for key, items in (("blind", list(inputs.items)), ("open_book", inputs.book())):
        with (
            _nested(track, parent, key, {"open_book": key == "open_book"} | params, inputs, outcome) as run,
            placed(lm, largest, where, f"the {ARMS[key]} arm") as model,
        ):
            echo(f"{ARMS[key]}:")
            rows = val_rows if key == "blind" else None  # the untouched model's perplexity: once
            began = time.perf_counter()
            evaluated[key] = evaluate_arm(run, model, tokenizer, items, outcome.folder / key, echo, rows)
            if key == "blind":
                per_eval = time.perf_counter() - began
        outcome.summaries[key], outcome.tables[key] = evaluated[key].summary, evaluated[key].items
    lm.cpu()  # the untouched model waits in host memory while the arms train their own copies
    costs = _forecast(config, arms, lm, per_eval, parent, echo)
    for key, train_config in arms.items():
        with (
            _nested(track, parent, key, params, inputs, outcome) as run,
            # a fresh copy for every trained arm, of the waiting one, checked against its plan once on the device
            placed(copy.deepcopy(lm), config.plans[key], where, f"the {ARMS[key]} arm") as model,
        ):
            echo(f"{ARMS[key]}:")
            trained = train_arm(
                run,
                model,
                tokenizer,
                inputs,
                train_config,
                outcome.folder / key,
                echo,
                label=ARMS[key],
                untouched=evaluated["blind"],  # step 0 of every arm: the blind arm's items and validation rows
                cut=(config.training_rows, val_rows),  # the rows its plan and the baselines cut, not cut again
            )
            run.metrics(timing.arm_metrics(trained, costs[key]))
        outcome.trained[key], outcome.summaries[key] = trained, trained.final.summary
        outcome.tables[key] = trained.final.items
        del model  # the trained copy goes before the next is made: no plan counts two copies on the device


def _forecast(
    config: StudyConfig,
    arms: dict[str, TrainConfig],
    lm: PreTrainedModel,
    per_eval: float,
    parent: tracking.LiveRun,
    echo: Callable[[str], None],
) -> dict[str, compute.Cost]:
    """Before the first arm trains: the trained arms' compute limit at the GEMM peak measured now and their
    evaluations at ``per_eval`` seconds each, printed and logged on the study's run; returns each arm's own cost."""
    rows, where = config.training_rows, resolve_device(config.device)
    (precision,) = {arm.recipe.precision for arm in arms.values()}  # one peak: the arms share their arithmetic
    peak = compute.peak_gflops(str(where), precision)
    costs = {key: timing.planned_cost(lm, rows, arm, peak) for key, arm in arms.items()}
    line, metrics = timing.forecast([(arm, costs[key]) for key, arm in arms.items()], len(rows), per_eval, where.type)
    echo(line)
    parent.metrics(metrics)
    return costs


@contextmanager
def _nested(
    track: Track, parent: tracking.LiveRun, key: str, params: dict[str, Any], inputs: Inputs, outcome: StudyOutcome
) -> Iterator[tracking.LiveRun]:
    """An arm's run under the study's, in the one lifecycle, its parameters and datasets logged."""
    with track.run(ARMS[key], {tracking.ARM: key}, parent=parent) as run:
        run.params(params)
        inputs.log(run)
        outcome.run_ids[key] = run.run_id
        yield run


def final_table(outcome: StudyOutcome) -> pd.DataFrame:
    """One row per arm: what trained, how much, and the final accuracy with its interval."""
    rows = [_arm_row(key, outcome) for key in ARMS]
    return pd.DataFrame(rows).astype({"rank": "Int64", "trainable": "Int64"})


def _arm_row(key: str, outcome: StudyOutcome) -> dict[str, Any]:
    s, trained = outcome.summaries[key], outcome.trained.get(key)
    plan = trained.plan if trained else None
    ppl = float("nan")  # none for the open book
    if trained:
        ppl = trained.final.val_perplexity
    elif key == "blind" and outcome.trained:  # the untouched model's, read at step 0 of a trained arm
        ppl = next(iter(outcome.trained.values())).evaluations[0].val_perplexity
    return {
        "arm": ARMS[key],
        "method": trained.config.method if trained else "none",
        "modules": (plan.kinds() if plan else "all") if trained else "-",
        "rank": plan.rank if plan else pd.NA,
        "trainable": trained.trainable if trained else pd.NA,
        "steps": trained.result.steps if trained else 0,
        "items": s.n,
        **{k: getattr(s, k) for k in ("correct", "accuracy", "lo", "hi", "mean_margin", "ties", "identical")},
        "val_perplexity": ppl,
    }


def curves(outcome: StudyOutcome) -> pd.DataFrame:
    frames = [t.curve().assign(arm=ARMS[key]) for key, t in outcome.trained.items()]
    return pd.concat(frames, ignore_index=True)


def baselines(outcome: StudyOutcome) -> pd.DataFrame:
    rows = [(ARMS[k], outcome.summaries[k]) for k in ("blind", "open_book")]
    return pd.DataFrame([{"arm": arm, "accuracy": s.accuracy, "lo": s.lo, "hi": s.hi} for arm, s in rows])


def _write_outputs(config: StudyConfig, outcome: StudyOutcome, session: str) -> None:
    title = f"KR-Test on {model_label(config.model)}: {outcome.summaries['blind'].n} questions, seed {config.seed}"
    write_figure(curves(outcome), baselines(outcome), title, outcome.folder / "figure")
    write_table(final_table(outcome), outcome.folder / "table", session)


def _write_record(config: StudyConfig, outcome: StudyOutcome, session: str) -> None:
    """``study.json``: the configuration, how long the study took, every arm's summary, the LoRA ranks."""
    study = {
        "session": session,
        "config": config.params(),
        "seconds": outcome.seconds,
        "arms": {key: asdict(s) for key, s in outcome.summaries.items()},
        "lora": {
            key: {"rank": t.plan.rank, "trainable_parameters": t.trainable, "targets": t.plan.kinds()}
            for key, t in outcome.trained.items()
            if t.plan
        },
        "lora_pair": {
            "difference_percent": 100 * outcome.pair.difference,
            "searched": outcome.pair.searched,
            "closest_ranks": list(outcome.pair.closest),
            "line": outcome.pair.line(),
        },
    }
    (outcome.folder / STUDY_JSON).write_text(json.dumps(study, indent=2, default=str) + "\n")


def _log_parent(parent: tracking.LiveRun, outcome: StudyOutcome) -> None:
    """The study's time, every arm's accuracy, and its memory as a pipeline run logs it: the plan's estimate
    beside the largest trained arm's measured peak (each arm logs its own)."""
    metrics = {"study_seconds": outcome.seconds, "memory_estimate_bytes": outcome.memory_estimate}
    for key, s in outcome.summaries.items():
        metrics.update({f"{key}.accuracy": s.accuracy, f"{key}.lo": s.lo, f"{key}.hi": s.hi})
    peak = max((t.result.peak_bytes for t in outcome.trained.values()), default=0)
    if peak:
        metrics["peak_memory_bytes"] = peak
    parent.metrics(metrics)
    parent.files(outcome.folder)
