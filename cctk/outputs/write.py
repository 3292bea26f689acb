"""Everything a run leaves in its session folder, written from its results and its run record.

``write_all`` writes the figures, tables, workbook, run_info.json, run report, HTML report and zip of
a run under any manual (the measurement CSVs and the training records are already there); every path comes
from ``cctk.store.session.Layout``, everything that differs between the manuals from the run's ``Manual``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pandas as pd

from ..core.records import RunInfo
from ..figures import spec as figure_spec
from ..manuals.manual import Draws, ModelFigures, Results, trained
from ..store import session
from ..store.session import Layout
from . import html_report, render, run_report
from .tables import write_tables


def model_heatmaps(results: Results[Draws], key: str, layout: Layout) -> list[Path]:
    """The figures of one model as soon as it is measured (2.0.0: its heatmaps; the correct sum too for
    m_random), PNG/PDF/EPS, each in its numbered folder, where ``write_all(..., reuse_heatmaps=True)``
    finds it again. The figures are those of the layout's manual (none where it draws none per model)."""
    if not isinstance(layout.manual, ModelFigures):
        return []
    specs = layout.manual.model_figures(results, key)
    return [p for s in specs for p in figure_spec.draw_and_save(s, layout.figure(s.number, s.stem)["png"].parent)]


def write_all(
    results: Results[Draws],
    tables: dict[str, pd.DataFrame],
    info: RunInfo,
    layout: Layout,
    reuse_heatmaps: bool = False,
    figures: bool = True,
) -> int:
    """Write every output of a run into ``layout`` (``info``: its one record, written as run_info.json);
    returns the number of figures drawn.

    ``reuse_heatmaps`` keeps heatmaps already drawn by ``model_heatmaps`` during the run;
    ``figures=False`` draws none (``cctk report`` draws them later from the same folder).
    """
    manual, spec = layout.manual, layout.manual.spec
    write_tables(tables, layout)  # first: the cheapest and most precious
    session.write_draws(layout, results.draws)
    session.write_run_info(layout, info)
    config = info.config
    specs = manual.figures(results, tables, config.model) if figures else []
    uris = render.run_all(partial(_figure, layout=layout, reuse=reuse_heatmaps), specs)
    losses = {
        spec.model_name(m.key): list(results.training[m.key].losses)
        for m in trained(manual, config.options)
        if m.key in results.training
    }
    run_report.write(
        info,
        spec,
        run_report.fine_tuning_runs(info, spec, tables),
        losses,
        [spec.model_name(k) for k in spec.main_sequence],
        layout.run_report,
    )
    layout.report_html.write_text(
        html_report.render(info, tables, list(zip(specs, uris, strict=True)), spec), encoding="utf-8"
    )
    session.write_zip(layout)
    return len(specs)


def _figure(spec: figure_spec.Spec, layout: Layout, reuse: bool) -> str:
    """Draw and save one figure (unless a drawn heatmap may be reused); its PNG as a data URI."""
    files = layout.figure(spec.number, spec.stem)
    if not (reuse and spec.key.startswith("heatmap:") and all(p.is_file() for p in files.values())):
        figure_spec.draw_and_save(spec, files["png"].parent)
    return html_report.data_uri(files["png"])


@dataclass(frozen=True)
class Rendered:
    layout: Layout
    figures: int
    tables: int
    session: str  # the run's session (its folder's name, unless it is a run's copy in the cache, named by run id)


def rerender(folder: Path, out: Path | None = None) -> Rendered:
    """``cctk report``: every figure, table and report of a session again, from its saved measurements
    (no model), in the folder itself or in ``out/<session>`` (a copy of its inputs)."""
    layout = session.layout_of(folder)
    if out is not None:
        layout = session.copy_inputs(layout, out)
    rebuilt = session.rebuild(layout.folder)
    n_figures = write_all(rebuilt.results, rebuilt.tables, rebuilt.info, layout)
    return Rendered(layout, n_figures, len(rebuilt.tables), rebuilt.info.session)
