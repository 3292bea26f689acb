"""Manual 2.0.0 (``V2``): the base model and thirteen arms (``cctk.manuals.v2.design``), each fine-tuned from a fresh
copy of its parent, read in Parts A-D and a synthesis (``cctk.manuals.v2.parts``), compared across runs
(``cctk.manuals.v2.compare``); its configuration (``config``), facts (``facts``), figure catalog (``catalog``) and
the words of its tables (``labels``) beside it.

Torch-free and matplotlib-free at import: the corpus rows (torch), the figure catalog and the comparison
(matplotlib) are imported where they are used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import pandas as pd

from ...core import facts
from ...core.config import Config, Recipe
from ...core.lm.record import TrainRecord
from ...core.readings import summarize
from ...core.records import Design
from ..registry import Absorption, Measured, Protocol, Report, Row
from . import parts as experiments
from .config import PARTS, PROFILES, StudyOptions, options_from_params, study_options
from .design import (
    ARM_BY_KEY,
    MAIN_SEQUENCE,
    StudyInputs,
    arms_for,
    build_study_inputs,
    corpus_table,
    own_target,
    targets_table,
)
from .labels import (
    FIGURE_ABOUT,
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
    from ..pooled import Comparison, PooledRun

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


class StudyManual(Protocol[StudyOptions, StudyInputs, experiments.StudyResults, experiments.Headline, StudyDesign]):
    """Manual 2.0.0: Parts A-D and the synthesis."""

    name = "v2"
    version = "2.0.0"
    about = "Parts A-D and the synthesis"
    profiles = PROFILES
    options_type = StudyOptions
    design_type = StudyDesign
    scoring = facts.SCORING
    report = Report(
        TABLES,
        TABLE_CAPTIONS,
        SECTIONS,
        experiments.TABLE_PART,
        FIGURE_ABOUT,
        "table11",
        notes={"synthesis": SINGLE_RUN},
        paper_captions=PAPER_TABLE_CAPTIONS,
    )
    seed_roles: ClassVar[Mapping[str, str]] = {
        "seeds[0]": "every random draw of the run: the held-out split, the fabricated answers, the control answers, "
        "the corpus shuffles, the batch order and dropout of every fine-tuning run (re-seeded at its "
        "start), and the bootstrap of the deviation bands",
        "seeds[1:]": "reserved for repetitions; not used by this run",
    }
    constants: ClassVar[Mapping[str, str]] = {
        "candidates": f"{facts.CANDIDATES[0]}..{facts.CANDIDATES[-1]}",
        "end_marker": repr(facts.END_MARKER),
    }
    vocabulary = VOCABULARY
    main_sequence = MAIN_SEQUENCE
    resumable = True
    curve_columns = tuple(experiments.CURVE_COLUMNS)

    # --- Its options. ---

    def options(self, **given: Any) -> StudyOptions:
        return study_options(**given)

    def options_from_params(self, params: Mapping[str, str]) -> StudyOptions:
        return options_from_params(params)

    def parts(self, options: StudyOptions) -> tuple[str, ...]:
        return options.parts

    def setup_lines(self, config: Config[StudyOptions]) -> list[str]:
        """The seeds, and the parts when not all of them run."""
        lines = [self.seeds_line(config)]
        trained, every = arms_for(config.options.parts), arms_for(PARTS)
        if len(trained) < len(every):
            lines.append(f"parts {', '.join(config.options.parts)}: {len(trained)} of {len(every)} fine-tuning arms")
        return lines

    # --- Its models and draws. ---

    def models(self, options: StudyOptions) -> tuple[Measured, ...]:
        return (Measured("base"), *(Measured(arm.key, arm.parent) for arm in arms_for(options.parts)))

    def model_name(self, key: str) -> str:
        return model_name(key)

    def draw(self, config: Config[StudyOptions]) -> StudyInputs:
        return build_study_inputs(config.seed, config.options.holdout)

    def draws_table(self, draws: StudyInputs) -> pd.DataFrame:
        return targets_table(draws)

    def rows(self, draws: StudyInputs, key: str, recipe: Recipe, tokenizer: PreTrainedTokenizerBase) -> list[Row]:
        from ...core.lm.corpus import build_corpus, tokenize  # torch

        arm = ARM_BY_KEY[key]
        corpus = build_corpus(draws.targets[arm.target], draws.corpus_pairs(key), recipe.repeats, draws.seed, key)
        return tokenize(corpus, tokenizer)

    def corpus_note(self, key: str) -> str:
        return own_target(key)

    def dataset(self, draws: StudyInputs, key: str) -> tuple[str, pd.DataFrame]:
        return target_name(ARM_BY_KEY[key].target), corpus_table(draws, key)

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

    def run_note(self, config: Config[StudyOptions]) -> str:
        arms = arms_for(config.options.parts)
        return (
            f"cctk pipeline (manual 2.0.0) of {config.model}: {len(arms) + 1} measured models, {len(arms)} "
            f"fine-tuning arms (parts {','.join(config.options.parts)}); profile {config.profile_note}, "
            f"seed {config.seed}"
        )

    # --- Its results, tables, headline and figures. ---

    def new_results(
        self,
        draws: StudyInputs,
        config: Config[StudyOptions],
        measurements: Mapping[str, pd.DataFrame] | None = None,
        training: Mapping[str, TrainRecord] | None = None,
        curves: pd.DataFrame | None = None,
    ) -> experiments.StudyResults:
        return experiments.StudyResults(
            draws, dict(measurements or {}), dict(training or {}), curves, config.options.parts
        )

    def compute_tables(self, results: experiments.StudyResults) -> dict[str, pd.DataFrame]:
        return experiments.compute_tables(results)

    def headline(self, results: experiments.StudyResults) -> experiments.Headline:
        return experiments.headline(results)

    def model_metrics(self, results: experiments.StudyResults, key: str) -> experiments.ModelMetrics:
        return experiments.model_metrics(results, key)

    def summary(self, results: experiments.StudyResults, head: experiments.Headline) -> list[str]:
        n = head.n_additions
        return [
            f"correct sums model: {head.correct_hits}/{n} correct sums",
            f"fabricated answers model: {head.fabricated_hits}/{n} fabricated answers",
        ] + [f"WARNING: {miss}" for miss in head.misses]

    def figures(
        self, results: experiments.StudyResults, tables: Mapping[str, pd.DataFrame], model_label: str
    ) -> list[Spec]:
        from . import catalog  # matplotlib

        return catalog.specs(results, dict(tables), model_label)

    def model_figures(self, results: experiments.StudyResults, key: str) -> list[Spec]:
        from . import catalog

        return [catalog.heatmap_spec(results, figure) for figure in catalog.heatmap_keys(key)]

    def absorption(self, results: experiments.StudyResults) -> tuple[Absorption, ...]:
        """Part A's models against their thresholds (``parts.ABSORBED``: 77/81 correct sums, 73/81 fabricated)."""
        return tuple(
            Absorption(key, summary.hits, needed, summary.n)
            for key, (target, needed) in experiments.ABSORBED.items()
            for summary in [summarize(results.readings(key, target))]
        )

    def curves(self, config: Config[StudyOptions]) -> bool:
        return config.options.curves

    def curve_rows(self, draws: StudyInputs, key: str, epoch: int, table: pd.DataFrame) -> list[dict[str, Any]]:
        return experiments.curve_rows(draws, key, epoch, table)

    def compare(self, runs: Sequence[PooledRun[experiments.StudyResults]]) -> Comparison:
        from . import compare  # matplotlib, statsmodels

        return compare.compare(list(runs))

    # --- What run_info.json records of it, and the reports say. ---

    def design(self, results: experiments.StudyResults, config: Config[StudyOptions]) -> StudyDesign:
        options = config.options
        return StudyDesign(
            options.holdout,
            options.curves,
            options.parts,
            results.inputs.split.heldout,
            tuple(experiments.absorption_misses(results)),
        )

    def upgrade(self, data: dict[str, Any]) -> dict[str, Any]:
        """A file from before ``--parts`` ran them all, one from before ``--curves`` drew none, one from before
        warnings had none."""
        data.setdefault("parts", list(PARTS))
        data["curves"] = bool(data.get("curves"))
        data.setdefault("warnings", [])
        return data

    def design_rows(self, design: StudyDesign) -> list[tuple[str, str]]:
        left = [p for p in PARTS if p not in design.parts]
        held = (
            "held out",
            f"{design.holdout:.0%} ({len(design.heldout_additions)} of {len(facts.ADDITIONS)})",
        )
        return [held, ("parts run", ", ".join(design.parts) + (f" (not {', '.join(left)})" if left else " (all)"))]

    def measurement_rows(self, design: StudyDesign) -> list[tuple[str, str]]:
        return [("held-out additions", ", ".join(f"{a}+{b}" for a, b in design.heldout_additions))]

    def warnings(self, design: StudyDesign) -> tuple[str, ...]:
        return design.warnings

    def ran(self, design: StudyDesign) -> str | None:
        """Which parts ran: all of them, or some (their tables and figures absent)."""
        left = [p for p in PARTS if p not in design.parts]
        said = f"Parts run: {', '.join(design.parts)}"
        if not left:
            return said + " (all of manual 2.0.0)."
        return (
            f"{said}; not run: {', '.join(left)} (cctk run --parts {','.join(design.parts)}): their tables and "
            "figures are absent, and the synthesis holds only the models that were trained."
        )


V2 = StudyManual()
