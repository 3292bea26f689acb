"""KR-Test files: items and summary of an evaluation, the learning curves figure, the table of arms.

DataFrames and records in, files out: no torch and no MLflow here.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ...core.labels import TABLE_HEADERS
from ...figures.common import BASE, HELD_HIT, LINES, SEEN_HIT, new_figure, paper_style, save_figure, shade
from ...figures.loss import log_y
from ...outputs.tables import XLSX_EPOCH, session_start, write_table as write_table_files
from .scoring import ITEM_COLUMNS, Summary, by_passage

ITEMS, BY_PASSAGE, SUMMARY, CURVE = "items.csv", "by_passage.csv", "summary.json", "curve.csv"
FIGURE, TABLE = "kr_accuracy_and_perplexity", "final_accuracies"
ARM_COLORS = (SEEN_HIT, LINES[1], LINES[2], LINES[0], LINES[3])  # trained arms, in order
BASELINE_COLORS = (BASE, HELD_HIT)  # blind, open book
# The headers of KR-Test's tables in a paper and an HTML page (cctk's shared ones: core.labels.TABLE_HEADERS)
HEADERS = {
    **TABLE_HEADERS,
    "arm": "Arm",
    "method": "Method",
    "modules": "Modules",
    "rank": "Rank",
    "trainable": "Trainable",
    "items": "Items",
    "correct": "Correct",
    "accuracy": "Accuracy",
    "mean_margin": "Mean margin",
    "ties": "Ties",
    "identical": "Identical",
    "val_perplexity": "Validation perplexity",
}
TABLE_CAPTION = (
    "KR-Test: final accuracy of every arm on the same questions, with an exact (Clopper-Pearson) "
    "95% interval. correct / items: items whose true continuation scores strictly higher over the "
    "first T tokens; mean margin (mean_margin): mean log-probability of the true minus the false continuation; "
    "ties: items with margin 0 (identical: continuations equal over their first T tokens); rank and "
    "trainable: the LoRA rank and the exact count of trainable parameters; steps: optimizer steps; "
    "validation perplexity (val_perplexity): perplexity of the validation text after training."
)


def write_evaluation(table: pd.DataFrame, summary: Summary, folder: Path) -> list[Path]:
    """``items.csv`` (one row per item, file order), ``by_passage.csv`` (one row per location) and
    ``summary.json`` in ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    table[ITEM_COLUMNS].to_csv(folder / ITEMS, index=False, lineterminator="\n")
    by_passage(table).to_csv(folder / BY_PASSAGE, index=False, lineterminator="\n")
    (folder / SUMMARY).write_text(json.dumps(asdict(summary), indent=2) + "\n")
    return [folder / ITEMS, folder / BY_PASSAGE, folder / SUMMARY]


def write_curve(curve: pd.DataFrame, folder: Path) -> Path:
    path = Path(folder) / CURVE
    path.parent.mkdir(parents=True, exist_ok=True)
    curve.to_csv(path, index=False, lineterminator="\n")
    return path


def curves_figure(curves: pd.DataFrame, baselines: pd.DataFrame, title: str) -> Figure:
    """KR accuracy (left) and validation perplexity (right) against optimizer steps.

    ``curves``: arm, step, kr_accuracy, kr_lo, kr_hi, val_perplexity (one line per arm, its interval
    as bars); ``baselines``: arm, accuracy, lo, hi (horizontal lines, their interval a band: no steps).
    Everything opaque, so the EPS looks like the PNG.
    """
    with paper_style():
        fig = new_figure(7.2, 3.0)
        left, right = fig.add_axes((0.07, 0.30, 0.38, 0.58)), fig.add_axes((0.60, 0.30, 0.38, 0.58))
        arms = list(dict.fromkeys(curves["arm"]))
        dodge = 0.01 * max(1, curves["step"].max())  # side by side, so the interval bars do not hide each other
        for i, arm in enumerate(arms):
            rows = curves[curves["arm"] == arm]
            color = ARM_COLORS[i % len(ARM_COLORS)]
            accuracy = 100 * rows["kr_accuracy"]
            bars = [accuracy - 100 * rows["kr_lo"], 100 * rows["kr_hi"] - accuracy]
            step = rows["step"] + (i - (len(arms) - 1) / 2) * dodge
            line: dict[str, Any] = {"color": color, "lw": 1.6, "marker": "o", "ms": 2.5}
            left.errorbar(step, accuracy, yerr=bars, elinewidth=0.6, capsize=1.5, label=arm, **line)
            right.plot(rows["step"], rows["val_perplexity"], **line)
        for (_, b), color in zip(baselines.iterrows(), BASELINE_COLORS, strict=True):
            left.axhspan(100 * b["lo"], 100 * b["hi"], color=shade(color, 0.12), lw=0, zorder=0)  # opaque: EPS
            left.axhline(100 * b["accuracy"], color=color, lw=1.2, ls="--", label=f"{b['arm']} (no training)")
        left.axhline(50, color="#bdbdbd", lw=0.8, ls=":", label="chance (50%)")
        _axes(left, "KR accuracy (%)", "KR-Test accuracy (bars, bands: exact 95% interval)")
        _axes(right, "validation perplexity (log scale)", "Validation perplexity")
        log_y(right)  # plain numbers; under a decade (a short run) nice ticks, as the loss chart's
        left.set_ylim(0, 102)
        fig.legend(
            *left.get_legend_handles_labels(), loc="lower center", ncol=4, frameon=False, bbox_to_anchor=(0.5, 0.0)
        )
        fig.suptitle(title, fontweight="bold", fontsize=9, y=0.99)
    return fig


def _axes(ax: Axes, ylabel: str, title: str) -> None:
    ax.set_xlabel("optimizer step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(color="#e3e3e3", linewidth=0.6, which="both")
    cast(MaxNLocator, ax.xaxis.get_major_locator()).set_params(integer=True)  # AutoLocator: a MaxNLocator


def write_figure(curves: pd.DataFrame, baselines: pd.DataFrame, title: str, folder: Path) -> list[Path]:
    return save_figure(curves_figure(curves, baselines, title), folder, FIGURE)


def write_table(table: pd.DataFrame, folder: Path, session: str = "") -> list[Path]:
    """``final_accuracies`` as CSV, XLSX and a floating LaTeX table (caption, label ``tab:final_accuracies``),
    through the toolkit's one table writer."""
    return write_table_files(table, Path(folder), TABLE, TABLE_CAPTION, HEADERS, session_start(session) or XLSX_EPOCH)
