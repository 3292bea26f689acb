"""Everything a protocol v1 run leaves in its session folder: 4 tables, 4 figures, run_info.json,
the run report, report.html and the zip (the measurements, draws and training record are there already).

DataFrames and records in, files out, through ``cctk.session.Layout`` and the 2.0.0 writers:
tables (CSV/XLSX/LaTeX), the before/after bars of Listing 12 (``cctk.figures.before_after_bars``),
the loss chart, the run report and the HTML report.
"""
from __future__ import annotations

from functools import partial

from .. import figures as charts
from .. import session
from ..names import V1_PARTS, V1_TABLE_CAPTIONS, V1_TABLES, model_name
from ..outputs import catalog, html_report, render, run_report
from ..outputs.tables import write_tables
from ..records import RunRecord
from ..session import Layout
from .experiment import AFTER, BEFORE, Results, headline
from .facts import PAIRS

TABLE_PART = {"table01": "comparison", "table02": "comparison", "table03": "runs", "table04": "runs"}
ABOUT = {
    "bars": html_report.ABOUT["bars"] + " Candidates 2 to 18; each side's probabilities are a softmax of the "
                                        "mean log-probability per answer token (manual 1.0.0, Listing 12).",
    "loss": "Mean whole-text training loss of each epoch of the fine-tuning run (log scale).",
}


def specs(results: Results, model_label: str) -> list[catalog.Spec]:
    """The before/after bars of 3 + 5, 5 + 8 and 7 + 4, then the training loss."""
    out = []
    for number, (a, b) in enumerate(PAIRS, start=1):
        args = {"before": results.measurements[BEFORE], "after": results.measurements[AFTER], "a": a, "b": b,
                "true_sum": a + b, "fabricated": int(results.draws.fabricated.loc[(a, b)]),
                "model_label": model_label}
        out.append(catalog.Spec(number, f"bars:{a}+{b}", "comparison", charts.before_after_bars, args,
                                f"{a} + {b} before and after fine-tuning on fabricated answers"))
    losses = {model_name(AFTER): list(results.training.losses)} if results.training else {}
    out.append(catalog.Spec(len(out) + 1, "loss", "runs", charts.loss_chart,
                            {"losses": losses, "main": list(losses)}, "Training loss per epoch"))
    return out


def write_all(results: Results, tables: dict, record: RunRecord, layout: Layout) -> int:
    """Write every output of a v1 run into ``layout``; returns the number of figures."""
    write_tables(tables, layout, V1_TABLE_CAPTIONS, label_prefix="v1-")
    session.write_v1_draws(layout, results.draws)
    info = session.v1_run_info(record, headline(results))
    session.write_run_info(layout, info)
    figures = specs(results, record.config.model)
    uris = render.run_all(partial(_figure, layout=layout), figures)
    losses = figures[-1].args["losses"]
    run_report.write(info, tables["table03"], losses, list(losses), layout.run_report)
    page = html_report.render(info, tables, list(zip(figures, uris)), parts=V1_PARTS, table_part=TABLE_PART,
                              titles=V1_TABLES, captions=V1_TABLE_CAPTIONS, about=ABOUT, runs="table03")
    layout.report_html.write_text(page, encoding="utf-8")
    session.write_zip(layout)
    return len(figures)


def _figure(spec: catalog.Spec, layout: Layout) -> str:
    files = layout.figure(spec.number, spec.stem)
    catalog.draw_and_save(spec, files["png"].parent)
    return html_report.data_uri(files["png"])
