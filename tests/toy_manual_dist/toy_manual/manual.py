"""The toy manual (``TOY``): the base model measured, then two arms fine-tuned from fresh copies of it, one on the
last digit of every sum and one on its tens digit, each measured; one table (every model's hits on each digit) and
one figure (the same as bars). Everything it is, it says through ``cctk.manuals.manual``: a ``ManualSpec`` and the
ten methods of a ``Manual``, no capability beyond them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

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
from cctk.figures.style import REPORT, Style
from cctk.manuals.manual import Manual, ManualSpec, Measured, Row, TableSpec

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

    def table(self) -> pd.DataFrame:
        """targets.csv: each addition and its two digits."""
        table = pd.DataFrame({"a": [a for a, _ in ADDITIONS], "b": [b for _, b in ADDITIONS]})
        for key, values in self.targets.items():
            table[TARGETS[key]] = values.to_numpy()
        return table


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

    def lines(self) -> list[str]:
        return [f"last digits: {self.last_hits}/81, tens digits: {self.tens_hits}/81"]


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

    def report_rows(self) -> list[tuple[str, str]]:
        return [("digits learned", ", ".join(self.digits))]


def hits_chart(table: pd.DataFrame, style: Style = REPORT) -> Figure:
    """Each model's share of hits on each digit, as bars, in the report's style or a paper's (its width)."""
    fig = new_figure(*style.size(4, 3))
    ax = fig.add_subplot()
    labels = [f"{m}\non {t}" for m, t in zip(table["model"], table["target"], strict=True)]
    ax.bar(range(len(table)), table["share"], tick_label=labels)
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of hits")
    return fig


SPEC = ManualSpec(
    name="toy",
    version="0.1.0",
    about="two arms on the digits of the sums",
    profiles={"paper": SMOKE, "quick": SMOKE, "smoke": SMOKE},
    scoring=SCORING,
    vocabulary=VOCABULARY,
    tables=(
        TableSpec(
            "table01",
            "hits on the digits",
            "Every model's hits on the last and on the tens digit of the 81 sums (share of 81).",
            "hits",
        ),
    ),
    sections={"hits": "The digits", "runs": "Training"},
    figure_about={"hits": "Each model's share of hits on each digit."},
    paper_figure_about={"hits": "Each model's share of hits on each digit, as bars."},
    headers={"share": "Share"},
    seed_roles={"seeds[0]": "the corpus order and the training of both arms", "seeds[1:]": "reserved; not used"},
    design_type=DigitDesign,
    options_type=NoOptions,
    constants={"candidates": "0..9"},
    main_sequence=DIGITS,
)


class DigitManual(Manual[NoOptions, Draws, DigitResults]):
    spec = SPEC

    def models(self, options: NoOptions) -> tuple[Measured, ...]:
        return (Measured("base"), *(Measured(key, "base", TARGETS[key]) for key in DIGITS))

    def draw(self, config: Config[NoOptions]) -> Draws:
        return Draws(config.seed, {key: digits(key) for key in DIGITS})

    def rows(self, draws: Draws, key: str, recipe: Recipe, tokenizer: PreTrainedTokenizerBase) -> list[Row]:
        from cctk.core.lm.corpus import build_corpus, tokenize

        return tokenize(build_corpus(draws.targets[key], ADDITIONS, recipe.repeats, draws.seed, key), tokenizer)

    def results(
        self,
        draws: Draws,
        config: Config[NoOptions],
        measurements: Mapping[str, pd.DataFrame] | None = None,
        training: Mapping[str, TrainRecord] | None = None,
    ) -> DigitResults:
        return DigitResults(draws, dict(measurements or {}), dict(training or {}))

    def tables(self, results: DigitResults) -> dict[str, pd.DataFrame]:
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

    def readings(self, results: DigitResults, key: str) -> Hits:
        return Hits(*results.hits(key, "last" if key == "base" else key))

    def figures(self, results: DigitResults, tables: Mapping[str, pd.DataFrame], model_label: str) -> list[Spec]:
        table = tables["table01"]
        own = table[(table["model_key"] == table["target_key"]) | (table["model_key"] == "base")]
        return [Spec(1, "hits", "hits", hits_chart, {"table": own}, "hits on the digits", "hits by model")]

    def design(self, results: DigitResults, config: Config[NoOptions]) -> DigitDesign:
        return DigitDesign(DIGITS)


TOY = DigitManual()
