"""Everything a run leaves in its session folder, written from a ``Results`` and its run record.

``write_all`` writes the figures, tables, workbook, run_info.json, run report, HTML report and zip
(the measurement CSVs, the draws and the training records are already there); every path comes
from ``cctk.session.Layout``.
"""
from __future__ import annotations

from functools import partial

import pandas as pd

from .. import session
from ..experiments import Results, absorption_misses, headline
from ..names import model_name
from ..records import RunRecord
from ..session import Layout
from . import catalog, html_report, render, run_report
from .tables import write_tables


def model_heatmaps(results: Results, key: str, layout: Layout) -> list:
    """The heatmaps of one model (own target; m_random also on the correct sum), PNG/PDF/EPS, each
    in its numbered folder, where ``write_all(..., reuse_heatmaps=True)`` finds it again."""
    paths = []
    for figure in catalog.heatmap_keys(key):
        spec = catalog.heatmap_spec(results, figure)
        paths += catalog.draw_and_save(spec, layout.figure(spec.number, spec.stem)["png"].parent)
    return paths


def write_all(results: Results, tables: dict[str, pd.DataFrame], record: RunRecord, layout: Layout,
              reuse_heatmaps: bool = False, figures: bool = True) -> int:
    """Write every output of a run into ``layout``; returns the number of figures drawn.

    ``reuse_heatmaps`` keeps heatmaps already drawn by ``model_heatmaps`` during the run;
    ``figures=False`` draws none (``cctk report`` draws them later from the same folder).
    """
    write_tables(tables, layout)  # first: the cheapest and most precious
    session.write_targets(layout, results.inputs)
    info = session.run_info(record, results.inputs, headline(results), absorption_misses(results))
    session.write_run_info(layout, info)
    specs = catalog.specs(results, tables, record.config.model) if figures else []
    uris = render.run_all(partial(_figure, layout=layout, reuse=reuse_heatmaps), specs)
    run_report.write(info, tables["table11"], catalog.losses(results),
                     [model_name(k) for k in catalog.MAIN_SEQUENCE], layout.run_report)
    layout.report_html.write_text(html_report.render(info, tables, list(zip(specs, uris))), encoding="utf-8")
    session.write_zip(layout)
    return len(specs)


def _figure(spec: catalog.Spec, layout: Layout, reuse: bool) -> str:
    """Draw and save one figure (unless a drawn heatmap may be reused); its PNG as a data URI."""
    files = layout.figure(spec.number, spec.stem)
    if not (reuse and spec.key.startswith("heatmap:") and all(p.is_file() for p in files.values())):
        catalog.draw_and_save(spec, files["png"].parent)
    return html_report.data_uri(files["png"])
