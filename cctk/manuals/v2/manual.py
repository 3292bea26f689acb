"""Manual 2.0.0 as a value (``V2``): the base model and thirteen arms (``cctk.manuals.v2.design``), each fine-tuned from
a fresh copy of its parent, read in Parts A-D and a synthesis (``cctk.manuals.v2.parts``); its figure catalog
(``cctk.manuals.v2.catalog``) and the words of its tables (``cctk.manuals.v2.labels``) beside it.

Torch-free and matplotlib-free at import: the corpus rows (torch) and the figure catalog (matplotlib) are
imported where they are used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...core import facts
from ...core.config import PROTOCOLS, Config, Recipe
from ...core.records import Design
from ..registry import Measured, Protocol, Report
from . import parts as experiments
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

if TYPE_CHECKING:
    import pandas as pd
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


def _v2_models(parts: tuple[str, ...]) -> tuple[Measured, ...]:
    return (Measured("base"), *tuple(Measured(arm.key, arm.parent) for arm in arms_for(parts)))


def _v2_results(inputs: StudyInputs, config: Config, measurements=None, training=None, curves=None):
    return experiments.StudyResults(inputs, dict(measurements or {}), dict(training or {}), curves, config.parts)


def _v2_rows(inputs: StudyInputs, key: str, recipe: Recipe, tokenizer) -> list:
    from ...core.lm.corpus import build_corpus, tokenize  # torch

    arm = ARM_BY_KEY[key]
    return tokenize(
        build_corpus(inputs.targets[arm.target], inputs.corpus_pairs(key), recipe.repeats, inputs.seed, key), tokenizer
    )


def _v2_describe(inputs: StudyInputs, key: str) -> str:
    """What a measured model is, from which parent, on which additions."""
    if key == "base":
        return "base model: the pretrained weights, measured on all 81 additions before any fine-tuning"
    arm = ARM_BY_KEY[key]
    if arm.pairs == "all":
        where = f"all {len(inputs.corpus_pairs(key))} additions"
    else:
        left_out = len(inputs.excluded.get(key, ()))
        where = (
            f"the {len(inputs.split.seen)} seen additions ({len(inputs.heldout(key))} held out"
            + (f", {left_out} left out as coincident" if left_out else "")
            + ")"
        )
    return f"{model_name(key)}: fine-tuned from {model_name(arm.parent)} on the {target_name(arm.target)} of {where}"


def _v2_run_note(config: Config) -> str:
    arms = arms_for(config.parts)
    return (
        f"cctk pipeline (manual 2.0.0) of {config.model}: {len(arms) + 1} measured models, {len(arms)} "
        f"fine-tuning arms (parts {','.join(config.parts)}); profile {config.profile_note}, seed {config.seed}"
    )


def _v2_summary(results, head: experiments.Headline) -> list[str]:
    n = head.n_additions
    return [
        f"correct sums model: {head.correct_hits}/{n} correct sums",
        f"fabricated answers model: {head.fabricated_hits}/{n} fabricated answers",
    ] + [f"WARNING: {miss}" for miss in head.misses]


def _v2_design(results, config: Config) -> Design:
    return Design(
        holdout=config.holdout,
        curves=config.curves,
        parts=config.parts,
        heldout_additions=results.inputs.split.heldout,
        warnings=tuple(experiments.absorption_misses(results)),
    )


def _v2_figures(results, tables: dict, model_label: str) -> list:
    from . import catalog  # matplotlib

    return catalog.specs(results, tables, model_label)


def _v2_model_figures(results, key: str) -> list:
    from . import catalog

    return [catalog.heatmap_spec(results, figure) for figure in catalog.heatmap_keys(key)]


def _dataset(inputs: StudyInputs, key: str) -> tuple[str, pd.DataFrame]:
    return target_name(ARM_BY_KEY[key].target), corpus_table(inputs, key)


V2: Protocol[StudyInputs, experiments.StudyResults, experiments.Headline] = Protocol(
    name="v2",
    config=PROTOCOLS["v2"],
    scoring=facts.SCORING,
    report=Report(
        TABLES,
        TABLE_CAPTIONS,
        SECTIONS,
        experiments.TABLE_PART,
        FIGURE_ABOUT,
        "table11",
        notes={"synthesis": SINGLE_RUN},
        paper_captions=PAPER_TABLE_CAPTIONS,
    ),
    seed_roles={
        "seeds[0]": "every random draw of the run: the held-out split, the fabricated answers, the control answers, "
        "the corpus shuffles, the batch order and dropout of every fine-tuning run (re-seeded at its "
        "start), and the bootstrap of the deviation bands",
        "seeds[1:]": "reserved for repetitions; not used by this run",
    },
    params={"candidates": f"{facts.CANDIDATES[0]}..{facts.CANDIDATES[-1]}", "end_marker": repr(facts.END_MARKER)},
    model_name=model_name,
    vocabulary=VOCABULARY,
    models=_v2_models,
    draw=lambda config: build_study_inputs(config.seed, config.holdout),
    new_results=_v2_results,
    draws_table=targets_table,
    corpus_texts=lambda inputs: (),
    rows=_v2_rows,
    corpus_note=own_target,
    dataset=_dataset,
    describe=_v2_describe,
    run_note=_v2_run_note,
    compute_tables=experiments.compute_tables,
    headline=experiments.headline,
    model_metrics=experiments.model_metrics,
    summary=_v2_summary,
    design=_v2_design,
    figures=_v2_figures,
    model_figures=_v2_model_figures,
    compare_tables=(
        "findings",
        "per_run",
        "cross_seed",
        "rule_vs_control_pooled",
        "heldout_pooled",
        "implausibility_distance",
        "implausibility_possible",
        "recipe_sensitivity",
    ),
    main_sequence=MAIN_SEQUENCE,
    resumable=True,
    version="2.0.0",
)
