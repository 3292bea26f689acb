"""``python -m cctk.bench paper SOURCE``: where ``cctk export`` and ``cctk report --style paper`` spend their
time, in one process and without workers: rebuilding the session (its measurements read, its draws and tables
computed again), each figure drawn, saved as PDF and as PNG, and the tables set as LaTeX. Each figure is saved
both ways: as before issue 48 (the PDF's fonts subset with their shaping tables, the PNG laid out again) and as
now (``cctk.figures.common.lean_fonts``, the layout of the first save kept), so that the two compare on one
machine in one process."""

from __future__ import annotations

import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

from ..figures.common import lean_fonts, paper_style
from ..figures.style import paper
from ..outputs import latex
from ..store import session


def run(source: Path, width: str = "column") -> dict[str, str | int | float]:
    """Seconds per stage over the session's figures and tables, each save the old way and the new."""
    start = time.perf_counter()
    rebuilt = session.rebuild(Path(source))
    rebuilt_s = time.perf_counter() - start
    style = paper(width)
    specs = rebuilt.manual.figures(rebuilt.results, rebuilt.tables, rebuilt.info.config.model)
    spent = dict.fromkeys(("draw", "pdf before", "pdf now", "png before", "png now"), 0.0)
    slowest = ("", 0.0)
    with tempfile.TemporaryDirectory() as folder:
        for spec in specs:
            for lean in (False, True):
                began = time.perf_counter()
                fig = spec.draw(**spec.args, style=style)
                drawn = time.perf_counter()
                with paper_style(), lean_fonts() if lean else nullcontext():
                    fig.savefig(Path(folder) / f"{spec.stem}.pdf", dpi=300)
                    pdf = time.perf_counter()
                    if lean:
                        fig.set_layout_engine("none")
                    fig.savefig(Path(folder) / f"{spec.stem}.png", dpi=300)
                png = time.perf_counter()
                way = "now" if lean else "before"
                spent["draw"] += (drawn - began) / 2
                spent[f"pdf {way}"] += pdf - drawn
                spent[f"png {way}"] += png - pdf
                if lean and png - began > slowest[1]:
                    slowest = (spec.stem, png - began)
    began = time.perf_counter()
    for name, table in rebuilt.tables.items():
        latex.latex(table, name, f"tab:{name}", rebuilt.manual.spec.column_headers)
    tables_s = time.perf_counter() - began
    before = spent["draw"] + spent["pdf before"] + spent["png before"]
    now = spent["draw"] + spent["pdf now"] + spent["png now"]
    return {
        "figures": len(specs),
        "tables": len(rebuilt.tables),
        "seconds to rebuild the session (read, draws, tables)": round(rebuilt_s, 2),
        "seconds to draw the figures": round(spent["draw"], 2),
        "seconds to save the PDFs, fonts with their shaping tables (before)": round(spent["pdf before"], 2),
        "seconds to save the PDFs, lean fonts (now)": round(spent["pdf now"], 2),
        "seconds to save the PNGs, laid out again (before)": round(spent["png before"], 2),
        "seconds to save the PNGs, layout kept (now)": round(spent["png now"], 2),
        "seconds to set the tables as LaTeX": round(tables_s, 2),
        "figures, before / now": round(before / now, 2),
        "slowest figure now, seconds": f"{slowest[0]} {slowest[1]:.2f}",
    }
