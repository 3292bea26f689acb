"""The outputs of ``cctk compare``: tables (CSV/XLSX/LaTeX), figures (PNG/PDF/EPS) and one HTML page.

<out>/
  runs.csv                          the pipelines compared (run id, base model, seed, varied recipe values, parts)
  tables/<name>/<name>.{csv,xlsx,tex}   findings and per_run among them (``cctk.compare.findings``)
  figures/<name>/<name>.{png,pdf,eps}   forest among them
  compare.html                      self-contained: the findings in words first, then every table and figure
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import jinja2
import pandas as pd
from markupsafe import Markup

from ..figures import save_figure
from ..figures.across import cross_model_chart, implausibility_chart, recipe_sensitivity_chart
from ..figures.forest import forest_chart
from ..manuals.v2.design import ARMS
from ..manuals.v2.labels import model_name
from ..outputs.html_report import data_uri
from ..outputs.tables import html as table_html
from ..outputs.tables import write_table
from . import findings as evidence
from . import tables as across
from .tables import PooledRun, pooled_in

CAPTIONS = {
    "cross_seed": "Across seeds: for every base model (and value of each recipe value that differs between the "
    "runs) and measured model, the number of runs and, per group (all "
    "81 additions for the models trained on all of them, seen and held out for the others), the mean "
    "over runs of the share of additions whose top choice is the model's own target, with a Student's t "
    "95% interval of that mean (runs - 1 degrees of freedom, clipped to [0, 1]; none for one run).",
    "rule_vs_control_pooled": "Each rule against its control on the held-out additions, pooled over the runs of a "
    "base model (and recipe, where it differs): hits / n summed over runs, Cochran-Mantel-Haenszel chi-square with the "
    "runs as strata (no continuity correction), its two-sided p-value and the one-sided "
    "p-value that the rule hits more often, and the Mantel-Haenszel pooled odds ratio with "
    "its 95% interval; beside it p_adjusted (Holm over every rule-vs-control test of "
    "this comparison), runs_agreeing (runs pointing the way of the pooled estimate) and "
    "the Breslow-Day test of equal odds ratios across runs with Tarone's correction "
    "(bd_statistic, p_heterogeneity).",
    "heldout_pooled": "Held-out hits of every corpus trained on the seen additions, per base model (and recipe, "
    "where it differs): hits and "
    "held-out additions summed over runs, the pooled share and its exact (Clopper-Pearson) 95% "
    "interval (the data of the cross-model chart).",
    "implausibility_distance": "How implausibility matters: the fabricated-answers model on its fabricated answers, "
    "pooled over the runs of a base model (and recipe, where it differs), by the "
    "distance of the fabricated answer from the true sum: "
    "additions, hits (top choice is the fabricated answer), share with its exact "
    "(Clopper-Pearson) 95% interval, and the mean probability on the fabricated answer.",
    "implausibility_possible": "How implausibility matters: the same, by whether the fabricated answer could be a "
    "correct sum (<= 18) or never can (> 18).",
    "recipe_sensitivity": "How the outcome moves with the recipe, per base model and value of every recipe value "
    "that differs between the runs: Part A's absorption (part A: each Part A model's share "
    "of hits on its own target over all 81 additions, the mean over runs with a Student's t "
    "95% interval over runs; hits / n summed over runs) and every rule that ran against its "
    "control on the held-out additions (hits / n pooled over runs, share with its exact "
    "Clopper-Pearson 95% interval, for the rule and for its control; p_one_sided and "
    "p_two_sided of the Cochran-Mantel-Haenszel test of rule_vs_control_pooled). A part the "
    "runs did not run has no row.",
    "per_run": "Each rule against its control on the held-out additions, run by run: hits and n of each side, "
    "the run's one-sided Fisher exact p that the rule hits more often (p_one_sided) and the same "
    "Holm-adjusted over the rules of that run (p_adjusted, as the run's table10), direction (the rule's "
    "share above, equal to or below its control's), and the run's conditional maximum-likelihood odds "
    "ratio with its exact (conditional) 95% interval (inf: the control has no hit, 0: the rule has none).",
    "findings": "Findings across seeds, one row per contrast (rule vs its control, per group): verdict, runs, "
    "runs_agreeing (runs whose direction is that of the pooled estimate), the pooled hits / n, "
    "p_pooled (one-sided Cochran-Mantel-Haenszel), p_adjusted (Holm over every contrast of this "
    "comparison), p_heterogeneity (Breslow-Day with Tarone's correction, runs - 1 degrees of "
    "freedom; nan with fewer than two informative runs or a pooled odds ratio of 0 or infinity), "
    "odds_ratio_mh with its 95% interval, and seeds_for_80_power: the fewest runs whose simulated "
    "study (runs drawn from the observed ones, hits binomial at their rates; 400 studies) reaches 80% "
    "power at 0.05 / (family size), up to 50. Verdict: supported when p_adjusted < 0.05, "
    "p_heterogeneity is not below 0.05, at least two thirds of at least two runs agree; inconsistent "
    "when p_adjusted < 0.05 but the runs are heterogeneous or fewer than two thirds agree; not "
    "supported otherwise.",
    "v1_three_numbers": "Protocol 1.0.0 runs across seeds: for each base model and each of the three numbers "
    "(probability of the true sum before fine-tuning, of the fabricated value after, of the "
    "true sum after), the mean over runs of the run's mean over the 81 additions, with a "
    "Student's t 95% interval over runs (clipped to [0, 1]; none for one run), and the hits "
    "(top choice is that answer) summed over runs.",
}
FIGURE_TITLES = {
    "forest": "Forest plot: each rule against its control, run by run and pooled",
    "recipe_sensitivity": "How the outcome moves with the recipe",
    "cross_model": "Held-out hits of every corpus, by base model (and recipe)",
    "implausibility": "How implausibility matters",
}
# Drawn as squares on the sensitivity chart: the fabricated-answers model and the arms trained from it.
FABRICATED_LINE = frozenset(model_name(k) for k in ("m_random", *(a.key for a in ARMS if a.parent == "m_random")))
GROUPING = (
    "Every table pools runs only within a group: one base model and one value of each recipe value that "
    "differs between the runs compared (the columns after base_model, read from what each run logged)."
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
<p class="caption">{{ findings_caption }}{% if forest %} The <a href="#forest">forest plot</a>
(<a href="figures/forest/forest.png">PNG</a>, <a href="figures/forest/forest.pdf">PDF</a>,
<a href="figures/forest/forest.eps">EPS</a>) shows every run and the pooled odds ratio of each contrast.{% endif %}</p>
<div class="scroll">{{ findings_html }}</div>{% endif %}
<h2 id="runs">Runs compared</h2>
<p class="caption">{{ runs|length }} pipelines{% if sweep %} of sweep <code>{{ sweep }}</code>{% endif %}.
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


def compute(runs: list[PooledRun], found: list[evidence.Finding] | None = None) -> dict[str, pd.DataFrame]:
    """Every table of a comparison, by name: those of 2.0.0 runs, and the three numbers of 1.0.0 runs.
    ``found``: the findings of the 2.0.0 runs when already computed. A table with no row (no rule ran, no
    recipe value varies) is left out."""
    tables = {}
    v2, v1 = pooled_in(runs, "findings"), pooled_in(runs, "v1_three_numbers")
    if v2:
        contrasts = evidence.contrasts(v2)
        found = evidence.findings(contrasts) if found is None else found
        by_distance, by_kind = across.implausibility(v2)
        tables.update(
            {
                "findings": evidence.findings_table(found),
                "per_run": evidence.per_run(contrasts),
                "cross_seed": across.cross_seed(v2),
                "rule_vs_control_pooled": evidence.with_agreement(across.pooled_tests(v2), found),
                "heldout_pooled": across.heldout_pooled(v2),
                "implausibility_distance": by_distance,
                "implausibility_possible": by_kind,
                "recipe_sensitivity": across.recipe_sensitivity(v2),
            }
        )
    if v1:
        tables["v1_three_numbers"] = across.v1_three_numbers(v1)
    return {name: table for name, table in tables.items() if len(table)}


def listing(runs: list[PooledRun]) -> pd.DataFrame:
    """runs.csv: each pipeline compared, its base model, seed, protocol, the recipe values that differ
    between the runs, and the parts it ran."""
    columns = across.varied(runs)
    return pd.DataFrame(
        [
            {
                "run_id": r.run_id,
                "base_model": r.model,
                "seed": r.seed,
                **{c: r.recipe.get(c) for c in columns},
                "protocol": r.protocol.name,
                "parts": ",".join(r.results.parts) if r.protocol.config.split else "",
            }
            for r in runs
        ]
    )


def charts(runs: list[PooledRun], tables: dict[str, pd.DataFrame]) -> dict:
    """The figures of a comparison, by name, each drawn from its table where there is one."""
    v2 = pooled_in(runs, "findings")
    by = across.group_columns(v2)
    drawn = {}
    if "findings" in tables:
        drawn["forest"] = forest_chart(tables["per_run"], tables["findings"], by)
    if "recipe_sensitivity" in tables:  # x: the first varied value; any other splits the rows of panels
        x = across.varied(v2)[0]
        drawn["recipe_sensitivity"] = recipe_sensitivity_chart(
            tables["recipe_sensitivity"], x, [c for c in by if c != x], FABRICATED_LINE
        )
    if "heldout_pooled" in tables:
        drawn["cross_model"] = cross_model_chart(tables["heldout_pooled"], by)
    if "implausibility_distance" in tables:
        drawn["implausibility"] = implausibility_chart(
            tables["implausibility_distance"], tables["implausibility_possible"], by
        )
    return drawn


def write(runs: list[PooledRun], out: Path, sweep: str | None = None) -> Compared:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    runs_table = listing(runs)
    runs_table.to_csv(out / "runs.csv", index=False, lineterminator="\n")
    v2 = pooled_in(runs, "findings")
    found = evidence.findings(evidence.contrasts(v2)) if v2 else []
    tables = compute(runs, found)
    for name, table in tables.items():
        write_table(table, out / "tables" / name, name, CAPTIONS[name])
    figures = {name: save_figure(fig, out / "figures" / name, name) for name, fig in charts(runs, tables).items()}
    items = [
        {
            "kind": "figure",
            "name": n,
            "title": FIGURE_TITLES[n],
            "uri": data_uri(paths[0]),
            "files": [p.relative_to(out).as_posix() for p in paths],
        }
        for n, paths in figures.items()
    ]
    items += [
        {
            "kind": "table",
            "name": n,
            "title": n.replace("_", " "),
            "caption": CAPTIONS[n],
            "html": Markup(table_html(t, n)),
        }
        for n, t in tables.items()
        if n != "findings"
    ]
    sentences = tuple(evidence.sentence(f) for f in found)
    page = PAGE.render(
        runs=runs,
        sweep=sweep,
        items=items,
        runs_html=Markup(table_html(runs_table, "runs")),
        varied=across.varied(v2),
        grouping=GROUPING,
        sentences=sentences,
        findings_caption=CAPTIONS["findings"],
        verdicts=[f.verdict for f in found],
        findings_html=Markup(table_html(tables["findings"], "findings")) if "findings" in tables else "",
        forest=figures.get("forest") and "forest",
    )
    (out / "compare.html").write_text(page, encoding="utf-8")
    return Compared(tables, figures, out, sentences)
