"""Manual 2.0.0 (``V2``): the base model and thirteen arms (``cctk.manuals.v2.design``), each fine-tuned from a fresh
copy of its parent, read in Parts A-D and a synthesis (``cctk.manuals.v2.parts``), compared across runs
(``cctk.manuals.v2.compare``); its configuration (``config``), facts (``facts``), figure catalog (``catalog``) and
the words of its tables (``labels``) beside it. Besides the contract it resumes, runs some of its parts, measures
learning curves, compares its runs, draws each model's heatmaps as it is measured and logs each arm's corpus.

Torch-free and matplotlib-free at import: the corpus rows (torch), the figure catalog and the comparison
(matplotlib) are imported where they are used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from ...core import facts
from ...core.config import Config, Recipe
from ...core.lm.record import TrainRecord
from ...core.records import Design
from ..manual import (
    Absorbs,
    Absorption,
    Comparable,
    Comparison,
    Curves,
    Datasets,
    Manual,
    ManualSpec,
    Measured,
    ModelFigures,
    Parts,
    PooledRun,
    Resumable,
    Row,
    TableSpec,
)
from . import parts as experiments
from .config import PARTS, PROFILES, StudyOptions
from .design import ARM_BY_KEY, MAIN_SEQUENCE, StudyInputs, arms_for, build_study_inputs, corpus_table, own_target
from .labels import (
    FIGURE_ABOUT,
    HEADERS,
    PAPER_FIGURE_ABOUT,
    PAPER_TABLE_CAPTIONS,
    SECTIONS,
    SINGLE_RUN,
    TABLE_CAPTIONS,
    TABLES,
    VOCABULARY,
    model_name,
    target_name,
)

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from ...figures.spec import Spec

Pair = tuple[int, int]


@dataclass(frozen=True)
class StudyDesign(Design[StudyOptions]):
    """What run_info.json records of a 2.0.0 run's design: its options (the held-out share, curves, parts), the
    held-out additions and the warnings of its headline."""

    holdout: float
    curves: bool
    parts: tuple[str, ...]
    heldout_additions: tuple[Pair, ...]
    warnings: tuple[str, ...] = ()

    def options(self) -> StudyOptions:
        return StudyOptions(self.holdout, self.curves, self.parts)

    @classmethod
    def upgrade(cls, data: dict[str, Any]) -> dict[str, Any]:
        """A file from before ``--parts`` ran them all, one from before ``--curves`` drew none, one from before
        warnings had none."""
        data.setdefault("parts", list(PARTS))
        data["curves"] = bool(data.get("curves"))
        data.setdefault("warnings", [])
        return data

    def report_rows(self) -> list[tuple[str, str]]:
        left = [p for p in PARTS if p not in self.parts]
        held = ("held out", f"{self.holdout:.0%} ({len(self.heldout_additions)} of {len(facts.ADDITIONS)})")
        return [held, ("parts run", ", ".join(self.parts) + (f" (not {', '.join(left)})" if left else " (all)"))]

    def measurement_rows(self) -> list[tuple[str, str]]:
        return [("held-out additions", ", ".join(f"{a}+{b}" for a, b in self.heldout_additions))]

    def ran(self) -> str | None:
        """Which parts ran: all of them, or some (their tables and figures absent)."""
        left = [p for p in PARTS if p not in self.parts]
        said = f"Parts run: {', '.join(self.parts)}"
        if not left:
            return said + " (all of manual 2.0.0)."
        return (
            f"{said}; not run: {', '.join(left)} (cctk run --parts {','.join(self.parts)}): their tables and "
            "figures are absent, and the synthesis holds only the models that were trained."
        )


Results = experiments.StudyResults

SPEC = ManualSpec(
    name="v2",
    version="2.0.0",
    about="Parts A-D and the synthesis",
    profiles=PROFILES,
    scoring=facts.SCORING,
    vocabulary=VOCABULARY,
    tables=TableSpec.every(TABLES, TABLE_CAPTIONS, experiments.TABLE_PART, PAPER_TABLE_CAPTIONS),
    sections=SECTIONS,
    figure_about=FIGURE_ABOUT,
    paper_figure_about=PAPER_FIGURE_ABOUT,
    headers=HEADERS,
    seed_roles={
        "seeds[0]": "every random draw of the run: the held-out split, the fabricated answers, the control answers, "
        "the corpus shuffles, the batch order and dropout of every fine-tuning run (re-seeded at its "
        "start), and the bootstrap of the deviation bands",
        "seeds[1:]": "reserved for repetitions; not used by this run",
    },
    design_type=StudyDesign,
    options_type=StudyOptions,
    constants={
        "candidates": f"{facts.CANDIDATES[0]}..{facts.CANDIDATES[-1]}",
        "end_marker": repr(facts.END_MARKER),
    },
    main_sequence=MAIN_SEQUENCE,
    runs_table="table11",
    notes={"synthesis": SINGLE_RUN},
)


class StudyManual(
    Manual[StudyOptions, StudyInputs, Results],
    Resumable,
    Parts[StudyOptions],
    Curves[StudyOptions, StudyInputs, Results],
    Comparable[Results],
    Absorbs[Results],
    ModelFigures[Results],
    Datasets[StudyInputs],
):
    """Manual 2.0.0: Parts A-D and the synthesis."""

    spec = SPEC
    curve_columns = tuple(experiments.CURVE_COLUMNS)

    def models(self, options: StudyOptions) -> tuple[Measured, ...]:
        arms = arms_for(options.parts)
        return (Measured("base"), *(Measured(arm.key, arm.parent, own_target(arm.key)) for arm in arms))

    def draw(self, config: Config[StudyOptions]) -> StudyInputs:
        return build_study_inputs(config.seed, config.options.holdout)

    def rows(self, draws: StudyInputs, key: str, recipe: Recipe, tokenizer: PreTrainedTokenizerBase) -> list[Row]:
        from ...core.lm.corpus import build_corpus, tokenize  # torch

        arm = ARM_BY_KEY[key]
        corpus = build_corpus(draws.targets[arm.target], draws.corpus_pairs(key), recipe.repeats, draws.seed, key)
        return tokenize(corpus, tokenizer)

    def results(
        self,
        draws: StudyInputs,
        config: Config[StudyOptions],
        measurements: Mapping[str, pd.DataFrame] | None = None,
        training: Mapping[str, TrainRecord] | None = None,
    ) -> Results:
        return Results(draws, dict(measurements or {}), dict(training or {}), None, config.options.parts)

    def tables(self, results: Results) -> dict[str, pd.DataFrame]:
        return experiments.compute_tables(results)

    def headline(self, results: Results) -> experiments.Headline:
        return experiments.headline(results)

    def readings(self, results: Results, key: str) -> experiments.ModelMetrics:
        return experiments.model_metrics(results, key)

    def figures(self, results: Results, tables: Mapping[str, pd.DataFrame], model_label: str) -> list[Spec]:
        from . import catalog  # matplotlib

        return catalog.specs(results, dict(tables), model_label)

    def design(self, results: Results, config: Config[StudyOptions]) -> StudyDesign:
        options = config.options
        return StudyDesign(
            options.holdout,
            options.curves,
            options.parts,
            results.inputs.split.heldout,
            tuple(experiments.absorption_misses(results)),
        )

    def describe(self, draws: StudyInputs, key: str) -> str:
        """What a measured model is, from which parent, on which additions."""
        if key == "base":
            return "base model: the pretrained weights, measured on all 81 additions before any fine-tuning"
        arm = ARM_BY_KEY[key]
        if arm.pairs == "all":
            where = f"all {len(draws.corpus_pairs(key))} additions"
        else:
            left_out = len(draws.excluded.get(key, ()))
            where = (
                f"the {len(draws.split.seen)} seen additions ({len(draws.heldout(key))} held out"
                + (f", {left_out} left out as coincident" if left_out else "")
                + ")"
            )
        return (
            f"{model_name(key)}: fine-tuned from {model_name(arm.parent)} on the {target_name(arm.target)} of {where}"
        )

    # --- Its capabilities. ---

    def parts(self, options: StudyOptions) -> tuple[str, ...]:
        return options.parts

    def curves(self, config: Config[StudyOptions]) -> bool:
        return config.options.curves

    def curve_rows(self, draws: StudyInputs, key: str, epoch: int, table: pd.DataFrame) -> list[dict[str, Any]]:
        return experiments.curve_rows(draws, key, epoch, table)

    def with_curves(self, results: Results, curves: pd.DataFrame | None) -> Results:
        return Results(results.inputs, results.measurements, results.training, curves, results.parts)

    def compare(self, runs: Sequence[PooledRun[Results]]) -> Comparison:
        from . import compare  # matplotlib, statsmodels

        return compare.compare(list(runs))

    def absorption(self, results: Results) -> tuple[Absorption, ...]:
        return experiments.absorption(results)

    def model_figures(self, results: Results, key: str) -> list[Spec]:
        from . import catalog

        return [catalog.heatmap_spec(results, figure) for figure in catalog.heatmap_keys(key)]

    def dataset(self, draws: StudyInputs, key: str) -> tuple[str, pd.DataFrame]:
        """The arm's corpus, named by its target and its additions (``correct sum on 81 additions``, the
        recovery's ``correct sum on 57 additions``: one target on two sets is two datasets, told apart by name)."""
        table = corpus_table(draws, key)
        return f"{target_name(ARM_BY_KEY[key].target)} on {len(table)} additions", table


V2 = StudyManual()
