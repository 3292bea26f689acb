"""report.html: one self-contained page (inline CSS, figures as PNG data URIs, nothing fetched)
with the parameters, the seeds and what each controls, the runs, and every figure and table in order."""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import jinja2
import pandas as pd
from markupsafe import Markup
from PIL import Image

from ..core.labels import printed
from ..core.records import RunInfo
from ..manuals.manual import ManualSpec
from . import latex
from .run_report import facts, fine_tuning_runs, report_title, runs_table
from .tables import html as table_html

if TYPE_CHECKING:
    from ..figures.spec import Spec

EMBED_SCALE = 2  # the 300 dpi PNGs are embedded at 150 dpi

TEMPLATE = jinja2.Environment(autoescape=True).from_string("""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>cctk report {{ info.session }}</title>
<style>
body { font-family: "DejaVu Sans", "Segoe UI", Helvetica, Arial, sans-serif; color: #222; margin: 0;
       background: #f6f6f4; line-height: 1.45; font-size: 15px; }
main { max-width: 1100px; margin: 0 auto; padding: 24px 32px 64px; background: #fff; }
h1 { font-size: 28px; margin: 8px 0 4px; }
h2 { font-size: 22px; border-bottom: 2px solid #2166ac; padding-bottom: 4px; margin-top: 48px; }
h3 { font-size: 17px; margin: 28px 0 6px; }
.lead { color: #555; margin: 0 0 16px; }
nav ol { columns: 2; padding-left: 20px; }
nav a, a { color: #2166ac; }
.facts { display: flex; flex-wrap: wrap; align-items: flex-start; gap: 8px 28px; }
.facts > div { flex: 1 1 300px; }  /* three columns (the machine; model and recipe; measurement), else stacked */
.facts table.kv { width: 100%; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0 12px; }
th, td { padding: 3px 9px; border-bottom: 1px solid #e2e2e2; text-align: right; vertical-align: top; }
th { border-bottom: 2px solid #999; background: #fafafa; }
td:first-child, th:first-child { text-align: left; }
table.kv td, table.kv th { text-align: left; }
table.kv td:first-child { color: #666; white-space: nowrap; }
table.kv td:last-child { overflow-wrap: anywhere; }  /* a sha256 or a long path wraps inside its column */
.scroll { overflow-x: auto; }
figure { margin: 24px 0 36px; }
figure { max-width: 960px; }
figure img { display: block; width: 100%; height: auto; border: 1px solid #eee; }
figcaption, .caption { color: #444; font-size: 14px; }
.num { font-weight: bold; }
code { font-size: 13px; }
.note { background: #eef4fa; border-left: 4px solid #2166ac; padding: 8px 12px; }
.warning { background: #fdecea; border-left: 4px solid #c62828; padding: 8px 12px; }
</style>
</head>
<body>
<main>
<h1>{{ heading }}</h1>
<p class="lead">Session <code>{{ info.session }}</code> &middot; model <code>{{ info.model.key }}</code>
({{ info.model.id }}) &middot; profile {{ info.profile }}{% if
 minutes %} &middot; {{ minutes }} min from start to the reports{% endif %}</p>
{% if ran %}<p class="lead">{{ ran }}</p>{% endif %}
{% for warning in warnings %}<p class="warning"><b>Warning:</b> {{ warning }}.</p>
{% endfor %}

<nav><h2>Contents</h2><ol>
<li><a href="#parameters">Parameters</a></li><li><a href="#seeds">Seeds</a></li>
<li><a href="#runs-summary">Fine-tuning runs</a></li>
{% for part in parts %}<li><a href="#part-{{ part.key }}">{{ part.title }}</a></li>{% endfor %}
</ol></nav>

<h2 id="parameters">Parameters</h2>
{% macro facts_block(title, rows) %}<h3>{{ title }}</h3><table class="kv">
{% for label, value in rows %}<tr><td>{{ label }}</td><td>{{ value }}</td></tr>{% endfor %}
</table>{% endmacro %}
<div class="facts">
<div>{% for title, rows in blocks[:2] %}{{ facts_block(title, rows) }}{% endfor %}</div>
<div>{% for title, rows in blocks[2:] %}{{ facts_block(title, rows) }}{% endfor %}</div>
<div><h3>Measurement and tracking</h3><table class="kv">
<tr><td>candidates</td><td>{{ info.candidates[0] }} to {{ info.candidates[-1] }} ({{
 info.candidates|length }})</td></tr>
<tr><td>end marker</td><td>{% if info.end_marker %}<code>{{ end_marker }}</code>{% else %}none{% endif %}</td></tr>
{% for label, value in design %}<tr><td>{{ label }}</td><td>{{ value }}</td></tr>{% endfor %}
<tr><td>MLflow tracking URI</td><td><code>{{ info.mlflow.tracking_uri }}</code></td></tr>
<tr><td>experiment id</td><td><code>{{ info.mlflow.experiment_id }}</code></td></tr>
<tr><td>run id</td><td><code>{{ info.mlflow.run_id }}</code></td></tr>
{% if info.mlflow.url %}<tr><td>MLflow UI</td><td><a href="{{ info.mlflow.url }}">the run's page</a></td></tr>
{% endif %}
</table></div>
</div>

<h2 id="seeds">Seeds</h2>
<table class="kv">
<tr><th>Seed</th><th>Value</th><th>What it controls</th></tr>
{% for seed in seeds %}<tr><td>{{ seed.name }}</td><td><code>{{ seed.value }}</code></td><td>{{
 seed.role }}</td></tr>{% endfor %}
</table>
<p class="caption">{% if info.seeds.drawn_fresh %}These seeds were drawn fresh for this run; pass
<code>--seed {{ seed_text }}</code> to repeat it.{% else %}These seeds were given for this run
(<code>--seed {{ seed_text }}</code>).{% endif %}</p>

{% if not figures_drawn %}<p class="caption"><b>Figures not drawn in this run</b> (it ran with
<code>--no-figures</code>): <code>cctk report {{
 info.session }}</code> draws them from the saved measurements.</p>{% endif %}

<h2 id="runs-summary">Fine-tuning runs</h2>
<div class="scroll">{{ runs }}</div>

{% for part in parts %}
<h2 id="part-{{ part.key }}">{{ part.title }}</h2>
{% if part.note %}<p class="note">{{ part.note }}</p>{% endif %}
{% for item in part["items"] %}
{% if item.kind == "figure" %}
<figure id="{{ item.anchor }}"><img src="{{ item.uri }}" alt="{{ item.title }}">
<figcaption><span class="num">Figure {{ item.number }}.</span> {{ item.title }}. {{ item.about }}</figcaption></figure>
{% else %}
<h3 id="{{ item.anchor }}">Table {{ item.number }}: {{ item.title }}</h3>
<p class="caption">{{ item.caption }}</p>
<div class="scroll">{{ item.html }}</div>
{% endif %}
{% endfor %}
{% endfor %}
</main>
</body>
</html>
""")


def data_uri(png: Path, scale: int = EMBED_SCALE) -> str:
    """A PNG as a ``data:`` URI, ``scale`` times smaller (box filter) and in 256 colours:
    a fifth of a second and about 100 kB for a heatmap."""
    with Image.open(png) as image:
        small = image.convert("RGB").reduce(scale)
    buffer = io.BytesIO()
    small.quantize(256, method=Image.Quantize.FASTOCTREE).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def plain_table(table: pd.DataFrame, name: str, headers: Mapping[str, str]) -> str:
    """A table as report.html shows it: the export's plain headers and cells (``cctk export``'s, in Unicode:
    ``Rule hits``, ``8/24 (33%, 16\u201355%)``, ``p (Holm)``, ``\u221e``), names left, numbers right."""
    names = [c for c in printed(table).columns if not pd.api.types.is_numeric_dtype(table[c])]
    left = [latex.header(c, latex.PLAIN, headers) for c in names]
    return table_html(latex.display(table, latex.PLAIN, headers), name, left=left)


class Section(TypedDict):
    """A part of the page as the template shows it: its figures and tables (``items``, the template's rows),
    in order."""

    key: str
    title: str
    items: list[dict[str, Any]]
    note: str | None


def render(info: RunInfo, tables: dict[str, pd.DataFrame], figures: list[tuple[Spec, str]], spec: ManualSpec) -> str:
    """``figures``: (figures.spec.Spec, its PNG as a data URI) in order; ``spec``: the run's manual's, which names
    its sections and tables."""
    notes = {key: note.format(model=info.model.key, profile=info.profile) for key, note in spec.notes.items()}
    sections: dict[str, Section] = {
        key: {"key": key, "title": text, "items": [], "note": notes.get(key)} for key, text in spec.sections.items()
    }
    for figure, uri in figures:
        sections[figure.part]["items"].append(
            {
                "kind": "figure",
                "number": figure.number,
                "anchor": f"figure-{figure.number:02d}",
                "title": figure.title[0].upper() + figure.title[1:],
                "uri": uri,
                "about": spec.figure_about[figure.about_key],
            }
        )
    for name, table in tables.items():
        about = spec.table(name)
        sections[about.section]["items"].append(
            {
                "kind": "table",
                "number": int(name[-2:]),
                "anchor": name,
                "title": about.title,
                "caption": about.paper_caption or about.caption,  # in the words of the headers
                "html": Markup(plain_table(table, name, spec.column_headers)),
            }
        )
    seeds = info.seeds
    seed_rows = [
        {"name": f"seeds[{i}]", "value": v, "role": seeds.roles["seeds[1:]" if i else "seeds[0]"]}
        for i, v in enumerate(seeds.values)
    ]
    minutes = f"{info.seconds / 60:.1f}" if info.seconds is not None else None
    return TEMPLATE.render(
        info=info,
        heading=report_title(spec, "cctk report"),
        blocks=facts(info),
        seeds=seed_rows,
        seed_text=",".join(map(str, seeds.values)),
        end_marker=repr(info.end_marker),
        design=info.design.measurement_rows(),
        warnings=info.design.warnings,
        minutes=minutes,
        figures_drawn=bool(figures),
        ran=info.design.ran(),
        parts=[s for s in sections.values() if s["items"]],  # a part not run has neither table nor figure
        runs=Markup(table_html(runs_table(fine_tuning_runs(info, spec, tables)), "runs", left=["Model", "Parent"])),
    )
