"""run_report.pdf (+ .png): one page with the hardware, software, model, recipe, every
fine-tuning run and the training loss (log scale; main sequence in colour, the rest gray).

The same page serves every manual: it reads the run's ``RunInfo``, and what its design is in words from its manual
(its ``ManualSpec``) and its design record (``Design.report_rows``, ``warnings``)."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable
from dataclasses import fields
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ..core.lm.record import training_table
from ..core.records import RunInfo
from ..figures.common import new_figure, paper_style
from ..figures.loss import draw_losses
from ..manuals.manual import ManualSpec
from ..manuals.registry import DEFAULT
from .latex import size
from .tables import number

PAGE = (8.27, 11.69)  # A4, inches
BLOCKS = ((0.06, 31), (0.36, 20), (0.55, 38))  # x of hardware, software, model blocks; characters a value may take


def facts(info: RunInfo) -> list[tuple[str, list[tuple[str, str]]]]:
    """The page's three blocks of (label, value): hardware, software, model and recipe (its manual's design last)."""
    hw, sw = info.hardware, info.software  # software: package -> version
    gpu = f"{hw.gpu} ({size(hw.gpu_memory_bytes)})" if hw.gpu else "none (CPU)"
    hardware = [
        ("processor", hw.processor or "-"),
        ("cores", f"{hw.cores_available} of {hw.cores_logical}"),
        ("memory", size(hw.memory_bytes)),
        ("GPU", gpu),
        ("device used", info.device or "-"),
    ]
    if info.memory:  # the run's peak beside the estimate it was checked against before it started
        where = "peak RSS" if info.memory.where == "process" else "peak GPU"
        hardware.append((where, f"{size(info.memory.peak_bytes)} (est. {size(info.memory.estimate_bytes)})"))
    software = [
        (name, str(sw.get(key) or "-"))
        for name, key in (
            ("Python", "python"),
            ("PyTorch", "torch"),
            ("Transformers", "transformers"),
            ("CUDA", "cuda"),
            ("MLflow", "mlflow"),
            ("cctk", "cctk"),
        )
    ]
    model = [
        ("model", info.model.key),
        ("source", info.model.id),
        *_model_file(info),
        ("profile", info.profile_note or info.profile),
    ]
    recipe = [(f.name, getattr(info.recipe, f.name)) for f in fields(info.recipe)]
    model += [(k.replace("_", " "), "none" if k == "grad_clip" and v == 0 else str(v)) for k, v in recipe]
    seeds = info.seeds.values
    model.append(("seed used", str(seeds[0])))
    if len(seeds) > 1:  # drawn or derived with it, reserved for repetitions
        model.append(("unused seeds", ", ".join(map(str, seeds[1:]))))
    model += info.design.report_rows()
    return [("Hardware", hardware), ("Software", software), ("Model and recipe", model)]


def _model_file(info: RunInfo) -> list[tuple[str, str]]:
    """The file the run loaded (path, size, sha256 or Hub revision) and the commit of the code, where recorded."""
    made = info.provenance
    if made is None:  # a run from before provenance was recorded
        return []
    model = made.model
    rows = [("model file", model.path or "-")]
    if model.size_bytes:
        rows.append(("size", size(model.size_bytes)))
    rows.append(("sha256", model.sha256) if model.sha256 else ("revision", model.revision or "-"))
    if made.git:
        rows.append(("git commit", made.git.commit[:12] + (" (uncommitted changes)" if made.git.dirty else "")))
    return rows


def fine_tuning_runs(info: RunInfo, spec: ManualSpec, tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The run's fine-tuning runs in table11's columns: its manual's table of them, or, for a manual without one,
    the runs its record lists (``RunInfo.training``)."""
    if spec.runs_table is not None:
        return tables[spec.runs_table]
    rows = [{"model": t.model, "parent": t.parent, **t.record.row()} for t in info.training.values()]
    return training_table(rows, ["model", "parent"])


def runs_table(table11: pd.DataFrame) -> pd.DataFrame:
    """table11 with readable cells: times, rates, loss first -> last, memory in MiB/GiB; its headers capitalized,
    as every table's header row in the reports."""
    return pd.DataFrame(
        {
            "Model": table11["model"],
            "Parent": table11["parent"],
            "Examples": table11["examples"].map(str),
            "Steps": table11["steps"].map(str),
            "Time (s)": table11["seconds"].map(lambda v: f"{v:.1f}"),
            "Examples/s": table11["examples_per_second"].map(lambda v: f"{v:.1f}"),
            "Loss first \u2192 last": [
                f"{number(a)} \u2192 {number(b)}"
                for a, b in zip(table11["loss_first_epoch"], table11["loss_last_epoch"], strict=True)
            ],
            "Peak GPU memory": table11["peak_gpu_memory_bytes"].map(_peak),
            "Peak RSS": table11.get("peak_cpu_memory_bytes", pd.Series(pd.NA, index=table11.index)).map(_peak),
        }
    )


def _peak(value: float | None) -> str:
    """A peak memory cell: empty (or 0, as files written before the empty cells hold it): not measured there."""
    return "-" if pd.isna(value) or not value else size(value)


def draw(
    info: RunInfo, spec: ManualSpec, table11: pd.DataFrame, losses: dict[str, list[float]], main: list[str]
) -> Figure:
    with paper_style():
        fig = new_figure(*PAGE)
        fig.text(0.06, 0.965, report_title(spec), fontsize=15, fontweight="bold", va="top")
        fig.text(0.06, 0.94, _subtitle(info), fontsize=8, va="top", color="#333333")
        blocks = [
            (title, _wrapped(rows, width)) for (title, rows), (_, width) in zip(facts(info), BLOCKS, strict=True)
        ]  # v1 fills fewer
        for (title, rows), (x, _) in zip(blocks, BLOCKS, strict=True):
            _block(fig, x, 0.895, title, rows)
        heights = [0.022 + LINE * sum(len(lines) for _, lines in rows) for _, rows in blocks]
        below = 0.895 - max(heights) - 0.02
        top, foot = 0.895 - max(heights[:-1]) - 0.05, below + 0.05  # under hardware and software, left of the model
        in_hole = top - foot >= CHART  # the manuals' long recipes leave room there; the runs' table has the rest
        if in_hole:
            _losses(fig, (0.1, foot, 0.2, top - foot), losses, main)
        warnings = info.design.warnings
        if warnings:  # 2.0.0's Part A did not absorb: said on the page, across it, above the runs it concerns
            lines = textwrap.wrap("Warning: " + "; ".join(warnings), 120)
            fig.text(0.06, below, "\n".join(lines), fontsize=7, va="top", color="#c62828", fontweight="bold")
            below -= LINE * len(lines) + 0.015
        bottom = _runs(fig, runs_table(table11), below, spec.loss)
        if not in_hole:  # a short recipe (a toy manual's): the chart takes the page's foot
            _losses(fig, (0.1, 0.06, 0.5, bottom - 0.06 - 0.03), losses, main)
    return fig


CHART = 0.15  # the least height of the loss chart's axes, figure fraction


def _losses(
    fig: Figure, box: tuple[float, float, float, float], losses: dict[str, list[float]], main: list[str]
) -> None:
    """cctk.figures.loss's chart, in the page's own axes at ``box`` (left, bottom, width, height), its legend right."""
    ax = fig.add_axes(box)
    draw_losses(ax, losses, main, legend_x=1.03)
    ax.set_title("Training loss per epoch", fontweight="bold", fontsize=10, loc="left")


def report_title(spec: ManualSpec, name: str = "cctk run report") -> str:
    """``name``, and the manual when it is not the default one."""
    return name + ("" if spec.name == DEFAULT else f" \u00b7 protocol {spec.version}")


def _subtitle(info: RunInfo) -> str:
    minutes = f"{info.seconds / 60:.1f} min" if info.seconds is not None else "-"
    ml = info.mlflow
    return (
        f"session {info.session}  \u00b7  {minutes} from start to the reports\n"
        f"MLflow run {ml.run_id or '-'} (experiment {ml.experiment_id or '-'})  \u00b7  {ml.tracking_uri or '-'}"
        + (f"\n{ml.url}" if ml.url else "")
    )


LINE = 0.0145  # height of one line of a block, figure fraction


def _wrapped(rows: list[tuple[str, str]], width: int) -> list[tuple[str, list[str]]]:
    """Each value as the lines it takes at ``width`` characters: wrapped at spaces and slashes, a long
    word (a hash, a path) broken where it must; never cut."""
    return [(label, _wrap(str(value), width)) for label, value in rows]


def _wrap(text: str, width: int) -> list[str]:
    """Greedy lines of at most ``width`` characters, broken after a space or a slash (a path); a piece
    longer than a line (a hash) broken inside."""
    lines, line = [], ""
    for piece in re.findall(r"[^ /]*[ /]|[^ /]+$", text):
        if line and len((line + piece).rstrip()) > width:
            lines.append(line.rstrip())
            line = ""
        line += piece
    lines.append(line.rstrip())
    return [part for whole in lines for part in (textwrap.wrap(whole, width) if len(whole) > width else [whole])]


def _block(fig: Figure, x: float, y: float, title: str, rows: list[tuple[str, list[str]]]) -> None:
    fig.text(x, y, title, fontsize=10, fontweight="bold", va="top")
    line = 0
    for label, lines in rows:
        fig.text(x, y - 0.022 - LINE * line, label, fontsize=7, va="top", color="#555555")
        for text in lines:  # a wrapped value goes on over the next lines of the grid
            fig.text(x + 0.095, y - 0.022 - LINE * line, text, fontsize=7, va="top")
            line += 1


# Columns of the runs table: header, x of the text (figure fraction), alignment.
COLUMNS = (
    ("Model", 0.06, "left"),
    ("Parent", 0.36, "left"),
    ("Examples", 0.545, "right"),
    ("Steps", 0.59, "right"),
    ("Time\n(s)", 0.635, "right"),
    ("Examples\nper second", 0.72, "right"),
    ("Loss, first\n\u2192 last epoch", 0.815, "right"),
    ("Peak GPU\nmemory", 0.885, "right"),
    ("Peak\nRSS", 0.955, "right"),
)
ROW = 0.0165  # height of one table row, figure fraction
SIZE = 6.5  # the table's font size, points, where its widest texts fit across the page
LEAST = 4.5  # the least it shrinks to where they do not
GAP = 0.015  # the least space between a model's name and its parent's, figure fraction


def columns(fig: Figure, table: pd.DataFrame) -> tuple[list[tuple[str, float, str]], float]:
    """``COLUMNS`` placed for ``table``'s cells as drawn (``_place``), and the font size to draw them at: ``SIZE``,
    or the largest quarter point below it, down to ``LEAST``, at which no cell runs into the next (2.0.0's
    longest name, a parent, a loss printed as 3.90x10^-4 and a GPU's memory side by side do not fit at 6.5)."""
    for points in [SIZE - 0.25 * i for i in range(int((SIZE - LEAST) / 0.25) + 1)]:
        widths = _widths(fig, table, points)
        placed = _place(widths)
        if placed[2][1] - widths[2] >= placed[1][1] + widths[1] + GAP:  # _place keeps the rest apart
            break
    return placed, points


def _place(widths: list[float]) -> list[tuple[str, float, str]]:
    """``COLUMNS`` for columns of these widths (figure fractions): the parent's moved right of the widest model
    name where one runs past it (2.0.0's "control for the conditional rule from fabricated answers" does); each
    right-aligned column moved right of the one before where its widest text would run into it, then, from the
    last, back left of the next one where that took it past the page's right margin (the last column's own x)."""
    (model, start, align), (parent, at, _) = COLUMNS[:2]
    placed = [(model, start, align), (parent, max(at, start + widths[0] + GAP), "left")]
    edge = placed[1][1] + widths[1]
    for (header, x, align), width in zip(COLUMNS[2:], widths[2:], strict=True):  # right-aligned: x is the right end
        placed.append((header, max(x, edge + GAP + width), align))
        edge = placed[-1][1]
    limit = COLUMNS[-1][1]
    for i in range(len(placed) - 1, 1, -1):
        header, x, align = placed[i]
        placed[i] = (header, min(x, limit), align)
        limit = placed[i][1] - widths[i] - GAP
    return placed


def _widths(fig: Figure, table: pd.DataFrame, points: float) -> list[float]:
    """Each column's widest cell or header line (bold) at ``points``, as a fraction of the page's width."""
    probe = fig.text(0, 0, "", fontsize=points)

    def widest(texts: Iterable[str], weight: str) -> float:
        probe.set_fontweight(weight)
        most = 0.0
        for text in texts:
            probe.set_text(text)
            most = max(most, probe.get_window_extent().width / fig.bbox.width)
        return most

    widths = [
        max(widest(table.iloc[:, i].map(str), "normal"), widest(header.split("\n"), "bold"))
        for i, (header, _, _) in enumerate(COLUMNS)
    ]
    probe.remove()
    return widths


def _runs(fig: Figure, table: pd.DataFrame, top: float, loss: str) -> float:
    """The fine-tuning runs as a plain table of text; returns the y below it."""
    fig.text(0.06, top, "Fine-tuning runs", fontsize=10, fontweight="bold", va="top")
    head = top - 0.045
    placed, points = columns(fig, table)
    for header, x, align in placed:
        fig.text(x, head, header, fontsize=points, fontweight="bold", ha=align, va="bottom", linespacing=1.1)
    _rule(fig, head - 0.004)
    y = head - 0.004 - ROW / 2
    for row in table.itertuples(index=False):
        for value, (_, x, align) in zip(row, placed, strict=True):
            fig.text(x, y, str(value), fontsize=points, ha=align, va="center")
        y -= ROW
    _rule(fig, y + ROW / 2)
    fig.text(
        0.06,
        y - 0.003,
        "Peak GPU memory counts every model held on the GPU while a run trained; peak RSS is the resident memory of "
        f"the process where a run trained on the CPU.\nLoss: {loss}.",
        fontsize=6.5,
        color="#555555",
        va="top",
    )
    return y - 0.035


def _rule(fig: Figure, y: float) -> None:
    fig.add_artist(Line2D([0.06, 0.955], [y, y], color="#888888", linewidth=0.6))


def write(
    info: RunInfo,
    spec: ManualSpec,
    table11: pd.DataFrame,
    losses: dict[str, list[float]],
    main: list[str],
    paths: dict[str, Path],
) -> list[Path]:
    """The page as ``paths["pdf"]`` and ``paths["png"]`` (150 dpi)."""
    fig = draw(info, spec, table11, losses, main)
    with paper_style():
        fig.savefig(paths["pdf"])
        fig.savefig(paths["png"], dpi=150)
    return [paths["pdf"], paths["png"]]
