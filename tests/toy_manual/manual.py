"""The toy manual (``TOY``): the base model measured, then two arms fine-tuned from fresh copies of it, one on the
last digit of every sum and one on its tens digit, each measured; one table (every model's hits on each digit) and
one figure (the same as bars). Everything it is, it says through ``cctk.manuals.registry.Protocol``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import pandas as pd
from matplotlib.figure import Figure
from transformers import PreTrainedTokenizerBase

from cctk.core.config import Config, NoOptions, Recipe
from cctk.core.facts import ADDITIONS
from cctk.core.labels import BASE_MODEL, Vocabulary
from cctk.core.readings import read, summarize
from cctk.core.records import Design, TrainRecord
from cctk.figures.common import new_figure
from cctk.figures.spec import Spec
from cctk.manuals.registry import Measured, Protocol, Report, Row

from .facts import DIGITS, SCORING, digits

MODELS = {"base": BASE_MODEL, "last": "last digits", "tens": "tens digits"}
TARGETS = {"last": "last digit", "tens": "tens digit"}
VOCABULARY = Vocabulary({"model": MODELS, "target": TARGETS})
SMOKE = Recipe(repeats=2, epochs=2, learning_rate=1e-3, batch_size=32)


@dataclass(frozen=True)
class Draws:
    """What a run draws: nothing random here, the two tables of digits (its seed kept for the corpus order)."""

    seed: int
    targets: dict[str, pd.Series]


@dataclass
class DigitResults:
    draws: Draws
    measurements: dict[str, pd.DataFrame]
    training: dict[str, TrainRecord] = field(default_factory=dict)

    def hits(self, key: str, target: str) -> tuple[int, int]:
        """(hits, n) of model ``key`` on a table of digits."""
        s = summarize(read(self.measurements[key], self.draws.targets[target]))
        return s.hits, s.n


@dataclass(frozen=True)
class Headline:
    last_hits: int
    tens_hits: int

    def metrics(self) -> dict[str, float]:
        return {"last_hits": self.last_hits, "tens_hits": self.tens_hits}


@dataclass(frozen=True)
class Hits:
    hits: int
    n: int

    def metrics(self) -> dict[str, float]:
        return {"hits": self.hits, "n": self.n}


@dataclass(frozen=True)
class DigitDesign(Design[NoOptions]):
    """What run_info.json records of the toy's design: the digits its arms learn."""

    digits: tuple[str, ...]

    def options(self) -> NoOptions:
        return NoOptions()


def hits_chart(table: pd.DataFrame) -> Figure:
    """Each model's share of hits on each digit, as bars."""
    fig = new_figure(4, 3)
    ax = fig.add_subplot()
    labels = [f"{m}\non {t}" for m, t in zip(table["model"], table["target"], strict=True)]
    ax.bar(range(len(table)), table["share"], tick_label=labels)
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of hits")
    return fig


class DigitManual(Protocol[NoOptions, Draws, DigitResults, Headline, DigitDesign]):
    name = "toy"
    version = "0.1.0"
    about = "two arms on the digits of the sums"
    profiles: ClassVar[Mapping[str, Recipe]] = {"paper": SMOKE, "quick": SMOKE, "smoke": SMOKE}
    design_type = DigitDesign
    scoring = SCORING
    report = Report(
        {"table01": "hits on the digits"},
        {"table01": "Every model's hits on the last and on the tens digit of the 81 sums (share of 81)."},
        {"hits": "The digits", "runs": "Training"},
        {"table01": "hits"},
        {"hits": "Each model's share of hits on each digit."},
    )
    seed_roles: ClassVar[Mapping[str, str]] = {
        "seeds[0]": "the corpus order and the training of both arms",
        "seeds[1:]": "reserved; not used",
    }
    constants: ClassVar[Mapping[str, str]] = {"candidates": "0..9"}
    vocabulary = VOCABULARY
    main_sequence = DIGITS

    def models(self, options: NoOptions) -> tuple[Measured, ...]:
        return (Measured("base"), *(Measured(key, "base") for key in DIGITS))

    def model_name(self, key: str) -> str:
        return MODELS[key]

    def draw(self, config: Config[NoOptions]) -> Draws:
        return Draws(config.seed, {key: digits(key) for key in DIGITS})

    def draws_table(self, draws: Draws) -> pd.DataFrame:
        table = pd.DataFrame({"a": [a for a, _ in ADDITIONS], "b": [b for _, b in ADDITIONS]})
        for key, values in draws.targets.items():
            table[TARGETS[key]] = values.to_numpy()
        return table

    def rows(self, draws: Draws, key: str, recipe: Recipe, tokenizer: PreTrainedTokenizerBase) -> list[Row]:
        from cctk.core.lm.corpus import build_corpus, tokenize

        return tokenize(build_corpus(draws.targets[key], ADDITIONS, recipe.repeats, draws.seed, key), tokenizer)

    def corpus_note(self, key: str) -> str:
        return TARGETS[key]

    def describe(self, draws: Draws, key: str) -> str:
        return BASE_MODEL if key == "base" else f"{MODELS[key]}: fine-tuned from the base model on the {TARGETS[key]}"

    def run_note(self, config: Config[NoOptions]) -> str:
        return f"toy manual of {config.model}: two arms on the digits of the sums; seed {config.seed}"

    def new_results(
        self,
        draws: Draws,
        config: Config[NoOptions],
        measurements: Mapping[str, pd.DataFrame] | None = None,
        training: Mapping[str, TrainRecord] | None = None,
        curves: pd.DataFrame | None = None,
    ) -> DigitResults:
        return DigitResults(draws, dict(measurements or {}), dict(training or {}))

    def compute_tables(self, results: DigitResults) -> dict[str, pd.DataFrame]:
        rows = []
        for model in results.measurements:
            for target in DIGITS:
                hits, n = results.hits(model, target)
                rows.append(
                    {
                        **VOCABULARY.keyed("model", model),
                        **VOCABULARY.keyed("target", target),
                        "hits": hits,
                        "n": n,
                        "share": hits / n,
                    }
                )
        return {"table01": pd.DataFrame(rows)}

    def headline(self, results: DigitResults) -> Headline:
        return Headline(results.hits("last", "last")[0], results.hits("tens", "tens")[0])

    def model_metrics(self, results: DigitResults, key: str) -> Hits:
        return Hits(*results.hits(key, "last" if key == "base" else key))

    def summary(self, results: DigitResults, head: Headline) -> list[str]:
        return [f"last digits: {head.last_hits}/81, tens digits: {head.tens_hits}/81"]

    def figures(self, results: DigitResults, tables: Mapping[str, pd.DataFrame], model_label: str) -> list[Spec]:
        table = tables["table01"]
        own = table[(table["model_key"] == table["target_key"]) | (table["model_key"] == "base")]
        return [Spec(1, "hits", "hits", hits_chart, {"table": own}, "hits on the digits", "hits by model")]

    def design(self, results: DigitResults, config: Config[NoOptions]) -> DigitDesign:
        return DigitDesign(DIGITS)

    def design_rows(self, design: DigitDesign) -> list[tuple[str, str]]:
        return [("digits learned", ", ".join(design.digits))]


TOY = DigitManual()
