"""Tables as a paper prints them (cctk.outputs.latex): plain headers, counts with their intervals in one cell,
p-values to three digits, infinity as $\\infty$, a layout that fits without \\resizebox."""

from __future__ import annotations

import math
import re

import pandas as pd
import pytest
from builders import synthetic_results

from cctk.core.labels import TABLE_HEADERS
from cctk.core.stats import clopper_pearson
from cctk.manuals.v2.labels import PAPER_TABLE_CAPTIONS
from cctk.manuals.v2.manual import V2
from cctk.manuals.v2.parts import compute_tables
from cctk.outputs import latex
from cctk.outputs.latex import latex_text

HEADERS = V2.spec.column_headers  # cctk's shared headers and manual 2.0.0's own


@pytest.fixture(scope="module")
def tables() -> dict[str, pd.DataFrame]:
    return compute_tables(synthetic_results())


def test_a_count_with_its_exact_interval():
    lo, hi = clopper_pearson(8, 24)
    assert latex.count(8, 24, lo, hi) == r"8/24 (33\%, 16--55\%)"
    lo, hi = clopper_pearson(1, 24)  # 0.1% to 21%: a bound near 0 keeps a decimal
    assert latex.count(1, 24, lo, hi) == r"1/24 (4\%, 0.1--21\%)"
    lo, hi = clopper_pearson(56, 57)
    assert latex.count(56, 57, lo, hi) == r"56/57 (98\%, 91--99.96\%)"
    assert latex.count(0, 0, math.nan, math.nan) == "0/0"


@pytest.mark.parametrize(
    ("p", "shown"),
    [
        (4.4e-05, "$<$0.001"),
        (0.000999, "$<$0.001"),
        (0.001, "0.001"),  # exactly: no zeros added
        (0.0010004, "0.00100"),
        (0.011304, "0.0113"),
        (0.0452, "0.0452"),
        (0.5, "0.5"),
        (1.0, "1"),
        (math.nan, "--"),
    ],
)
def test_p_values_to_three_significant_digits(p, shown):
    assert latex.p_value(p) == shown


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (math.inf, r"$\infty$"),
        (math.nan, "--"),
        (32.2, "32.2"),
        (0.0926, "0.0926"),
        (24.0, "24"),
        (1540.4, "1540"),
        (3.2e-07, r"$3.2\times10^{-7}$"),
        (3.2004e-07, r"$3.20\times10^{-7}$"),
        (2.2997, "2.30"),  # the digits shown are the digits known: 2.3 would say two
        (2.3, "2.3"),  # exactly 2.3
        (999.7, "1000"),  # not 1.00e+03
        (-4.56e-05, r"$-4.56\times10^{-5}$"),
    ],
)
def test_numbers(value, shown):
    assert latex.number(value) == shown


def test_report_html_and_the_run_report_show_numbers_as_a_paper_does():
    """Before: report.html and the run report showed a loss of 2.2997 as 2.3 beside 0.926 (``.3g`` drops the
    zeros) and 999.7 as 1e+03, and a tiny number as 3.20e-07 where the data tables raise the power of ten."""
    from cctk.outputs.tables import html, number

    assert [number(v) for v in (2.2997, 0.926, 999.7, 1540.4, 3.2004e-07, 12.0, math.nan, 0.8)] == [
        "2.30",
        "0.926",
        "1000",
        "1540",
        "3.20\u00d710\u207b\u2077",
        "12",
        "--",
        "0.8",  # exactly 0.8 (a coverage the table sets)
    ]
    shown = html(pd.DataFrame({"model": ["a"], "loss": [1.19996]}), "t")
    assert ">1.20</td>" in shown and ">1.2</td>" not in shown


def test_a_long_name_wraps_into_a_few_lines_not_a_word_a_line():
    """Before: compare.html's findings squeezed a contrast of 100 characters into a column a word wide (16 lines a
    row) beside 12 columns of numbers; a column of long names is at least 14em wide now (the table scrolls)."""
    from cctk.outputs.tables import html

    long = "conditional rule from fabricated answers vs control for the conditional rule from fabricated answers"
    shown = html(pd.DataFrame({"base_model": ["tiny"], "contrast": [long], "runs": [3]}), "t")
    rules = dict(re.findall(r"#T_t (td\.col\d) \{([^}]*)\}", shown))
    assert "min-width: 14em" in rules["td.col1"] and "nowrap" not in rules["td.col1"]
    assert "white-space: nowrap" in rules["td.col0"] and "min-width" not in rules["td.col0"]  # "tiny" stays whole
    assert "white-space: nowrap" in rules["td.col2"]


def test_a_value_and_its_interval_print_in_one_cell_and_a_count_without_one_keeps_its_share():
    """cctk compare's tables: an odds ratio with its bounds (none where it is infinite), a mean over runs with its
    t interval, a count of hits / n that has no interval."""
    table = pd.DataFrame(
        {
            "contrast": ["a", "b"],
            "hits_rule": [6, 2],
            "n_rule": [48, 46],
            "odds_ratio_mh": [1.5714, math.inf],
            "or_lo": [0.413, math.nan],
            "or_hi": [5.97, math.nan],
            "all_mean": [0.5, 0.25],
            "all_lo": [0.25, math.nan],
            "all_hi": [0.75, math.nan],
        }
    )
    shown = latex.display(table, latex.PLAIN, {"hits_rule": "Rule hits", "odds_ratio_mh": "Odds ratio (MH)"})
    assert shown.columns.tolist() == ["contrast", "Rule hits", "Odds ratio (MH)", "all mean"]
    assert shown["Rule hits"].tolist() == ["6/48 (13%)", "2/46 (4%)"]  # 12.5% rounded half up
    assert shown["Odds ratio (MH)"].tolist() == ["1.57 (0.413\u20135.97)", "\u221e"]
    assert shown["all mean"].tolist() == ["0.5 (0.25\u20130.75)", "0.25"]


def test_a_web_page_raises_the_power_of_ten_and_folds_the_implausibility_counts():
    """Before: cctk compare's implausibility tables showed P(fabricated) as ``6.51\u00d710^-5`` and their counts in
    five columns (``Hits 1``, ``Additions 9``, ``Share 0.111``, ``lo 0.00281``, ``hi 0.482``): the hits of their
    ``additions`` now fold as every count of a run's tables does, the power of ten is raised."""
    assert [latex.number(v, latex.PLAIN) for v in (6.5104e-05, -3.2e-07, 4.89e-12)] == [
        "6.51\u00d710\u207b\u2075",
        "-3.2\u00d710\u207b\u2077",
        "4.89\u00d710\u207b\u00b9\u00b2",
    ]
    table = pd.DataFrame(
        {
            "base_model": ["tiny", "tiny"],
            "distance": ["6-9", "10-17"],
            "runs": [1, 1],
            "additions": [9, 30],
            "hits": [1, 0],
            "share": [1 / 9, 0.0],
            "lo": [0.0028091, 0.0],
            "hi": [0.482503, 0.115703],
            "mean_prob": [0.0371, 6.5104e-05],
        }
    )
    shown = latex.display(table, latex.PLAIN, {"hits": "Hits", "mean_prob": "P(fabricated)"})
    assert shown.columns.tolist() == ["base model", "distance", "runs", "Hits", "P(fabricated)"]
    assert shown["Hits"].tolist() == ["1/9 (11%, 0.3\u201348%)", "0/30 (0%, 0\u201312%)"]
    assert shown["P(fabricated)"].tolist() == ["0.0371", "6.51\u00d710\u207b\u2075"]
    assert latex.display(table, latex.LATEX, {})["hits"].tolist()[0] == r"1/9 (11\%, 0.3--48\%)"


def test_text_escapes_what_latex_reads_as_commands():
    assert latex_text("m_random 50% & #1 {x} a >= b \u00b1 \u2192 caf\u00e9") == (
        r"m\_random 50\% \& \#1 \{x\} a $>$= b $\pm$ $\rightarrow$ cafe"
    )


def test_table10_has_plain_headers_and_one_cell_per_count(tables):
    shown = latex.display(tables["table10"], latex.LATEX, HEADERS)
    assert list(shown.columns) == ["Rule", "Control", "Rule hits", "Control hits", "Odds ratio", "p", "p (Holm)"]
    row = tables["table10"].iloc[0]
    assert shown.iloc[0]["Rule hits"] == latex.count(row.hits_rule, row.n_rule, row.lo_rule, row.hi_rule)
    assert shown.iloc[0]["p"] == "$<$0.001" and row.p_value < 0.001
    infinite = tables["table10"]["odds_ratio"] == math.inf
    assert infinite.any() and (shown.loc[infinite, "Odds ratio"] == r"$\infty$").all()


def test_no_raw_column_name_reaches_a_header(tables):
    for name, table in tables.items():
        header = " ".join(latex.display(table, latex.LATEX, HEADERS).columns)
        assert "\\_" not in header and "_" not in header, name


def test_table09_folds_share_into_the_count_and_table08_k_into_its_interval(tables):
    assert list(latex.display(tables["table09"], latex.LATEX, HEADERS).columns) == ["Model", "Target", "Group", "Hits"]
    k = latex.display(tables["table08"], latex.LATEX, HEADERS)[r"k (95\% CI)"]
    row = tables["table08"].iloc[0]
    assert k.iloc[0] == f"{int(row.k)} ({int(row.k_lo)}--{int(row.k_hi)})"


def test_every_table_fits_without_resizebox(tables):
    for name, table in tables.items():
        tex = latex.latex(table, PAPER_TABLE_CAPTIONS[name], f"tab:{name}", HEADERS)
        assert "resizebox" not in tex
        assert tex.count("\\caption{") == 1 and f"\\label{{tab:{name}}}" in tex and "\\toprule" in tex
        how = latex.layout(latex.display(table, latex.LATEX, HEADERS))
        assert latex.width_pt(latex.display(table, latex.LATEX, HEADERS), how) <= how.room_pt, name
        assert tex.startswith(f"\\begin{{{how.environment}}}")
        assert tex.count("{") - tex.count("\\{") == tex.count("}") - tex.count("\\}"), name


def test_a_narrow_table_sits_in_a_column_and_a_wide_one_spans_the_page(tables):
    assert latex.layout(latex.display(tables["table01"].iloc[:, :3], latex.LATEX, HEADERS)).environment == "table"
    wide = latex.layout(latex.display(tables["table04"], latex.LATEX, HEADERS))
    assert wide.environment == "table*" and wide.stacked


def test_a_long_table_breaks_across_pages():
    table = pd.DataFrame({"a": range(81), "share": [i / 81 for i in range(81)]})
    tex = latex.latex(table, "81 rows", "tab:long", HEADERS)
    assert tex.count("\\begin{longtable}") == 1 and "\\endhead" in tex and "(continued)" in tex
    assert len(re.findall(r"\\\\$", tex, flags=re.M)) >= 81


def test_a_v1_table_names_its_rows_in_words():
    """Protocol v1's table02 names its rows by the columns of table01: they print as those columns' headers."""
    from builders import v1_results

    from cctk.manuals.v1.experiment import compute_tables as v1_tables
    from cctk.manuals.v1.manual import V1

    shown = latex.display(v1_tables(v1_results())["table02"], latex.LATEX, V1.spec.column_headers)
    plain = latex.display(
        v1_tables(v1_results())["table02"], latex.LATEX, TABLE_HEADERS
    )  # cctk's headers alone: v1's rows in raw words
    assert plain["number"].iloc[0] == r"pre\_ft\_true\_prob"
    assert list(shown["Probability"]) == [
        "P(true sum), before",
        "P(fabricated), after",
        "P(true sum), after",
        "P(fabricated), before",
    ]
    assert list(shown.columns)[-1] == "Hits" and not {"n", "lo", "hi"} & set(shown.columns)  # in the count


def test_math_cells_are_numbers_that_never_wrap():
    """A probability printed as ``$7.67\\times10^{-5}$`` is a number: right-aligned, never a wrapping column
    (it was read as words for the letters of ``\\times``, and three such columns of 2.8 cm set a real run's
    table02 61 pt wider than the page)."""
    small = r"$7.67\times10^{-5}$"
    assert latex._printed(small) == "7.67*10-5" and not latex._is_words(small)
    assert latex._is_words("correct sum") and not latex._is_words("57/57 (100\\%, 94--100\\%)")
    shown = pd.DataFrame({"Model": ["fabricated answers", "recovery"], "P(target)": [small, "0.999"]})
    for how in latex.LAYOUTS:
        assert latex._column_spec(shown["P(target)"], how) == "r"
    assert latex._lines(small, latex.LAYOUTS[0]) == len("7.67*10-5")


def test_a_stacked_header_wraps_each_side_of_its_comma_into_even_lines():
    """The widest layout wraps names at 12 characters, headers too: ``held out of it`` over ``held out`` and
    ``of it`` (not ``held out of`` and ``it``), the comma kept on its first line; a narrower layout keeps them."""
    last = latex.LAYOUTS[-1]
    assert latex._stack_header("P(target), held out of it", last) == (
        r"\begin{tabular}[b]{@{}c@{}}P(target),\\held out\\of it\end{tabular}"
    )
    assert latex._stack_header("Recovery corpus", last) == r"\begin{tabular}[b]{@{}c@{}}Recovery\\corpus\end{tabular}"
    assert latex._stack_header("Left out", last) == "Left out"
    assert latex._stack_header("P(target), held out of it", latex.LAYOUTS[4]) == (
        r"\begin{tabular}[b]{@{}c@{}}P(target),\\held out of it\end{tabular}"
    )
    assert latex._lines("P(target), held out of it", last, header=True) == len("P(target)")
    # a word longer than the width is never cut: KR-Test's table printed `val per` over `plexity`
    assert latex._stack_header("val perplexity", last) == r"\begin{tabular}[b]{@{}c@{}}val\\perplexity\end{tabular}"
    assert latex._stack_header("Validation perplexity", last) == (
        r"\begin{tabular}[b]{@{}c@{}}Validation\\perplexity\end{tabular}"
    )


def test_the_recovery_table_calls_nothing_of_the_fabricated_answers_model_held_out(tables):
    """The fabricated-answers model trained on all 81 additions: table02's columns are the recovery run's
    groups, headed as such (``held out of it``), never a plain ``held out``."""
    shown = latex.display(tables["table02"], latex.PLAIN, V2.spec.column_headers)
    assert "fabricated answers" in shown.iloc[:, 0].tolist()
    assert not [c for c in shown.columns if c.endswith("held out")], list(shown.columns)
    assert "P(target), held out of it" in shown.columns and "Surprise, held out of it" in shown.columns


@pytest.mark.parametrize(
    ("share", "shown"),
    [(3 / 24, "13"), (7 / 40, "18"), (1 / 8, "13"), (5 / 8, "63"), (1 / 3, "33"), (1 / 200, "0.5"), (0.9995, "99.95")],
)
def test_a_percent_rounds_a_half_up_as_a_reader_does(share, shown):
    """Python's format rounds a half to even: 3/24 (12.5%) printed 12 where a reader rounds to 13; 100 * 7/40 is
    17.499999999999996 in floating point, the 17.5 it stands for (a statistics audit)."""
    assert latex.percent(share) == shown


@pytest.mark.parametrize("column", ["peak_gpu_memory_bytes", "peak_cpu_memory_bytes"])
def test_a_peak_memory_not_measured_prints_a_dash_and_a_measured_one_its_size(column):
    """table11's peaks: empty where not measured (pd.NA today, 0 in tables written before 2026-12-07)."""
    assert latex.cell(column, 3 * 2**30, latex.PLAIN, HEADERS) == "3.0 GiB"
    assert latex.cell(column, 5 * 2**20, latex.LATEX, HEADERS) == "5.0 MiB"
    for empty in (pd.NA, 0, math.nan):
        assert latex.cell(column, empty, latex.PLAIN, HEADERS) == "\u2013"
        assert latex.cell(column, empty, latex.LATEX, HEADERS) == "--"
