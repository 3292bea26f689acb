"""A run's tables as a paper prints them: booktabs LaTeX with plain headers, ``8/24 (33\\%, 16--55\\%)``
for a count with its exact interval, p-values to three significant digits (``< 0.001`` below), ``$\\infty$``
for an infinite odds ratio, and a layout chosen to fit (a column, else the page as ``table*``, then
smaller type and stacked cells) instead of scaling the table.

DataFrames in, LaTeX text out: no files, no figures. ``cctk.outputs.paper`` writes them for a paper,
``cctk.outputs.tables`` beside each table's CSV; ``latex_text`` is cctk's one LaTeX escape.
"""

from __future__ import annotations

import decimal
import math
import re
import textwrap
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from ..core.labels import printed
from ..core.lm.record import PEAK_COLUMNS

if TYPE_CHECKING:
    from ..manuals.manual import ManualSpec

# LaTeX's text mode, under any font encoding: its specials escaped; <, > and | in math (under OT1, the
# default, they print as the glyphs at their slots: an inverted exclamation mark, an inverted question mark,
# an em dash); the few non-ASCII signs cctk writes, as LaTeX (pdflatex stops at an undeclared one).
LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"$<$",
    ">": r"$>$",
    "|": r"$|$",
    "\u00b7": r"\textperiodcentered{}",
    "\u00b1": r"$\pm$",
    "\u2192": r"$\rightarrow$",
    "\u2026": r"\dots{}",
    "\u221e": r"$\infty$",
    "\u2013": "--",
    "\u2014": "---",
    "\u2265": r"$\geq$",
    "\u2264": r"$\leq$",
    "\u2212": "$-$",
    "\u00d7": r"$\times$",
}
# Groups of columns a count with its interval is made of: hits<s>, n<s>, lo<s>, hi<s>.
GROUPS = ("", "_seen", "_heldout", "_recovery_seen", "_recovery_heldout", "_rule", "_control")
# Widths in points: the column of a two-column page (3.375 in) and the whole text (7 in), see paper.tex;
# an average character of each type size, and the padding of a column (2 \tabcolsep).
COLUMN_PT, PAGE_PT = 243.0, 504.0
CHAR_PT = {r"\small": 4.9, r"\footnotesize": 4.4, r"\scriptsize": 3.8}
PAD_PT = 12.0
CM_PT = 28.45
LONG_ROWS = 40  # longer tables break across pages (longtable)
MATH, COMMAND = re.compile(r"\$([^$]*)\$"), re.compile(r"\\[A-Za-z]+")


def latex_text(value: str) -> str:
    """Plain text made safe for LaTeX: every caption, header and cell cctk writes into a .tex file."""
    out = []
    for c in value:
        if c in LATEX_SPECIAL:
            out.append(LATEX_SPECIAL[c])
        elif ord(c) < 128:
            out.append(c)
        else:  # an accent: its base letter (pdflatex without fontspec knows no other)
            out.append(unicodedata.normalize("NFKD", c).encode("ascii", "ignore").decode("ascii"))
    return "".join(out)


def size(n_bytes: float | None) -> str:
    if n_bytes is None:
        return "-"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.1f} {unit}"
    return f"{int(n_bytes)} B"


@dataclass(frozen=True)
class Marks:
    """The signs a printed table is written with: LaTeX for a paper (``LATEX``), plain Unicode for a web page
    (``PLAIN``: report.html). The cells and headers are the same words and numbers either way."""

    percent: str
    dash: str  # between an interval's bounds, and a missing value
    less: str
    more: str
    infinity: str
    times_ten: Callable[[str, int], str]  # a tiny number: its mantissa times ten to the power
    escape: Callable[[str], str]  # plain words made safe


SUPERSCRIPT = str.maketrans("-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079")


def _latex_power(mantissa: str, exponent: int) -> str:
    return f"${mantissa}\\times10^{{{exponent}}}$"


def _plain_power(mantissa: str, exponent: int) -> str:
    return f"{mantissa}\u00d710{str(exponent).translate(SUPERSCRIPT)}"  # 6.51x10 with -5 raised


LATEX = Marks("\\%", "--", "$<$", "$>$", "$\\infty$", _latex_power, latex_text)
PLAIN = Marks("%", "\u2013", "<", ">", "\u221e", _plain_power, str)


def half_up(value: float, digits: int = 0) -> str:
    """``value`` with ``digits`` decimals, a half rounded up as a reader rounds it (3/24 is 12.5%: ``13``, where
    Python's format rounds half to even, ``12``); read at ten decimals first, so that 100 * 7/40 (17.4999...)
    is the 17.5 it stands for."""
    exact = decimal.Decimal(f"{value:.10f}")
    return str(exact.quantize(decimal.Decimal(1).scaleb(-digits), rounding=decimal.ROUND_HALF_UP))


def percent(share: float, marks: Marks = LATEX) -> str:
    """A share as a percent: whole numbers from 1 to 99; nearer 0 or 100 one decimal (two where one would
    round to the end itself), so that a bound near an end never reads as the end: 0.3, 99.6, 99.96; a half
    rounded up (``half_up``)."""
    value = 100 * share
    if value in (0.0, 100.0) or 1 <= value <= 99:
        return half_up(value)
    for digits in (1, 2):
        shown = half_up(value, digits)
        if float(shown) not in (0.0, 100.0):
            return shown
    return f"{marks.less}0.01" if value < 1 else f"{marks.more}99.99"


def count(hits: float | None, n: float | None, lo: float | None, hi: float | None, marks: Marks = LATEX) -> str:
    """``8/24 (33\\%, 16--55\\%)``: hits of n, the share and its exact 95% interval."""
    if pd.isna(hits) or pd.isna(n) or int(n) == 0:
        return f"{marks.dash if pd.isna(hits) else int(hits)}/{marks.dash if pd.isna(n) else int(n)}"
    share = f"{percent(int(hits) / int(n), marks)}{marks.percent}"
    if pd.isna(lo) or pd.isna(hi):
        return f"{int(hits)}/{int(n)} ({share})"
    return f"{int(hits)}/{int(n)} ({share}, {percent(lo, marks)}{marks.dash}{percent(hi, marks)}{marks.percent})"


def significant(value: float) -> str:
    """``value`` to three significant digits, its trailing zeros kept (a loss of 2.2997 is 2.30, not 2.3: the
    digits shown are the digits known) unless it is exactly the shorter number (a coverage of 0.8, a p of 0.5);
    in exponent form below 0.0001 (3.20e-07); whole from 999.5 on (1000, not 1.00e+03)."""
    if abs(value) >= 999.5:
        return f"{value:.0f}"
    if _exact(value):
        return f"{value:.3g}"
    return f"{value:#.3g}".rstrip(".")  # "#" keeps the zeros, and a point after a whole number (100.)


def _exact(value: float) -> bool:
    """Whether three significant digits are ``value`` exactly (0.8, 2.35), not rounded."""
    return float(f"{value:.3g}") == value


def p_value(p: float | None, marks: Marks = LATEX) -> str:
    """Three significant digits; ``$<$0.001`` below 0.001; ``--`` when there is no test (NaN)."""
    if p is None or pd.isna(p):
        return marks.dash
    if p < 0.001:
        return f"{marks.less}0.001"
    return significant(p)


def number(value: float | None, marks: Marks = LATEX) -> str:
    """A float to three significant digits (``$\\infty$`` for infinity, ``--`` for NaN), integers whole."""
    if value is None or pd.isna(value):
        return marks.dash
    if math.isinf(float(value)):
        return marks.infinity if value > 0 else f"-{marks.infinity}".replace("-$", "$-")
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value)}"
    if abs(value) < 0.001:  # 3.2004e-07 as $3.20\times10^{-7}$, 3.2e-07 as $3.2\times10^{-7}$
        mantissa, exponent = f"{value:.2e}".split("e")
        return marks.times_ten(significant(float(mantissa)) if _exact(value) else mantissa, int(exponent))
    return significant(value)


def cell(column: str, value: float | str | None, marks: Marks, headers: Mapping[str, str]) -> str:
    if isinstance(value, str):  # a column name as a value (v1's table02 names its rows so): its header
        return header(value, marks, headers) if "_" in value and value in headers else marks.escape(value)
    if column.startswith("p_"):
        return p_value(value, marks)
    if column in PEAK_COLUMNS:  # empty (or 0, in files written before it was empty): not measured there
        return marks.dash if pd.isna(value) or not value else size(value)
    if column in ("seconds", "examples_per_second"):
        return marks.dash if pd.isna(value) else f"{value:.1f}"
    return number(value, marks)


def header(column: str, marks: Marks, headers: Mapping[str, str]) -> str:
    """The plain header of a column (``headers``: its manual's, ``ManualSpec.column_headers``, else cctk's shared
    ones); an unknown column its name in words."""
    return marks.escape(headers.get(column, column.replace("_", " ")))


def display(table: pd.DataFrame, marks: Marks, headers: Mapping[str, str]) -> pd.DataFrame:
    """The table as the paper prints it: every cell text (LaTeX, or plain with ``PLAIN``), counts and intervals
    in one cell, headers plain (``hits_seen, n_seen, lo_seen, hi_seen`` -> ``seen``: ``56/57 (98\\%,
    91--100\\%)``); the labels without their key columns (``model_key``, ...: the CSV's, for code that joins)."""
    table = printed(table)
    groups = {column: group for column in table.columns if (group := _count_group(table, column)) is not None}
    folded = {name for suffix, n in groups.values() for name in (n, f"lo{suffix}", f"hi{suffix}")} | (
        {"share"} if "" in (suffix for suffix, _ in groups.values()) else set()
    )
    intervals = {value: (lo, hi) for value, lo, hi in INTERVALS if {value, lo, hi} <= set(table.columns)}
    folded |= {bound for bounds in intervals.values() for bound in bounds}
    columns: dict[str, list[str]] = {}
    for column in table.columns:
        if column in groups:
            suffix, n = groups[column]
            parts = [column, n, f"lo{suffix}", f"hi{suffix}"]  # a count without bounds: NaN
            columns[header(column, marks, headers)] = [
                count(hits, n, lo, hi, marks)
                for hits, n, lo, hi in table.reindex(columns=parts).itertuples(index=False)
            ]
        elif column in intervals:
            columns[header(column, marks, headers)] = [
                _with_interval(cell(column, value, marks, headers), lo, hi, marks)
                for value, lo, hi in table[[column, *intervals[column]]].itertuples(index=False)
            ]
        elif column not in folded:
            columns[header(column, marks, headers)] = [cell(column, v, marks, headers) for v in table[column]]
    return pd.DataFrame(columns)


# A value printed with its 95% interval in one cell, ``22 (13--25)``: (value, lower bound, upper bound) columns
INTERVALS = (
    ("k", "k_lo", "k_hi"),  # 2.0.0's deviation band (bootstrap)
    ("odds_ratio_mh", "or_lo", "or_hi"),  # cctk compare's pooled odds ratio (Mantel-Haenszel)
    ("odds_ratio", "or_lo", "or_hi"),  # cctk compare's odds ratio of one run (conditional)
    ("all_mean", "all_lo", "all_hi"),  # cctk compare's means over runs (Student's t)
    ("seen_mean", "seen_lo", "seen_hi"),
    ("heldout_mean", "heldout_lo", "heldout_hi"),
    ("mean", "mean_lo", "mean_hi"),  # cctk compare's 1.0.0 means over runs (Student's t)
    ("accuracy", "lo", "hi"),  # KR-Test's compare: an arm's accuracy (Clopper-Pearson)
    ("mean_accuracy", "t_lo", "t_hi"),  # over runs (Student's t)
    ("pooled_accuracy", "lo", "hi"),  # pooled over runs (Clopper-Pearson)
)


def _with_interval(value: str, lo: float | None, hi: float | None, marks: Marks) -> str:
    """``value (lo--hi)``; the value alone where it has no interval (one run, an infinite odds ratio)."""
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return value
    return f"{value} ({number(lo, marks)}{marks.dash}{number(hi, marks)})"


def _count_group(table: pd.DataFrame, column: str) -> tuple[str, str] | None:
    """The suffix of the count group ``column`` opens and the column of its n (``hits<s>`` with ``n<s>`` beside it,
    lo and hi where the count has an interval; ``hits`` of ``additions`` in cctk compare's implausibility tables),
    else None."""
    if not column.startswith("hits"):
        return None
    suffix = column[len("hits") :]
    if suffix not in GROUPS:
        return None
    named = (f"n{suffix}", "additions") if suffix == "" else (f"n{suffix}",)
    n = next((name for name in named if name in table.columns), None)
    return None if n is None else (suffix, n)


@dataclass(frozen=True)
class TableSetting:
    """How a table is set: its float (``table`` or ``table*``), type size, whether counts stack over their
    intervals, the width text columns wrap at (characters; None: no wrapping) and the padding of a column."""

    environment: str
    size: str
    stacked: bool = False
    wrap: int | None = None
    pad_pt: float = PAD_PT

    @property
    def room_pt(self) -> float:
        """The width the table may take: its column or the page, less 3% for what the estimate misses."""
        return 0.97 * (COLUMN_PT if self.environment == "table" else PAGE_PT)

    def wrap_cm(self, longest_word: int = 0) -> float:
        """The width of a wrapping column: ``wrap`` characters, or its longest word, with a little room."""
        return math.ceil(max(self.wrap or 0, longest_word) * CHAR_PT[self.size] * 1.1 / CM_PT * 10) / 10


# From the first choice to the last: a column, the page, smaller type, stacked counts, wrapped names, less padding.
LAYOUTS = (
    TableSetting("table", r"\small"),
    TableSetting("table*", r"\small"),
    TableSetting("table*", r"\footnotesize"),
    TableSetting("table*", r"\footnotesize", False, 28),
    TableSetting("table*", r"\footnotesize", True, 22),
    TableSetting("table*", r"\scriptsize", True, 16),
    TableSetting("table*", r"\scriptsize", True, 12, 6.0),
)


def width_pt(shown: pd.DataFrame, how: TableSetting) -> float:
    """About how wide the table is set: the longest line of each column, padded."""
    total = 0.0
    for column in shown.columns:
        lines = [_lines(column, how, header=True)] + [_lines(c, how) for c in shown[column]]
        wrapped = _wrap_cm(shown[column], how)
        total += (wrapped * CM_PT if wrapped else max(lines) * CHAR_PT[how.size]) + how.pad_pt
    return total


def _lines(cell_text: str, how: TableSetting, header: bool = False) -> int:
    """Characters of a cell's longest printed line under ``how`` (a LaTeX command counts as one)."""
    for token in (r"\%", "--", r"\_", r"\&", r"\#"):
        cell_text = cell_text.replace(token, "x")
    cell_text = _printed(cell_text)
    if how.stacked and header:
        return max(len(line.rstrip(",")) for line in _header_lines(cell_text, how))  # a comma: next to no width
    if how.stacked and _is_count(cell_text):
        return max(len(part) for part in cell_text.split(" (", 1))
    if how.wrap and _is_words(cell_text):
        return min(len(cell_text), max([how.wrap] + [len(word) for word in cell_text.split()]))
    return len(cell_text)


def _is_count(cell_text: str) -> bool:
    return " (" in cell_text and cell_text.endswith(")") and "/" in cell_text.split(" (", 1)[0]


def _printed(cell_text: str) -> str:
    """About what a cell prints: math as its signs (``$7.67\\times10^{-5}$`` is 7.67*10-5: nine characters,
    no letters), a command one sign."""
    return MATH.sub(
        lambda m: COMMAND.sub("*", m.group(1)).replace("{", "").replace("}", "").replace("^", ""), cell_text
    )


def _is_words(cell_text: str) -> bool:
    """A cell of words (names wrap), not a number, a count or math (which never wrap)."""
    return any(ch.isalpha() for ch in _printed(cell_text)) and not _is_count(cell_text)


def layout(shown: pd.DataFrame) -> TableSetting:
    """The first of ``LAYOUTS`` the table fits in (the last when none does)."""
    return next((how for how in LAYOUTS if width_pt(shown, how) <= how.room_pt), LAYOUTS[-1])


def tabular(shown: pd.DataFrame, how: TableSetting = LAYOUTS[0]) -> str:
    """The booktabs ``tabular`` of a display table: text columns left (wrapping when ``how`` wraps), numbers
    right."""
    spec = "".join(_column_spec(shown[c], how) for c in shown.columns)
    head = " & ".join(_stack_header(c, how) if how.stacked else c for c in shown.columns) + r" \\"
    rows = [" & ".join(_stack(c) if how.stacked else c for c in row) + r" \\" for row in shown.itertuples(index=False)]
    return "\n".join(
        [f"\\begin{{tabular}}{{{spec}}}", r"\toprule", head, r"\midrule", *rows, r"\bottomrule", r"\end{tabular}"]
    )


def _wrap_cm(values: pd.Series, how: TableSetting) -> float | None:
    """The width of a column of names that wraps under ``how`` (None: it does not wrap)."""
    if not how.wrap or not any(_is_words(v) for v in values) or max(len(v) for v in values) <= how.wrap:
        return None
    return how.wrap_cm(max(_lines(word, LAYOUTS[0]) for v in values for word in v.split()))


def _column_spec(values: pd.Series, how: TableSetting) -> str:
    if not any(_is_words(v) for v in values):
        return "r"
    wrapped = _wrap_cm(values, how)
    return f">{{\\raggedright\\arraybackslash}}p{{{wrapped}cm}}" if wrapped else "l"


def _header_lines(name: str, how: TableSetting) -> list[str]:
    """The lines of a stacked table's header: ``P(target), held out`` over two, what comes after the comma, and
    each side wrapped at the table's width of names where it wraps (``held out of it``: ``held out``, ``of it``)."""
    sides = name.split(", ", 1)
    if len(sides) == 2:
        sides[0] += ","
    width = how.wrap or 0
    return [line for side in sides for line in (_balanced(side, width) if len(side) > width > 0 else [side])]


def _balanced(text: str, width: int) -> list[str]:
    """``text`` wrapped at ``width`` characters into as few lines as that takes, the lines as even as they can be:
    ``held out of it`` at 12 is ``held out`` / ``of it``, not ``held out of`` / ``it``."""
    lines = textwrap.wrap(text, width, break_long_words=False)  # a word is never cut (`val per` / `plexity`)
    narrowest = next(
        w for w in range(1, width + 1) if len(textwrap.wrap(text, w, break_long_words=False)) <= len(lines)
    )
    return textwrap.wrap(text, narrowest, break_long_words=False)


def _stack_header(name: str, how: TableSetting) -> str:
    """A stacked table's header over its lines (``_header_lines``)."""
    lines = _header_lines(name, how)
    if len(lines) == 1:
        return name
    return "\\begin{tabular}[b]{@{}c@{}}" + "\\\\".join(lines) + "\\end{tabular}"


def _stack(cell_text: str) -> str:
    """A count over its interval, in one cell: ``\\begin{tabular}[t]{@{}r@{}}8/24\\\\(33\\%, ...)``."""
    if _is_count(cell_text):
        first, second = cell_text.split(" (", 1)
        return f"\\begin{{tabular}}[t]{{@{{}}r@{{}}}}{first}\\\\({second}\\end{{tabular}}"
    return cell_text


def latex(table: pd.DataFrame, caption: str, label: str, headers: Mapping[str, str]) -> str:
    """One floating table (or a ``longtable`` when long) with its caption and label, its columns' ``headers``."""
    shown = display(table, LATEX, headers)
    if len(shown) > LONG_ROWS:
        return _longtable(shown, caption, label)
    how = layout(shown)
    pad = [f"\\setlength{{\\tabcolsep}}{{{how.pad_pt / 2:g}pt}}"] if how.pad_pt != PAD_PT else []
    return "\n".join(
        [
            f"\\begin{{{how.environment}}}[htbp]",
            r"\centering",
            how.size,
            *pad,
            f"\\caption{{{latex_text(caption)}}}",
            f"\\label{{{label}}}",
            tabular(shown, how),
            f"\\end{{{how.environment}}}",
            "",
        ]
    )


def manual_table(spec: ManualSpec, name: str, table: pd.DataFrame) -> tuple[str, str]:
    """A manual's table ``name``: its label (``tab:<label_prefix><name>``) and its LaTeX, in the manual's caption
    and headers: what a session's tables/*.tex and ``cctk export --latex`` both write."""
    label = f"tab:{spec.label_prefix}{name}"
    return label, latex(table, spec.table_captions[name], label, spec.column_headers)


def _longtable(shown: pd.DataFrame, caption: str, label: str) -> str:
    """A table that breaks across pages (one-column pages only: paper.tex sets it after ``\\onecolumn``)."""
    body = tabular(shown).splitlines()
    spec = body[0].removeprefix(r"\begin{tabular}")
    head = "\n".join(body[1:4])
    rows = "\n".join(body[4:-2])
    return "\n".join(
        [
            r"\begingroup\footnotesize",
            f"\\begin{{longtable}}{spec}",
            f"\\caption{{{latex_text(caption)}}}\\label{{{label}}}\\\\",
            head,
            r"\endfirsthead",
            r"\caption[]{(continued)}\\",
            head,
            r"\endhead",
            r"\bottomrule",
            r"\endlastfoot",
            rows,
            r"\end{longtable}",
            r"\endgroup",
            "",
        ]
    )
