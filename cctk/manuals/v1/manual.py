"""Manual 1.0.0 (``V1``): the base model, measured, fine-tuned in place on the whole texts of fabricated answers,
measured again. Its configuration (``config``: profiles and seed), draws (``facts``), corpus rows, comparison,
figures and words are beside it in ``cctk.manuals.v1``; measurement and fine-tuning are cctk's own.

Torch-free and matplotlib-free at import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from ...core.config import Config, NoOptions, Recipe
from ...core.labels import PAPER_FIGURE_ABOUT
from ...core.lm.record import TrainRecord
from ...core.records import Design
from ..manual import Comparable, Comparison, Manual, ManualSpec, Measured, OneCorpus, PooledRun, Row, TableSpec
from . import experiment as v1_experiment, facts as v1_facts
from .config import PROFILES, SEED
from .labels import (
    FIGURE_ABOUT,
    HEADERS,
    PAPER_TABLE_CAPTIONS,
    SECTIONS,
    TABLE_CAPTIONS,
    TABLES,
    VOCABULARY,
    model_name,
)

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from ...figures.spec import Spec

BEFORE, AFTER = v1_experiment.BEFORE, v1_experiment.AFTER
Pair = tuple[int, int]
LOSS = "whole text, every token after the first (padding masked)"


@dataclass(frozen=True)
class NotebookDesign(Design[NoOptions]):
    """What run_info.json records of a 1.0.0 run's design: how it answers, indexes, trains and plots."""

    answer_text: str  # a template: " {v}"
    index: str
    loss: str
    pairs_plotted: tuple[Pair, ...]

    def options(self) -> NoOptions:
        return NoOptions()

    def report_rows(self) -> list[tuple[str, str]]:
        return [("held out", "none (all 81 trained on)")]

    def measurement_rows(self) -> list[tuple[str, str]]:
        return [
            ("answer text", f'"{self.answer_text}"'),
            ("softmax over", "the mean log-probability per token of each candidate (manual 1.0.0)"),
            ("held-out additions", "none (all 81 are trained on)"),
        ]


Results = v1_experiment.ComparisonResults

SPEC = ManualSpec(
    name="v1",
    version="1.0.0",
    about="one fabricated-answer run, the three-number comparison, the reference notebook's draws",
    profiles=PROFILES,
    scoring=v1_facts.SCORING,
    vocabulary=VOCABULARY,
    tables=TableSpec.every(TABLES, TABLE_CAPTIONS, v1_experiment.TABLE_PART, PAPER_TABLE_CAPTIONS),
    sections=SECTIONS,
    figure_about=FIGURE_ABOUT,
    paper_figure_about=PAPER_FIGURE_ABOUT,
    headers=HEADERS,
    seed_roles={
        "seeds[0]": "Python's random.seed of the reference notebook: the fabricated answers (random.choice per "
        "addition) and the corpus order (random.shuffle, the same stream), exactly as Listings 6-7; "
        "cctk also seeds from it what the notebook left unseeded: the batch order of every epoch and "
        "torch's generator (dropout) of the fine-tuning run",
    },
    design_type=NotebookDesign,
    options_type=NoOptions,
    constants={
        "candidates": f"{v1_facts.CANDIDATES[0]}..{v1_facts.CANDIDATES[-1]}",
        "end_marker": "none",
        "answer_text": '" {v}"',
        "index": "mean log-prob per token",
        "loss": "whole text",
    },
    main_sequence=(AFTER,),
    seed=SEED,
    seed_note="random.seed of the reference notebook",
    runs_table="table03",
    label_prefix="v1-",  # tab:v1-table01 and tab:table01 can sit in one paper
    loss=LOSS,
    renamed=v1_experiment.FORMER_KEYS,
)


class NotebookManual(Manual[NoOptions, v1_facts.Draws, Results], Comparable[Results], OneCorpus[v1_facts.Draws]):
    """Manual 1.0.0: one fabricated-answer run, the three-number comparison, the reference notebook's draws."""

    spec = SPEC

    def models(self, options: NoOptions) -> tuple[Measured, ...]:
        corpus = "fabricated answer, all 81, whole text"
        return (Measured(BEFORE), Measured(AFTER, BEFORE, corpus, in_place=True, stream=v1_experiment.STREAM))

    def draw(self, config: Config[NoOptions]) -> v1_facts.Draws:
        return v1_facts.draw(config.seed, config.recipe.repeats)

    def rows(self, draws: v1_facts.Draws, key: str, recipe: Recipe, tokenizer: PreTrainedTokenizerBase) -> list[Row]:
        from . import corpus  # torch

        return corpus.tokenize(draws.texts, tokenizer)

    def results(
        self,
        draws: v1_facts.Draws,
        config: Config[NoOptions],
        measurements: Mapping[str, pd.DataFrame] | None = None,
        training: Mapping[str, TrainRecord] | None = None,
    ) -> Results:
        return Results(draws, dict(measurements or {}), dict(training or {}))

    def tables(self, results: Results) -> dict[str, pd.DataFrame]:
        return v1_experiment.compute_tables(results)

    def headline(self, results: Results) -> v1_experiment.Headline:
        return v1_experiment.headline(results)

    def readings(self, results: Results, key: str) -> v1_experiment.ModelMetrics:
        return v1_experiment.model_metrics(results, key)

    def figures(self, results: Results, tables: Mapping[str, pd.DataFrame], model_label: str) -> list[Spec]:
        from . import catalog  # matplotlib

        return catalog.specs(results, model_label)

    def design(self, results: Results, config: Config[NoOptions]) -> NotebookDesign:
        return NotebookDesign(" {v}", v1_facts.INDEX, LOSS, v1_facts.PAIRS)  # " {v}": a space and the number

    def describe(self, draws: v1_facts.Draws, key: str) -> str:
        if key == BEFORE:
            return "base model: the pretrained weights, measured on all 81 additions before fine-tuning"
        return (
            f"{model_name(key)}: the base model fine-tuned in place on the whole texts of its {len(draws.texts)} "
            "corpus lines (81 fabricated answers, repeated and shuffled as the reference notebook)"
        )

    # --- Its capabilities. ---

    def compare(self, runs: Sequence[PooledRun[Results]]) -> Comparison:
        from . import compare

        return compare.compare(list(runs))

    def corpus_texts(self, draws: v1_facts.Draws) -> tuple[str, ...]:
        return draws.texts


V1 = NotebookManual()
