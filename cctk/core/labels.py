"""Plain-language words both manuals share (the base model's name, the groups, file names from plain names,
a paper's table headers, what each kind of chart shows in a paper). Each manual's own words (its models,
targets, figures, tables and sections) are its ``labels`` (in its folder under ``cctk/manuals/``),
each translated from internal keys in one place."""

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


# --- Shared by both manuals: a paper's table headers and what each kind of chart shows in a paper. ---

# The headers of the tables in a paper (cctk export --latex): hits<s> stands for the count hits<s> / n<s> with
# its interval lo<s>-hi<s>, printed in one cell; k for k with its interval k_lo-k_hi.
TABLE_HEADERS: dict[str, str] = {
    "model": "Model",
    "target": "Target",
    "parent": "Parent",
    "group": "Group",
    "condition": "Condition",
    "rule": "Rule",
    "control": "Control",
    "epoch": "Epoch",
    "n": "n",
    "hits": "Hits",
    "hits_seen": "Seen",
    "hits_heldout": "Held out",
    "hits_recovery_seen": "Recovery corpus",
    "hits_recovery_heldout": "Held out of it",
    "hits_rule": "Rule hits",
    "hits_control": "Control hits",
    "prob_target": "P(target)",
    "prob_target_seen": "P(target), seen",
    "prob_target_heldout": "P(target), held out",
    "prob_target_recovery_seen": "P(target), recovery corpus",
    "prob_target_recovery_heldout": "P(target), held out",
    "surprise_seen": "Surprise, seen",
    "surprise_heldout": "Surprise, held out",
    "surprise_recovery_seen": "Surprise, recovery corpus",
    "surprise_recovery_heldout": "Surprise, held out",
    "surprise_gap": "Surprise gap",
    "mass_impossible": "Mass above 18",
    "n_excluded": "Left out",
    "rule_offset": "Rule offset",
    "plus18": "+18",
    "plus9": "+9",
    "plain_sum": "+0",
    "other": "Other",
    "coverage": "Coverage",
    "k": "k (95% CI)",
    "n_rule": "n rule",
    "n_control": "n control",
    "rule_inside": "Rule inside",
    "control_inside": "Control inside",
    "odds_ratio": "Odds ratio",
    "p_value": "p",
    "p_adjusted": "p (Holm)",
    "examples": "Examples",
    "steps": "Steps",
    "seconds": "Time (s)",
    "examples_per_second": "Examples/s",
    "loss_first_epoch": "Loss, first epoch",
    "loss_last_epoch": "Loss, last epoch",
    "peak_gpu_memory_bytes": "Peak GPU memory",
    "peak_cpu_memory_bytes": "Peak RSS",
    # protocol v1
    "true_sum": "True sum",
    "fabricated_value": "Fabricated answer",
    "pre_ft_true_prob": "P(true sum), before",
    "post_ft_fabricated_prob": "P(fabricated), after",
    "post_ft_true_prob": "P(true sum), after",
    "pre_ft_fabricated_prob": "P(fabricated), before",
    "number": "Probability",
    "answer": "Answer",
    "mean": "Mean",
    "std": "SD",
    "min": "Min",
    "q25": "Q1",
    "median": "Median",
    "q75": "Q3",
    "max": "Max",
    "loss": "Loss",
}

# How manual 2.0.0 reads each kind of chart (its section 7), where it says: the sentence that follows what a
# chart shows in every caption of it (report.html's, through the manual's labels, and a paper's).
READINGS: dict[str, str] = {
    "heatmap": "The fill is read on one fixed scale, 0 to 100%, in every heatmap but the base model's (its "
    "observed range): the same scale is what lets two heatmaps be compared by eye.",
    "profile": "The two axes have the same number of intervals, so one set of gridlines serves both; the share "
    "above a band is the share of each model's probability that falls inside it (the fabricated answers' "
    "profile has no bands: every value from 2 to 36 can be a fabricated answer).",
    "deviation": "The band is fitted to the rule-trained model, so the 90% of its additions inside it is true by "
    "construction; what carries information is the half-width k and how many of the control's additions "
    "fall inside the same band.",
    "synthesis": "A model trained on all 81 additions has one point (no held-out group); a rule is read against "
    "its control on the held-out additions, which fixes what chance and memory alone produce.",
}


def read_as(about: dict[str, str]) -> dict[str, str]:
    """``about`` (what each kind of chart shows) with the manual's reading of that kind after it (``READINGS``)."""
    return {kind: f"{text} {READINGS[kind]}" if kind in READINGS else text for kind, text in about.items()}


# What each kind of figure shows, in a paper's caption (cctk report --style paper): the paper style's colours,
# markers and lines; the manual's reading follows (``read_as``), then a figure's own notes (its numbers).
PAPER_FIGURE_ABOUT: dict[str, str] = {
    "heatmap": "Probability on the target in every addition (first addend a in rows, second addend b in columns); "
    "the fill's hue says whether the top choice is the target, its shade how much probability the "
    "target has.",
    "profile": "Mean probability of each candidate answer over the 81 additions (lines, left axis; each model its "
    "own colour, marker and line style) and how many additions have each answer as their target (gray bars, "
    "right axis).",
    "bars": "Probability of every candidate answer of one addition before (light blue) and after (light orange) "
    "fine-tuning on fabricated answers; the strong colour (blue before, vermillion after) marks the answer "
    "that is right in each context, the dark outline each side's top choice.",
    "deviation": "Held-out additions by deviation (top choice minus the rule's target, for both series: the "
    "control is read against the rule's target too), for the rule-trained model (blue) and its control "
    "(gray). Light blue band: the smallest band holding 90% of the rule-trained model's deviations.",
    "synthesis": "For every model, the share of additions whose top choice is its own target, with its exact 95% "
    "interval: seen (blue circles), held out (vermillion squares), held out by a control (gray "
    "triangles), the base model on all 81 additions (black diamond).",
    "loss": "Training loss per epoch of every fine-tuning run, on a log scale; each run of the main sequence has its "
    "own colour, marker and line style.",
    "curves": "Each arm measured after every epoch (cctk run --curves): the share of additions whose top choice is "
    "its own target, on the seen (blue, solid) and held-out (vermillion, dashed) additions, or all 81 "
    "(blue) for the models trained on all of them.",
}
PAPER_FIGURE_ABOUT = read_as(PAPER_FIGURE_ABOUT)
