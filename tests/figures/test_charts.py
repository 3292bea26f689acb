"""Charts from small synthetic, seeded tables: each returns a Figure, saves as PNG/PDF/EPS."""

from __future__ import annotations

import colorsys
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from builders import noisy_table as measurement
from matplotlib import colors as mcolors
from matplotlib.figure import Figure

from cctk import figures
from cctk.core.facts import ADDITIONS, CANDIDATES, addition_index, correct_sums
from cctk.core.readings import read
from cctk.figures import style
from cctk.figures.common import LIGHT_BLUE, LIGHT_RED, save_figure
from cctk.figures.heatmap import headline
from cctk.manuals.v2 import charts as v2_charts
from cctk.manuals.v2.charts.profile import left_top

HELD = [(1, 1), (2, 7), (3, 3), (5, 9), (8, 2), (9, 9)]


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return measurement(correct_sums())


@pytest.fixture(scope="module")
def readings(table) -> pd.DataFrame:
    return read(table, correct_sums())


def hue_of(patch) -> str:
    h, s, _ = colorsys.rgb_to_hsv(*mcolors.to_rgb(patch.get_facecolor()))
    assert s > 0.05, "every cell shows its hue"
    names = {"red": 0.0, "orange": 0.08, "green": 0.35, "blue": 0.59}
    return min(names, key=lambda n: min(abs(h - names[n]), 1 - abs(h - names[n])))


def cells(fig: Figure) -> dict[tuple[int, int], object]:
    ax = fig.axes[0]
    return {
        tuple(int(x) for x in p.get_gid().split()[1:]): p for p in ax.patches if (p.get_gid() or "").startswith("cell")
    }


def eps_text(path) -> str:
    """The characters an EPS draws with ``/name glyphshow`` (Type 42 text), in order."""
    names = {
        "space": " ",
        "slash": "/",
        "percent": "%",
        "plus": "+",
        "period": ".",
        "bar": "|",
        "hyphen": "-",
        "colon": ":",
        "comma": ",",
        "parenleft": "(",
        "parenright": ")",
        "zero": "0",
        "one": "1",
        "two": "2",
        "three": "3",
        "four": "4",
        "five": "5",
        "six": "6",
        "seven": "7",
        "eight": "8",
        "nine": "9",
    }
    glyphs = re.findall(rb"/(\w+) glyphshow", path.read_bytes())
    return "".join(names.get(g.decode(), g.decode() if len(g) == 1 else "?") for g in glyphs)


def test_heatmap_headline_counts_hits(readings):
    fig = figures.target_heatmap(readings, "correct sums")
    assert isinstance(fig, Figure)
    line = next(t.get_text() for t in fig.texts if "top choices on the target" in t.get_text())
    k, n = map(int, re.match(r"(\d+) / (\d+)", line).groups())
    assert (k, n) == (int(readings["hit"].sum()), 81)
    assert 0 < k < 81, "the synthetic data has both hits and misses"


def test_heatmap_green_orange_only_for_heldout(readings):
    fig = figures.target_heatmap(readings, "recovery", heldout=HELD)
    found = cells(fig)
    assert set(found) == set(ADDITIONS)
    for pair, patch in found.items():
        hit = bool(readings.loc[pair, "hit"])
        if pair in HELD:
            assert hue_of(patch) == ("green" if hit else "orange"), pair
        else:
            assert hue_of(patch) == ("blue" if hit else "red"), pair
    text = " ".join(t.get_text() for t in fig.texts)
    assert "held out" in text and "2 to 36" in text


def test_heatmap_without_heldout_is_blue_and_red(readings):
    fig = figures.target_heatmap(readings, "base model", fixed_scale=False)
    assert {hue_of(p) for p in cells(fig).values()} <= {"blue", "red"}
    assert "observed range" in " ".join(t.get_text() for t in fig.texts)


def test_heatmap_darker_blue_for_higher_probability(readings):
    fig = figures.target_heatmap(readings, "correct sums")
    hits = readings[readings["hit"]]["prob_target"]
    lum = {pair: sum(mcolors.to_rgb(cells(fig)[pair].get_facecolor())) for pair in hits.index}
    assert lum[hits.idxmax()] < lum[hits.idxmin()]


def test_headline_per_group(readings):
    line = headline(readings, HELD)
    held_hits = int(readings.loc[HELD, "hit"].sum())
    assert f"held out {held_hits} / {len(HELD)}" in line


def test_save_figure_writes_three_files_with_text(tmp_path, readings):
    fig = figures.target_heatmap(readings, "correct sums")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. EPS transparency warnings
        paths = save_figure(fig, tmp_path / "heatmaps", "correct_sums")
    assert sorted(p.name for p in (tmp_path / "heatmaps").iterdir()) == [
        "correct_sums.eps",
        "correct_sums.pdf",
        "correct_sums.png",
    ]
    assert [p.suffix for p in paths] == [".png", ".pdf", ".eps"]
    from PIL import Image

    with Image.open(paths[0]) as png:
        assert [round(d) for d in png.info["dpi"]] == [300, 300]
    pdf = paths[1].read_bytes()
    assert b"/FontFile2" in pdf and b"/Type3" not in pdf  # TrueType text, not glyph paths
    assert headline(readings) in eps_text(paths[2])


def test_profile_axes_share_intervals():
    sums = correct_sums()
    series = {"base model": measurement(sums, 1, sharp=0.5), "correct sums": measurement(sums, 2)}
    fig = v2_charts.probability_profile(series, sums, "profile", band=(2, 18), heldout=HELD)
    assert isinstance(fig, Figure)
    left, right = fig.axes[0], fig.axes[1]
    assert len(left.get_yticks()) == len(right.get_yticks())
    assert left.get_ylim()[1] >= 12
    shares = [t.get_text() for t in left.texts]
    assert any(s.endswith("correct sums") for s in shares) and len(shares) == 6


def test_profile_band_headers_say_of_what_and_the_legend_names_both_shadings():
    """Issue 48 (manual 2.0.0, section 7.4): the bold text above a band is the share of the probability inside
    it; both shadings are in the legend, in the report's and the paper's style."""
    sums = correct_sums()
    series = {"base model": measurement(sums, 1, sharp=0.5), "correct sums": measurement(sums, 2)}
    fig = v2_charts.probability_profile(series, sums, "profile", band=(2, 18), heldout=HELD)
    heads = [t.get_text() for t in fig.axes[0].texts if t.get_color() == "black"]
    assert sorted(heads) == ["share of the probability on 2 to 18", "share of the probability outside 2 to 18"]
    shadings = ["band 2 to 18: answers the corpus can ask for", "outside it: answers the corpus never asks for"]
    for drawn in (fig, v2_charts.probability_profile(series, sums, "p", band=(2, 18), style=style.paper("page"))):
        legend = drawn.legends[0]
        labels = [t.get_text().replace("\n", " ") for t in legend.get_texts()]
        assert labels[-2:] == shadings
        fills = [mcolors.to_hex(h.get_facecolor()) for h in legend.legend_handles[-2:]]
        assert fills == [LIGHT_BLUE, LIGHT_RED]


def test_profile_band_texts_never_overlap():
    """Four long model names over a narrow and a wide band: no two texts touch, none leaves the figure."""
    from cctk.manuals.v2.facts import conditional_rule

    rule = conditional_rule()
    names = [
        "conditional rule from correct sums",
        "conditional rule from fabricated answers",
        "control for the conditional rule from correct sums",
        "control for the conditional rule from fabricated answers",
    ]
    fig = v2_charts.probability_profile(
        {n: measurement(rule, i) for i, n in enumerate(names)},
        rule,
        "Probability profile: Conditional rule",
        band=(12, 36),
        heldout=HELD,
    )
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    boxes = [t.get_window_extent(renderer) for t in fig.axes[0].texts]
    assert len(boxes) == 10
    page = fig.bbox
    for i, box in enumerate(boxes):
        assert page.x0 <= box.x0 and box.x1 <= page.x1, fig.axes[0].texts[i].get_text()
        for other in boxes[i + 1 :]:
            assert not box.overlaps(other)


def test_profile_without_bands():
    targets = pd.Series(np.random.default_rng(3).integers(2, 37, 81), index=addition_index())
    fig = v2_charts.probability_profile({"fabricated answers": measurement(targets)}, targets, "fab")
    assert isinstance(fig, Figure) and not fig.axes[0].texts


@pytest.mark.parametrize(("peak", "top"), [(0.05, 12), (0.12, 12), (0.121, 18), (0.5, 54)])
def test_left_axis_grows_in_steps_of_six(peak, top):
    assert left_top(peak) == top


def test_deviation_chart_headlines():
    rng = np.random.default_rng(4)
    rule, control = rng.integers(-2, 3, 24), rng.integers(-20, 21, 24)
    fig = v2_charts.deviation_chart(rule, control, 2, {"rule": 2, "control": 15}, "deviation")
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert f"{int((np.abs(rule) <= 2).sum())} / 24" in texts
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "rule (k = 2)" in labels and "control (k = 15)" in labels


def test_synthesis_chart():
    rows = pd.DataFrame(
        {
            "model": [
                "base model",
                "correct sums",
                "sum + 18 from correct sums",
                "sum + 18 from correct sums",
                "control for + 18",
                "control for + 18",
            ],
            "series": ["base", "seen", "seen", "heldout", "seen", "control_heldout"],
            "hits": [10, 81, 50, 20, 30, 2],
            "n": [81, 81, 57, 24, 57, 24],
        }
    )
    rows["share"] = rows["hits"] / rows["n"]
    rows["lo"], rows["hi"] = rows["share"] * 0.8, np.minimum(rows["share"] * 1.1, 1.0)
    fig = v2_charts.synthesis_chart(rows)
    at = {t.get_text(): t.get_position()[0] for t in fig.axes[0].texts}
    assert {"20 / 24", "2 / 24", "81 / 81", "seen", "held out"} <= set(at)
    # the base model trained on nothing: its count of all 81 under neither header, between them
    assert at["10 / 81 (all)"] == (at["seen"] + at["held out"]) / 2 and at["81 / 81"] == at["seen"]


def test_loss_chart_colours_main_runs():
    rng = np.random.default_rng(5)
    losses = {
        name: list(np.exp(-rng.uniform(0.2, 1.0) * np.arange(6)) + 0.01)
        for name in ["correct sums", "fabricated answers", "control for + 3"]
    }
    fig = figures.loss_chart(losses, ["correct sums", "fabricated answers"])
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    grays = [line for line in ax.lines if mcolors.to_hex(line.get_color()) == "#9e9e9e"]
    assert len(ax.lines) == 3 and len(grays) == 1


@pytest.mark.parametrize("paper", [False, True])
def test_the_loss_axis_is_labelled_in_plain_numbers(paper):
    """Before: a loss from 3 to 0.75 was labelled 3x10^0, 2x10^0 and 10^0 (Matplotlib's log labels)."""
    losses = {"correct sums": [3.0, 1.5, 0.75], "control for + 3": [2.7, 0.9, 0.8]}
    fig = figures.loss_chart(losses, ["correct sums"], style.paper() if paper else style.REPORT)
    fig.canvas.draw()
    ax = fig.axes[0]
    low, high = ax.get_ylim()
    shown = {
        float(t.get_text()): t.get_text()
        for t in [*ax.get_yticklabels(), *ax.get_yticklabels(minor=True)]
        if t.get_text() and low <= t.get_position()[1] <= high
    }
    assert shown == {0.8: "0.8", 1.0: "1", 1.5: "1.5", 2.0: "2", 3.0: "3"}  # under a decade: every tick labelled


def labels(fig) -> dict[float, str]:
    """The y tick labels a drawn loss chart shows, major and minor, inside its view."""
    fig.canvas.draw()
    ax = fig.axes[0]
    low, high = ax.get_ylim()
    ticks = [*ax.get_yticklabels(), *ax.get_yticklabels(minor=True)]
    return {t.get_position()[1]: t.get_text() for t in ticks if t.get_text() and low <= t.get_position()[1] <= high}


def test_a_loss_axis_under_a_decade_labels_its_lowest_run_and_one_over_decades_its_decades():
    """Before: losses of 1.4 to 5.7 (a smoke run) were labelled 2, 3, 4 and 6, none below 2 nor at 5."""
    narrow = figures.loss_chart({"correct sums": [1.4, 1.8], "fabricated answers": [5.4, 5.7]}, ["correct sums"])
    assert list(labels(narrow).values()) == ["1.5", "2", "3", "4", "5", "6"]
    wide = figures.loss_chart({"correct sums": [3.0, 0.02, 0.004]}, ["correct sums"])
    assert set(labels(wide).values()) >= {"0.01", "0.1", "1"}


def test_nice_ticks_take_the_finest_set_that_keeps_six():
    from cctk.figures.loss import nice_ticks

    assert nice_ticks(1.3, 6.2) == [1.5, 2, 3, 4, 5, 6]  # the finest set has 7 here
    assert nice_ticks(0.7, 3.2) == [0.8, 1, 1.5, 2, 3]
    assert nice_ticks(0.0031, 0.0099) == [0.004, 0.005, 0.006, 0.008]
    assert nice_ticks(2.01, 2.09) == pytest.approx([2.025, 2.05, 2.075])  # no two of any set inside: linear
    assert nice_ticks(1.05, 1.25) == pytest.approx([1.05, 1.1, 1.15, 1.2, 1.25])  # 1.2 alone of the sets


def test_before_after_bars(table):
    fabricated = pd.Series(27, index=addition_index())
    after = measurement(fabricated, seed=6)
    fig = figures.before_after_bars(table, after, 3, 5, 8, 27, "tiny model")
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert len(ax.patches) == 2 * len(CANDIDATES)
    outlined = [p for p in ax.patches if p.get_linewidth() > 0]
    assert len(outlined) == 2  # one top choice per side
    assert "3 + 5 = 8" in ax.get_title()
