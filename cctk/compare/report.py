"""The outputs of ``cctk compare``: tables (CSV/XLSX/LaTeX), figures (PNG/PDF/EPS) and one HTML page.

<out>/
  runs.csv                          the pipelines compared (run id, base model, seed, varied recipe values, parts)
  tables/<name>/<name>.{csv,xlsx,tex}   each comparable manual's (``Comparable.compare``): 2.0.0's findings, per_run
  figures/<name>/<name>.{png,pdf,eps}   2.0.0's forest among them
  compare.html                      self-contained: the findings in words first, then every table and figure

What is compared is each manual's own (``cctk.manuals.manual.Comparable.compare``), over its runs; this module
writes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd
from markupsafe import Markup

from ..core.labels import counted
from ..figures import save_figure
from ..manuals.manual import Comparable
from ..manuals.pooled import Comparison, PooledRun, varied
from ..outputs import comparison
from ..outputs.html_report import data_uri, plain_table
from ..outputs.tables import write_table

GROUPING = (
    "Every table pools runs only within a group: one base model and one value of each recipe value that "
    "differs between the runs compared (the columns after the base model, read from what each run logged)."
)

PAGE = jinja2.Environment(autoescape=True).from_string("""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>cctk compare</title>
<style>
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; color: #222; margin: 0; background: #f6f6f4; }
main { max-width: 1100px; margin: 0 auto; padding: 24px 32px 64px; background: #fff; }
h2 { border-bottom: 2px solid #2166ac; padding-bottom: 4px; margin-top: 40px; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0 12px; }
th, td { padding: 3px 9px; border-bottom: 1px solid #e2e2e2; text-align: right; }
th { border-bottom: 2px solid #999; background: #fafafa; }
.scroll { overflow-x: auto; } figure img { width: 100%; max-width: 960px; border: 1px solid #eee; }
.caption { color: #444; font-size: 14px; }
ul.findings li { margin: 6px 0; } li.supported { color: #0b3d12; } li.inconsistent { color: #8a3b00; }
</style></head><body><main>
<h1>cctk compare</h1>
{% if sentences %}<h2 id="findings">Findings across seeds</h2>
<ul class="findings">{% for text in sentences %}<li class="{{
 verdicts[loop.index0]|replace(" ", "-") }}">{{ text }}</li>
{% endfor %}</ul>
<p class="caption">{{ findings_caption }}{% if note %} {{ note }}{% endif %}</p>
<div class="scroll">{{ findings_html }}</div>{% endif %}
<h2 id="runs">Runs compared</h2>
<p class="caption">{{ pipelines }}{% if sweep %} of sweep <code>{{ sweep }}</code>{% endif %}.
{% if varied %}Recipe values that differ between them: {{ varied|join(", ") }}. {% endif %}{{ grouping }}</p>
<div class="scroll">{{ runs_html }}</div>
{% for item in items %}
<h2 id="{{ item.name }}">{{ item.title }}</h2>
{% if item.kind == "figure" %}<figure><img src="{{ item.uri }}" alt="{{ item.title }}">
<figcaption class="caption">Files: {% for f in item.files %}<a href="{{ f }}">{{ f }}</a>
{%- if not loop.last %}, {% endif %}{% endfor %}</figcaption></figure>
{% else %}<p class="caption">{{ item.caption }}</p><div class="scroll">{{ item.html }}</div>{% endif %}
{% endfor %}
</main></body></html>
""")


@dataclass(frozen=True)
class Compared:
    tables: dict[str, pd.DataFrame]
    figures: dict[str, list[Path]]
    folder: Path
    findings: tuple[str, ...] = ()  # one sentence per contrast (``findings.sentence``)


def compute(runs: list[PooledRun[Any]]) -> Comparison:
    """The comparison of ``runs``: each manual's of its own runs (in the order the runs name them), merged."""
    by_manual: dict[str, list[PooledRun[Any]]] = {}
    for r in runs:
        by_manual.setdefault(r.manual.spec.name, []).append(r)
    merged = Comparison()
    for mine in by_manual.values():
        manual = mine[0].manual
        if not isinstance(manual, Comparable):  # a manual that compares nothing adds nothing but runs.csv
            continue
        part = manual.compare(mine)
        merged = Comparison(
            {**merged.tables, **part.tables},
            {**merged.captions, **part.captions},
            {**merged.figures, **part.figures},
            {**merged.titles, **part.titles},
            merged.findings + part.findings,
            merged.lead or part.lead,
            merged.note or part.note,
            {**merged.table_titles, **part.table_titles},
        )
    return merged


def listing(runs: list[PooledRun[Any]]) -> pd.DataFrame:
    """runs.csv: each pipeline compared, its base model, seed, protocol, the recipe values that differ
    between the runs, and the parts it ran."""
    columns = varied(runs)
    return pd.DataFrame(
        [
            {
                "run_id": r.run_id,
                "base_model": r.model,
                "seed": r.seed,
                **{c: r.recipe.get(c) for c in columns},
                "protocol": r.manual.spec.name,
                "parts": ",".join(r.parts),
            }
            for r in runs
        ]
    )


def write(runs: list[PooledRun[Any]], out: Path, sweep: str | None = None) -> Compared:
    """The comparison of ``runs`` in ``out``, in place of any comparison written there before
    (``comparison.replacing``)."""
    out = Path(out)
    with comparison.replacing(out) as into:
        done, figures, sentences = _write(runs, into, sweep)
    figures = {name: [out / p.relative_to(into) for p in paths] for name, paths in figures.items()}
    return Compared(done.tables, figures, out, sentences)


def _write(
    runs: list[PooledRun[Any]], out: Path, sweep: str | None
) -> tuple[Comparison, dict[str, list[Path]], tuple[str, ...]]:
    runs_table = listing(runs)
    runs_table.to_csv(out / "runs.csv", index=False, lineterminator="\n")
    done = compute(runs)
    headers = {k: v for r in runs for k, v in r.manual.spec.column_headers.items()}  # each manual's columns
    for name, table in done.tables.items():
        write_table(table, out / "tables" / name, name, done.captions[name], headers)
    figures = {name: save_figure(fig, out / "figures" / name, name) for name, fig in done.figures.items()}
    items = [
        {
            "kind": "figure",
            "name": n,
            "title": done.titles[n],
            "uri": data_uri(paths[0]),
            "files": [p.relative_to(out).as_posix() for p in paths],
        }
        for n, paths in figures.items()
    ]
    items += [
        {
            "kind": "table",
            "name": n,
            "title": done.table_titles.get(n, n.replace("_", " ")),
            "caption": done.captions[n],
            "html": Markup(plain_table(t, n, headers)),  # as the LaTeX prints it, and report.html its tables
        }
        for n, t in done.tables.items()
        if n != done.lead
    ]
    sentences = tuple(sentence for sentence, _ in done.findings)
    page = PAGE.render(
        pipelines=counted(len(runs), "pipeline"),
        sweep=sweep,
        items=items,
        runs_html=Markup(plain_table(runs_table, "runs", headers)),
        varied=varied(runs),
        grouping=GROUPING,
        sentences=sentences,
        findings_caption=done.captions.get(done.lead or "", ""),
        note=done.note,
        verdicts=[verdict for _, verdict in done.findings],
        findings_html=Markup(plain_table(done.tables[done.lead], done.lead, headers)) if done.lead else "",
    )
    (out / comparison.PAGE).write_text(page, encoding="utf-8")
    return done, figures, sentences
