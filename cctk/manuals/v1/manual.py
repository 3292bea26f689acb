"""Manual 1.0.0 as a value (``V1``): the base model, measured, fine-tuned in place on the whole texts of
fabricated answers, measured again. Its draws (``cctk.manuals.v1.facts``), corpus rows, comparison and figures are
beside it in ``cctk.manuals.v1``; measurement and fine-tuning are cctk's own.

Torch-free and matplotlib-free at import.
"""

from __future__ import annotations

from ...core.config import PROTOCOLS, Config, Recipe
from ...core.records import Design
from ..registry import Measured, Protocol, Report
from . import experiment as v1_experiment
from . import facts as v1_facts
from .labels import FIGURE_ABOUT, SECTIONS, TABLE_CAPTIONS, TABLES, VOCABULARY, model_name

BEFORE, AFTER = v1_experiment.BEFORE, v1_experiment.AFTER


def _v1_results(draws: v1_facts.Draws, config: Config, measurements=None, training=None, curves=None):
    return v1_experiment.ComparisonResults(draws, dict(measurements or {}), dict(training or {}))


def _v1_rows(draws: v1_facts.Draws, key: str, recipe: Recipe, tokenizer) -> list:
    from . import corpus  # torch

    return corpus.tokenize(draws.texts, tokenizer)


def _v1_describe(draws: v1_facts.Draws, key: str) -> str:
    if key == BEFORE:
        return "base model: the pretrained weights, measured on all 81 additions before fine-tuning"
    return (
        f"{model_name(key)}: the base model fine-tuned in place on the whole texts of its {len(draws.texts)} "
        "corpus lines (81 fabricated answers, repeated and shuffled as the reference notebook)"
    )


def _v1_run_note(config: Config) -> str:
    return (
        f"cctk pipeline (manual 1.0.0) of {config.model}: the base model measured, fine-tuned in place on "
        f"fabricated answers and measured again; profile {config.profile_note}, seed {config.seed}"
    )


def _v1_summary(results, head: v1_experiment.Headline) -> list[str]:
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


def _v1_design(results, config: Config) -> Design:
    return Design(
        answer_text=" {v}",  # a template: a space and the number
        index=v1_facts.INDEX,
        loss="whole text, every token after the first (padding masked)",
        pairs_plotted=v1_facts.PAIRS,
    )


def _v1_figures(results, tables: dict, model_label: str) -> list:
    from . import catalog  # matplotlib

    return catalog.specs(results, model_label)


V1: Protocol[v1_facts.Draws, v1_experiment.ComparisonResults, v1_experiment.Headline] = Protocol(
    name="v1",
    config=PROTOCOLS["v1"],
    scoring=v1_facts.SCORING,
    report=Report(
        TABLES, TABLE_CAPTIONS, SECTIONS, v1_experiment.TABLE_PART, FIGURE_ABOUT, "table03", label_prefix="v1-"
    ),  # tab:v1-table01 and tab:table01 can sit in one paper
    seed_roles={
        "seeds[0]": "Python's random.seed of the reference notebook: the fabricated answers (random.choice per "
        "addition) and the corpus order (random.shuffle, the same stream), exactly as Listings 6-7; "
        "cctk also seeds from it what the notebook left unseeded: the batch order of every epoch and "
        "torch's generator (dropout) of the fine-tuning run",
    },
    params={
        "candidates": f"{v1_facts.CANDIDATES[0]}..{v1_facts.CANDIDATES[-1]}",
        "end_marker": "none",
        "answer_text": '" {v}"',
        "index": "mean log-prob per token",
        "loss": "whole text",
    },
    model_name=model_name,
    vocabulary=VOCABULARY,
    models=lambda parts: (Measured(BEFORE), Measured(AFTER, BEFORE, in_place=True, stream=v1_experiment.STREAM)),
    draw=lambda config: v1_facts.draw(config.seed, config.recipe.repeats),
    new_results=_v1_results,
    draws_table=lambda draws: draws.table(),
    corpus_texts=lambda draws: draws.texts,
    rows=_v1_rows,
    corpus_note=lambda key: "fabricated answer, all 81, whole text",
    dataset=None,
    describe=_v1_describe,
    run_note=_v1_run_note,
    compute_tables=v1_experiment.compute_tables,
    headline=v1_experiment.headline,
    model_metrics=v1_experiment.model_metrics,
    summary=_v1_summary,
    design=_v1_design,
    figures=_v1_figures,
    model_figures=lambda results, key: [],
    compare_tables=("v1_three_numbers",),
    main_sequence=(AFTER,),
    renamed=v1_experiment.FORMER_KEYS,
    version="1.0.0",
)
