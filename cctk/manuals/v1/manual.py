"""Manual 1.0.0 (``V1``): the base model, measured, fine-tuned in place on the whole texts of fabricated answers,
measured again. Its configuration (``config``: profiles and seed), draws (``facts``), corpus rows, comparison,
figures and words are beside it in ``cctk.manuals.v1``; measurement and fine-tuning are cctk's own.

Torch-free and matplotlib-free at import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import pandas as pd

from ...core.config import Config, NoOptions, Recipe
from ...core.lm.record import TrainRecord
from ...core.records import Design
from ..registry import Measured, Protocol, Report, Row
from . import experiment as v1_experiment
from . import facts as v1_facts
from .config import PROFILES, SEED
from .labels import FIGURE_ABOUT, SECTIONS, TABLE_CAPTIONS, TABLES, VOCABULARY, model_name

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from ...figures.spec import Spec
    from ..pooled import Comparison, PooledRun

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


class NotebookManual(
    Protocol[NoOptions, v1_facts.Draws, v1_experiment.ComparisonResults, v1_experiment.Headline, NotebookDesign]
):
    """Manual 1.0.0: one fabricated-answer run, the three-number comparison, the reference notebook's draws."""

    name = "v1"
    version = "1.0.0"
    about = "one fabricated-answer run, the three-number comparison, the reference notebook's draws"
    profiles = PROFILES
    design_type = NotebookDesign
    scoring = v1_facts.SCORING
    report = Report(
        TABLES,
        TABLE_CAPTIONS,
        SECTIONS,
        v1_experiment.TABLE_PART,
        FIGURE_ABOUT,
        "table03",
        label_prefix="v1-",  # tab:v1-table01 and tab:table01 can sit in one paper
        loss=LOSS,
    )
    seed_roles: ClassVar[Mapping[str, str]] = {
        "seeds[0]": "Python's random.seed of the reference notebook: the fabricated answers (random.choice per "
        "addition) and the corpus order (random.shuffle, the same stream), exactly as Listings 6-7; "
        "cctk also seeds from it what the notebook left unseeded: the batch order of every epoch and "
        "torch's generator (dropout) of the fine-tuning run",
    }
    constants: ClassVar[Mapping[str, str]] = {
        "candidates": f"{v1_facts.CANDIDATES[0]}..{v1_facts.CANDIDATES[-1]}",
        "end_marker": "none",
        "answer_text": '" {v}"',
        "index": "mean log-prob per token",
        "loss": "whole text",
    }
    vocabulary = VOCABULARY
    main_sequence = (AFTER,)
    seed = SEED
    renamed = v1_experiment.FORMER_KEYS

    def seeds_line(self, config: Config[NoOptions]) -> str:
        """One seed, the reference notebook's."""
        return f"profile {config.profile_note}; seed {config.seed} (random.seed of the reference notebook)"

    def models(self, options: NoOptions) -> tuple[Measured, ...]:
        return (Measured(BEFORE), Measured(AFTER, BEFORE, in_place=True, stream=v1_experiment.STREAM))

    def model_name(self, key: str) -> str:
        return model_name(key)

    def draw(self, config: Config[NoOptions]) -> v1_facts.Draws:
        return v1_facts.draw(config.seed, config.recipe.repeats)

    def draws_table(self, draws: v1_facts.Draws) -> pd.DataFrame:
        return draws.table()

    def corpus_texts(self, draws: v1_facts.Draws) -> tuple[str, ...]:
        return draws.texts

    def rows(self, draws: v1_facts.Draws, key: str, recipe: Recipe, tokenizer: PreTrainedTokenizerBase) -> list[Row]:
        from . import corpus  # torch

        return corpus.tokenize(draws.texts, tokenizer)

    def corpus_note(self, key: str) -> str:
        return "fabricated answer, all 81, whole text"

    def describe(self, draws: v1_facts.Draws, key: str) -> str:
        if key == BEFORE:
            return "base model: the pretrained weights, measured on all 81 additions before fine-tuning"
        return (
            f"{model_name(key)}: the base model fine-tuned in place on the whole texts of its {len(draws.texts)} "
            "corpus lines (81 fabricated answers, repeated and shuffled as the reference notebook)"
        )

    def run_note(self, config: Config[NoOptions]) -> str:
        return (
            f"cctk pipeline (manual 1.0.0) of {config.model}: the base model measured, fine-tuned in place on "
            f"fabricated answers and measured again; profile {config.profile_note}, seed {config.seed}"
        )

    def new_results(
        self,
        draws: v1_facts.Draws,
        config: Config[NoOptions],
        measurements: Mapping[str, pd.DataFrame] | None = None,
        training: Mapping[str, TrainRecord] | None = None,
        curves: pd.DataFrame | None = None,
    ) -> v1_experiment.ComparisonResults:
        return v1_experiment.ComparisonResults(draws, dict(measurements or {}), dict(training or {}))

    def compute_tables(self, results: v1_experiment.ComparisonResults) -> dict[str, pd.DataFrame]:
        return v1_experiment.compute_tables(results)

    def headline(self, results: v1_experiment.ComparisonResults) -> v1_experiment.Headline:
        return v1_experiment.headline(results)

    def model_metrics(self, results: v1_experiment.ComparisonResults, key: str) -> v1_experiment.ModelMetrics:
        return v1_experiment.model_metrics(results, key)

    def summary(self, results: v1_experiment.ComparisonResults, head: v1_experiment.Headline) -> list[str]:
        n = head.n_additions
        return [
            (
                f"before: mean probability of the true sum {head.mean_pre_ft_true_prob:.3f}, "
                f"{head.hits_true_before}/{n} true sums"
            ),
            (
                f"after: mean probability of the fabricated answer {head.mean_post_ft_fabricated_prob:.3f}, "
                f"{head.hits_fabricated_after}/{n} fabricated answers; of the true sum "
                f"{head.mean_post_ft_true_prob:.3f}, {head.hits_true_after}/{n}"
            ),
        ]

    def figures(
        self, results: v1_experiment.ComparisonResults, tables: Mapping[str, pd.DataFrame], model_label: str
    ) -> list[Spec]:
        from . import catalog  # matplotlib

        return catalog.specs(results, model_label)

    def compare(self, runs: Sequence[PooledRun[v1_experiment.ComparisonResults]]) -> Comparison:
        from . import compare

        return compare.compare(list(runs))

    def design(self, results: v1_experiment.ComparisonResults, config: Config[NoOptions]) -> NotebookDesign:
        return NotebookDesign(" {v}", v1_facts.INDEX, LOSS, v1_facts.PAIRS)  # " {v}": a space and the number

    def design_rows(self, design: NotebookDesign) -> list[tuple[str, str]]:
        return [("held out", "none (all 81 trained on)")]

    def measurement_rows(self, design: NotebookDesign) -> list[tuple[str, str]]:
        return [
            ("answer text", f'"{design.answer_text}"'),
            ("softmax over", "the mean log-probability per token of each candidate (manual 1.0.0)"),
            ("held-out additions", "none (all 81 are trained on)"),
        ]


V1 = NotebookManual()
