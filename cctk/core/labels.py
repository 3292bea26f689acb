"""Plain-language words every manual shares (the base model's name, the groups, file names from plain names, the
headers of the kernels' columns, what each shared kind of chart shows in a paper). Each manual's own words (its
models, targets, figures, tables, sections, column headers and readings) are its ``labels`` (in its folder under
``cctk/manuals/``), each translated from internal keys in one place."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .errors import CctkError

if TYPE_CHECKING:
    import pandas as pd

BASE_MODEL = "base model"  # the one key both manuals share: the model as loaded

GROUPS = {"seen": "seen", "heldout": "held out", "all": "all"}  # a group of additions, as table09 names it


# --- Keys at the seams, labels at the edges. ---
# Every label column of a table is followed by its key column: the internal key its label translates
# (``model`` "recovery", ``model_key`` "m_recover"). The machine-readable files (CSV, XLSX) carry both; a page a
# reader sees (LaTeX, HTML) the labels alone (``printed``); code that joins tables (compare, the synthesis
# chart, cctk.results) joins on the keys, so that a label can change without breaking a session written before.
KEY_COLUMNS: dict[str, str] = {
    "model": "model_key",
    "parent": "parent_key",
    "target": "target_key",
    "group": "group_key",
    "rule": "rule_key",
    "control": "control_key",
}
# What each label column names: a model, a target table or a group of additions (a Vocabulary's kinds).
KINDS: dict[str, str] = {
    "model": "model",
    "parent": "model",
    "rule": "model",
    "control": "model",
    "target": "target",
    "group": "group",
}


@dataclass(frozen=True)
class Vocabulary:
    """A manual's plain names, by kind (``model``, ``target``, ``group``) and key, and the names keys had
    before: a label read back from a session written before keys (or before a label changed) gives its key."""

    names: dict[str, dict[str, str]]  # kind -> key -> today's plain name
    former: dict[str, dict[str, str]] = field(default_factory=dict)  # kind -> a plain name used before -> key

    def name(self, kind: str, key: str) -> str:
        return self.names[kind][key]

    def keys(self, kind: str) -> dict[str, str]:
        """Plain name (today's or a former one) -> key; today's name wins where a former one is reused."""
        return {**self.former.get(kind, {}), **{name: key for key, name in self.names.get(kind, {}).items()}}

    def former_names(self, kind: str, key: str) -> list[str]:
        """The plain names ``key`` had before today's (the files of a session may carry them)."""
        return [name for name, k in self.former.get(kind, {}).items() if k == key]

    def keyed(self, column: str, key: str) -> dict[str, str]:
        """A label column and its key beside it: ``keyed("parent", "m_random")`` ->
        ``{"parent": "fabricated answers", "parent_key": "m_random"}``."""
        return {column: self.name(KINDS[column], key), KEY_COLUMNS[column]: key}


def with_keys(
    table: pd.DataFrame, vocabulary: Vocabulary, columns: Iterable[str] = tuple(KEY_COLUMNS), where: str = "a table"
) -> pd.DataFrame:
    """``table`` (a DataFrame) with a key column right after each label column of ``columns`` that has none
    (a table written before keys), every label translated back to its key; a label ``vocabulary`` never
    had is a one-line error naming it and ``where`` (a key guessed wrong would join the wrong rows)."""
    table = table.copy()
    for column in (c for c in columns if c in table.columns and KEY_COLUMNS[c] not in table.columns):
        keys = vocabulary.keys(KINDS[column])
        unknown = sorted(set(table[column].dropna()) - set(keys))
        if unknown:
            raise CctkError(
                f"{where}: {column} {', '.join(map(repr, unknown))} is no plain name this cctk "
                f"knows; add it to its manual's former names (labels.FORMER)"
            )
        at = table.columns.get_loc(column)
        assert isinstance(at, int)  # a table's columns are unique: one position
        table.insert(at + 1, KEY_COLUMNS[column], table[column].map(keys))
    return table


def printed(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` as a reader sees it: its labels, without their key columns."""
    return table.drop(columns=[c for c in KEY_COLUMNS.values() if c in table.columns])


def file_stem(text: str) -> str:
    """A plain name made safe for a file name: ``sum + 18 from correct sums`` -> ``sum_plus_18_from_correct_sums``."""
    cleaned = text.replace("+", "plus").replace(".", "_")
    return "_".join("".join(c if c.isalnum() else " " for c in cleaned).split())


# --- Shared by every manual: the headers of the columns the kernels make, and what the shared chart kinds show. ---

# The headers of the tables in a paper (cctk export --latex) and report.html, for the columns every manual's tables
# can have (labels, readings, counts, the fine-tuning record); a manual adds its own (``ManualSpec.headers``).
# hits<s> stands for the count hits<s> / n<s> with its interval lo<s>-hi<s>, printed in one cell.
TABLE_HEADERS: dict[str, str] = {
    "model": "Model",
    "target": "Target",
    "parent": "Parent",
    "group": "Group",
    "epoch": "Epoch",
    "n": "n",
    "hits": "Hits",
    "hits_seen": "Seen",
    "hits_heldout": "Held out",
    "prob_target": "P(target)",
    "prob_target_seen": "P(target), seen",
    "prob_target_heldout": "P(target), held out",
    "surprise_seen": "Surprise, seen",
    "surprise_heldout": "Surprise, held out",
    "examples": "Examples",
    "steps": "Steps",
    "seconds": "Time (s)",
    "examples_per_second": "Examples/s",
    "loss_first_epoch": "Loss, first epoch",
    "loss_last_epoch": "Loss, last epoch",
    "peak_gpu_memory_bytes": "Peak GPU memory",
    "peak_cpu_memory_bytes": "Peak RSS",
    "loss": "Loss",
    # cctk compare's, whatever the manual: the runs compared and their groups
    "run_id": "Run",
    "base_model": "Base model",
    "seed": "Seed",
    "runs": "Runs",
    "protocol": "Protocol",
    "parts": "Parts",
}

# How a paper caption and report.html read a count cell of hits / n, in every manual's tables
COUNT_CAPTION = "a count is hits / n (share, exact Clopper-Pearson 95% interval)"

# What each shared kind of figure shows, in a paper's caption (cctk report --style paper): the paper style's
# colours, markers and lines; a manual adds its own kinds and its reading of each (``ManualSpec.paper_figure_about``),
# then a figure's own notes (its numbers) follow.
PAPER_FIGURE_ABOUT: dict[str, str] = {
    "heatmap": "Probability on the target in every addition (first addend a in rows, second addend b in columns); "
    "the fill's hue says whether the top choice is the target, its shade how much probability the "
    "target has.",
    "bars": "Probability of every candidate answer of one addition before (light blue) and after (light orange) "
    "fine-tuning on fabricated answers; the strong colour (blue before, vermillion after) marks the answer "
    "that is right in each context, the dark outline each side's top choice.",
    "loss": "Training loss per epoch of every fine-tuning run, on a log scale; each run of the main sequence has its "
    "own colour, marker and line style.",
}


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural but for one: 1 table, 0 figures, 25 figures."""
    return f"{n} {noun}{'s' * (n != 1)}"
