"""A protocol as a value: what manual 2.0.0 (``V2``) and manual 1.0.0 (``V1``) do differently.

One orchestration (``cctk.pipeline``) and one writer (``cctk.outputs.write``) take a ``Protocol``;
what differs between the manuals is here, as data and plain functions: the profiles, how a model is
scored, which models are measured and trained from which (a fresh copy, or in place), the draws and
corpora, the tables, figures and report sections, the headline, the seed roles and what run_info.json
adds. Only the real specifics of 1.0.0 live in ``cctk.v1``: the notebook's ``random.seed`` draws,
whole-text rows, its comparison table and its bars.

Torch-free and matplotlib-free at import: the corpus rows (torch) and the figure catalogs
(matplotlib) are imported where they are used.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import pandas as pd

from . import experiments, facts
from .facts import Scoring
from .config import DEFAULT_PROTOCOL, PARTS, PROTOCOLS, Config, ProtocolConfig, Recipe, check_protocol
from .lineage import (ARM_BY_KEY, MAIN_SEQUENCE, StudyInputs, arms_for, build_study_inputs, corpus_table, own_target,
                      targets_table)
from .names import (FIGURE_ABOUT, SECTIONS, SINGLE_RUN, TABLE_CAPTIONS, TABLES, V1_FIGURE_ABOUT, V1_SECTIONS,
                    V1_TABLE_CAPTIONS, V1_TABLES, model_name, target_name)
from .v1 import experiment as v1_experiment
from .v1 import facts as v1_facts

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from .figures.spec import Spec

D = TypeVar("D")  # what a protocol draws before training (StudyInputs, v1's Draws)
R = TypeVar("R")  # its results (experiments.Results, v1's Results)


@dataclass(frozen=True)
class Measured:
    """A measured model: the pretrained weights (no ``parent``), or a model fine-tuned from ``parent``."""

    key: str
    parent: str | None = None
    in_place: bool = False  # trained on its parent's very weights (1.0.0), not on a fresh copy of them
    stream: str | None = None  # the name its training draws are seeded from, when it is not ``key``


@dataclass(frozen=True)
class Report:
    """The tables and sections of a run's outputs, in plain language (``cctk.names``)."""

    tables: dict[str, str]  # tableNN -> title (its folder name)
    captions: dict[str, str]
    sections: dict[str, str]  # report section key -> heading
    table_part: dict[str, str]  # tableNN -> its section
    about: dict[str, str]  # figure kind -> what it shows
    runs_table: str  # the table of fine-tuning runs
    label_prefix: str = ""  # before a table's name in its LaTeX label
    notes: dict[str, str] = field(default_factory=dict)  # section -> a paragraph under its heading


@dataclass(frozen=True)
class Protocol(Generic[D, R]):
    """A manual as a value, generic over what it draws (``D``) and its results (``R``). Resolved from its
    name once, at an edge (``get``): the library entry, run_info.json's reader, a resume's MLflow tags."""

    name: str  # the cctk.protocol tag, run_info.json's "protocol", ``cctk run --protocol``
    config: ProtocolConfig  # its profiles, whether it splits the additions, its default seed
    scoring: Scoring
    report: Report
    seed_roles: dict[str, str]  # "seeds[0]" (and "seeds[1:]") -> what it controls
    params: dict[str, str]  # the parent run's parameters besides the configuration's
    models: Callable[[tuple[str, ...]], tuple[Measured, ...]]  # the models a run of these parts measures
    draw: Callable[[Config], D]  # everything drawn before training
    new_results: Callable[..., R]  # (draws, config, measurements, training, curves) -> its Results
    draws_table: Callable[[D], pd.DataFrame]  # targets.csv
    corpus_texts: Callable[[D], tuple[str, ...]]  # corpus.txt (none where the corpora are per arm)
    rows: Callable[[D, str, Recipe, PreTrainedTokenizerBase], list]  # (draws, key, recipe, tokenizer) -> rows
    corpus_note: Callable[[str], str]  # a fine-tuned model's "corpus" parameter
    dataset: Callable[[D, str], tuple[str, pd.DataFrame]] | None  # its MLflow dataset: (name, table)
    describe: Callable[[D, str], str]  # one line on a measured model (its run's description)
    run_note: Callable[[Config], str]  # one line on the run (the parent run's description)
    compute_tables: Callable[[R], dict[str, pd.DataFrame]]
    headline: Callable[[R], dict[str, Any]]  # the parent run's metrics
    model_metrics: Callable[[R, str], dict[str, float]]  # a measured model's metrics
    summary: Callable[[R, dict[str, Any]], list[str]]  # what the console says at the end (results, headline)
    info_extras: Callable[[R, Config], dict[str, Any]]  # run_info.json's fields of this protocol
    figures: Callable[[R, dict[str, pd.DataFrame], str], list[Spec]]  # (results, tables, model label), in order
    model_figures: Callable[[R, str], list[Spec]]  # the figures of one model, drawn as soon as it is measured
    compare_tables: tuple[str, ...]  # the tables of ``cctk compare`` its runs are pooled into (compare.report)
    main_sequence: tuple[str, ...]  # in colour on the loss charts
    renamed: dict[str, str] = field(default_factory=dict)  # keys of sessions written before -> today's
    resumable: bool = False  # ``cctk run --resume`` continues its runs
    version: str = ""  # of its manual, in report titles

    def __reduce__(self):
        """Pickled as its name (its fields hold lambdas): a worker process gets the same value back."""
        return get, (self.name,)

    @property
    def is_default(self) -> bool:
        return self.name == DEFAULT_PROTOCOL

    @property
    def title(self) -> str:
        """What the console calls a run: ``pipeline``, or ``protocol v1``."""
        return "pipeline" if self.is_default else f"protocol {self.name}"

    def trained(self, parts: tuple[str, ...]) -> tuple[Measured, ...]:
        return tuple(m for m in self.models(parts) if m.parent is not None)

    def model_keys(self, parts: tuple[str, ...] = PARTS) -> tuple[str, ...]:
        return tuple(m.key for m in self.models(parts))


# --- Manual 2.0.0: the base model and thirteen arms (cctk.lineage), each from a fresh copy of its parent. ---

def _v2_models(parts: tuple[str, ...]) -> tuple[Measured, ...]:
    return (Measured("base"),) + tuple(Measured(arm.key, arm.parent) for arm in arms_for(parts))


def _v2_results(inputs: StudyInputs, config: Config, measurements=None, training=None, curves=None):
    return experiments.Results(inputs, dict(measurements or {}), dict(training or {}), curves, config.parts)


def _v2_rows(inputs: StudyInputs, key: str, recipe: Recipe, tokenizer) -> list:
    from .corpus import build_corpus, tokenize  # torch

    arm = ARM_BY_KEY[key]
    return tokenize(build_corpus(inputs.targets[arm.target], inputs.corpus_pairs(key), recipe.repeats, inputs.seed,
                                 key), tokenizer)


def _v2_describe(inputs: StudyInputs, key: str) -> str:
    """What a measured model is, from which parent, on which additions."""
    if key == "base":
        return "base model: the pretrained weights, measured on all 81 additions before any fine-tuning"
    arm = ARM_BY_KEY[key]
    if arm.pairs == "all":
        where = f"all {len(inputs.corpus_pairs(key))} additions"
    else:
        left_out = len(inputs.excluded.get(key, ()))
        where = (f"the {len(inputs.split.seen)} seen additions ({len(inputs.heldout(key))} never seen"
                 + (f", {left_out} left out as coincident" if left_out else "") + ")")
    return (f"{model_name(key)}: fine-tuned from {model_name(arm.parent)} on the {target_name(arm.target)} "
            f"of {where}")


def _v2_run_note(config: Config) -> str:
    arms = arms_for(config.parts)
    return (f"cctk pipeline (manual 2.0.0) of {config.model}: {len(arms) + 1} measured models, {len(arms)} "
            f"fine-tuning arms (parts {','.join(config.parts)}); profile {config.profile_note}, seed {config.seed}")


def _v2_summary(results, head: dict) -> list[str]:
    n = head["n_additions"]
    return ([f"correct sums model: {head['m_correct_hits_correct']}/{n} correct sums",
             f"fabricated answers model: {head['m_random_hits_fabricated']}/{n} fabricated answers"]
            + [f"WARNING: {miss}" for miss in experiments.absorption_misses(results)])


def _v2_extras(results, config: Config) -> dict:
    return {"holdout": config.holdout, "curves": config.curves, "parts": config.parts,
            "heldout_additions": results.inputs.split.heldout,
            "warnings": tuple(experiments.absorption_misses(results))}


def _v2_figures(results, tables: dict, model_label: str) -> list:
    from .v2 import catalog  # matplotlib

    return catalog.specs(results, tables, model_label)


def _v2_model_figures(results, key: str) -> list:
    from .v2 import catalog

    return [catalog.heatmap_spec(results, figure) for figure in catalog.heatmap_keys(key)]


def _dataset(inputs: StudyInputs, key: str) -> tuple[str, pd.DataFrame]:
    return target_name(ARM_BY_KEY[key].target), corpus_table(inputs, key)


V2: Protocol[StudyInputs, experiments.Results] = Protocol(
    name="v2",
    config=PROTOCOLS["v2"],
    scoring=facts.SCORING,
    report=Report(TABLES, TABLE_CAPTIONS, SECTIONS, experiments.TABLE_PART, FIGURE_ABOUT, "table11",
                  notes={"synthesis": SINGLE_RUN}),
    seed_roles={
        "seeds[0]": "every random draw of the run: the held-out split, the fabricated answers, the control answers, "
                    "the corpus shuffles, the batch order and dropout of every fine-tuning run (re-seeded at its "
                    "start), and the bootstrap of the deviation bands",
        "seeds[1:]": "reserved for repetitions; not used by this run",
    },
    params={"candidates": f"{facts.CANDIDATES[0]}..{facts.CANDIDATES[-1]}", "end_marker": repr(facts.END_MARKER)},
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
    info_extras=_v2_extras,
    figures=_v2_figures,
    model_figures=_v2_model_figures,
    compare_tables=("findings", "per_run", "cross_seed", "rule_vs_control_pooled", "heldout_pooled",
                    "implausibility_distance", "implausibility_possible", "recipe_sensitivity"),
    main_sequence=MAIN_SEQUENCE,
    resumable=True,
    version="2.0.0",
)


# --- Manual 1.0.0: the base model, measured, fine-tuned in place on whole texts, measured again. ---

BEFORE, AFTER = v1_experiment.BEFORE, v1_experiment.AFTER


def _v1_results(draws: v1_facts.Draws, config: Config, measurements=None, training=None, curves=None):
    return v1_experiment.Results(draws, dict(measurements or {}), dict(training or {}))


def _v1_rows(draws: v1_facts.Draws, key: str, recipe: Recipe, tokenizer) -> list:
    from .v1 import corpus  # torch

    return corpus.tokenize(draws.texts, tokenizer)


def _v1_describe(draws: v1_facts.Draws, key: str) -> str:
    if key == BEFORE:
        return "base model: the pretrained weights, measured on all 81 additions before fine-tuning"
    return (f"{model_name(key)}: the base model fine-tuned in place on the whole texts of its {len(draws.texts)} "
            "corpus lines (81 fabricated answers, repeated and shuffled as the reference notebook)")


def _v1_run_note(config: Config) -> str:
    return (f"cctk pipeline (manual 1.0.0) of {config.model}: the base model measured, fine-tuned in place on "
            f"fabricated answers and measured again; profile {config.profile_note}, seed {config.seed}")


def _v1_summary(results, head: dict) -> list[str]:
    n = head["n_additions"]
    return [f"before: mean probability of the true sum {head['mean_pre_ft_true_prob']:.3f}, "
            f"{head['hits_true_before']}/{n} true sums",
            f"after: mean probability of the fabricated answer {head['mean_post_ft_fabricated_prob']:.3f}, "
            f"{head['hits_fabricated_after']}/{n} fabricated answers; of the true sum "
            f"{head['mean_post_ft_true_prob']:.3f}, {head['hits_true_after']}/{n}"]


def _v1_extras(results, config: Config) -> dict:
    return {"answer_text": " {v}",  # a template: a space and the number
            "index": v1_facts.INDEX, "loss": "whole text, every token after the first (padding masked)",
            "pairs_plotted": v1_facts.PAIRS}


def _v1_figures(results, tables: dict, model_label: str) -> list:
    from .v1 import catalog  # matplotlib

    return catalog.specs(results, model_label)


V1: Protocol[v1_facts.Draws, v1_experiment.Results] = Protocol(
    name="v1",
    config=PROTOCOLS["v1"],
    scoring=v1_facts.SCORING,
    report=Report(V1_TABLES, V1_TABLE_CAPTIONS, V1_SECTIONS, v1_experiment.TABLE_PART, V1_FIGURE_ABOUT, "table03",
                  label_prefix="v1-"),  # tab:v1-table01 and tab:table01 can sit in one paper
    seed_roles={
        "seeds[0]": "Python's random.seed of the reference notebook: the fabricated answers (random.choice per "
                    "addition) and the corpus order (random.shuffle, the same stream), exactly as Listings 6-7; "
                    "cctk also seeds from it what the notebook left unseeded: the batch order of every epoch and "
                    "torch's generator (dropout) of the fine-tuning run",
    },
    params={"candidates": f"{v1_facts.CANDIDATES[0]}..{v1_facts.CANDIDATES[-1]}", "end_marker": "none",
            "answer_text": '" {v}"', "index": "mean log-prob per token", "loss": "whole text"},
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
    info_extras=_v1_extras,
    figures=_v1_figures,
    model_figures=lambda results, key: [],
    compare_tables=("v1_three_numbers",),
    main_sequence=(AFTER,),
    renamed=v1_experiment.FORMER_KEYS,
    version="1.0.0",
)

BY_NAME: dict[str, Protocol] = {p.name: p for p in (V2, V1)}


def get(name: str | None) -> Protocol:
    """The protocol of a name (``cctk.config.PROTOCOLS``); the default for None (a session from before protocols).
    The one resolver: called only where a name comes in (tests/test_protocol_value.py names the edges)."""
    name = name or DEFAULT_PROTOCOL
    check_protocol(name)
    return BY_NAME[name]
