"""A protocol as a value: what manual 2.0.0 and manual 1.0.0 do differently, and the registry of both.

One orchestration (``cctk.pipeline.stages``) and one writer (``cctk.outputs.write``) take a ``Protocol``;
what differs between the manuals is data and plain functions: the profiles, how a model is scored,
which models are measured and trained from which (a fresh copy, or in place), the draws and corpora,
the tables, figures and report sections, the headline, the seed roles and what run_info.json records.
Each manual's value lives in its room: ``cctk.manuals.v2.manual.V2`` and ``cctk.manuals.v1.manual.V1``. This module
holds what a protocol is and where each one lives (``HOMES``), and ``get``, the one resolver of a name:
a manual is imported by its home, as a plugin is, so no arrow points from here up to the manuals.

Torch-free and matplotlib-free at import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import import_module
from typing import TYPE_CHECKING, Generic, TypeVar
from typing import Protocol as TypingProtocol

import pandas as pd

from ..core.config import DEFAULT_PROTOCOL, PARTS, Config, ProtocolConfig, Recipe, check_protocol
from ..core.facts import Scoring
from ..core.labels import Vocabulary
from ..core.records import Design

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from ..figures.spec import Spec


class Logged(TypingProtocol):
    """A typed record of figures logged to an MLflow run as its metrics (by their MLflow names)."""

    def metrics(self) -> dict[str, float]: ...


D = TypeVar("D")  # what a protocol draws before training (StudyInputs, v1's Draws)
R = TypeVar("R")  # its results (2.0.0's StudyResults, 1.0.0's ComparisonResults)
H = TypeVar("H", bound=Logged)  # its headline (experiments.Headline, v1's Headline)


@dataclass(frozen=True)
class Measured:
    """A measured model: the pretrained weights (no ``parent``), or a model fine-tuned from ``parent``."""

    key: str
    parent: str | None = None
    in_place: bool = False  # trained on its parent's very weights (1.0.0), not on a fresh copy of them
    stream: str | None = None  # the name its training draws are seeded from, when it is not ``key``


@dataclass(frozen=True)
class Report:
    """The tables and sections of a run's outputs, in plain language (``cctk.core.labels``)."""

    tables: dict[str, str]  # tableNN -> title (its folder name)
    captions: dict[str, str]
    sections: dict[str, str]  # report section key -> heading
    table_part: dict[str, str]  # tableNN -> its section
    about: dict[str, str]  # figure kind -> what it shows
    runs_table: str  # the table of fine-tuning runs
    label_prefix: str = ""  # before a table's name in its LaTeX label
    paper_captions: dict[str, str] | None = None  # a paper's table captions (None: built from titles and captions)
    notes: dict[str, str] = field(default_factory=dict)  # section -> a paragraph under its heading


@dataclass(frozen=True)
class Protocol(Generic[D, R, H]):
    """A manual as a value, generic over what it draws (``D``), its results (``R``) and headline (``H``).
    Resolved from its name once, at an edge (``get``): the library entry, run_info.json's reader, a resume's MLflow
    tags."""

    name: str  # the cctk.protocol tag, run_info.json's "protocol", ``cctk run --protocol``
    config: ProtocolConfig  # its profiles, whether it splits the additions, its default seed
    scoring: Scoring
    report: Report
    seed_roles: dict[str, str]  # "seeds[0]" (and "seeds[1:]") -> what it controls
    params: dict[str, str]  # the parent run's parameters besides the configuration's
    model_name: Callable[[str], str]  # a model key's plain name: its files, runs and table rows (its labels)
    vocabulary: Vocabulary  # its plain names by kind and key, and former ones: keys back from labels on disk
    models: Callable[[tuple[str, ...]], tuple[Measured, ...]]  # the models a run of these parts measures
    draw: Callable[[Config], D]  # everything drawn before training
    new_results: Callable[..., R]  # (draws, config, measurements, training, curves) -> its results
    draws_table: Callable[[D], pd.DataFrame]  # targets.csv
    corpus_texts: Callable[[D], tuple[str, ...]]  # corpus.txt (none where the corpora are per arm)
    rows: Callable[[D, str, Recipe, PreTrainedTokenizerBase], list]  # (draws, key, recipe, tokenizer) -> rows
    corpus_note: Callable[[str], str]  # a fine-tuned model's "corpus" parameter
    dataset: Callable[[D, str], tuple[str, pd.DataFrame]] | None  # its MLflow dataset: (name, table)
    describe: Callable[[D, str], str]  # one line on a measured model (its run's description)
    run_note: Callable[[Config], str]  # one line on the run (the parent run's description)
    compute_tables: Callable[[R], dict[str, pd.DataFrame]]
    headline: Callable[[R], H]  # the parent run's figures (its metrics)
    model_metrics: Callable[[R, str], Logged]  # a measured model's readings (its run's metrics)
    summary: Callable[[R, H], list[str]]  # what the console says at the end (results, headline)
    design: Callable[[R, Config], Design]  # run_info.json's fields of this protocol
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


# Where each manual's value lives (``module:name``), by its name (``cctk.core.config.PROTOCOLS``).
HOMES: dict[str, str] = {"v2": "cctk.manuals.v2.manual:V2", "v1": "cctk.manuals.v1.manual:V1"}


def get(name: str | None) -> Protocol:
    """The protocol of a name (``cctk.core.config.PROTOCOLS``); the default for None (a session from before protocols).
    The one resolver: called only where a name comes in (tests/manuals/test_protocol_value.py names the edges)."""
    name = name or DEFAULT_PROTOCOL
    check_protocol(name)
    module, value = HOMES[name].split(":")
    return getattr(import_module(module), value)
