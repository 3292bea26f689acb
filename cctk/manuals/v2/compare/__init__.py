"""Manual 2.0.0 across runs (``cctk compare``): its runs pooled over seeds (``tables``), each rule against its
control run by run and pooled, with verdicts in words (``findings``), and the charts of both. Pure: runs in, a
``Comparison`` out (``cctk.manuals.pooled``); ``cctk.compare`` gathers the runs and writes it."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from ...pooled import Comparison, group_columns, varied
from ..charts.across import cross_model_chart, implausibility_chart, recipe_sensitivity_chart
from ..charts.forest import forest_chart
from ..design import ARMS
from ..labels import model_name
from . import findings as evidence, tables as across
from .tables import Study

# In the words of the tables' headers (HEADERS in cctk.manuals.v2.labels): compare.html and the LaTeX print these.
CAPTIONS = {
    "cross_seed": "Across seeds: for every base model (and value of each recipe value that differs between the "
    "runs) and measured model, the number of runs and, per group (all additions for the models trained on "
    "all 81, seen and held out for the others), the mean over runs of the share of additions whose top "
    "choice is the model's own target, with its Student's t 95% interval (runs - 1 degrees of freedom, "
    "clipped to [0, 1]; none for one run).",
    "rule_vs_control_pooled": "Each rule against its control on the held-out additions, pooled over the runs of a "
    "base model (and recipe, where it differs): rule hits and control hits, each hits / n summed over runs "
    "with its share and its exact Clopper-Pearson 95% interval; CMH chi-square: the Cochran-Mantel-Haenszel "
    "statistic with the runs as strata (no "
    "continuity correction; for reference); p, two-sided and p, one-sided (that the rule hits more often): the "
    "exact CMH test, conditional on every run's margins (each run's rule hits hypergeometric; Fisher's exact "
    "test when there is one run), no normal approximation of the sparse held-out counts; odds ratio "
    "(MH): the Mantel-Haenszel pooled odds ratio with its 95% interval; p (Holm): Holm over every "
    "rule-vs-control test of this comparison; runs agreeing: runs pointing the way of the pooled estimate; "
    "Breslow-Day: the statistic of the test of equal odds ratios across runs with Tarone's correction, and "
    "its p.",
    "heldout_pooled": "Held-out hits of every corpus trained on the seen additions, per base model (and recipe, "
    "where it differs): hits / n summed over runs, with the pooled share and its exact (Clopper-Pearson) 95% "
    "interval (the data of the cross-model chart). Held out means held out of the corpus: the recovery model's "
    "held-out additions had their correct sums learned by the correct-sums model it descends from.",
    "implausibility_distance": "How implausibility matters: the fabricated-answers model on its fabricated answers, "
    "pooled over the runs of a base model (and recipe, where it differs), by the distance of the fabricated "
    "answer from the true sum: hits (top choice is the fabricated answer) / additions, their share with its "
    "exact (Clopper-Pearson) 95% interval, and P(fabricated): the mean probability on the fabricated answer.",
    "implausibility_possible": "How implausibility matters: the same, by whether the fabricated answer could be a "
    "correct sum (<= 18) or never can (> 18).",
    "recipe_sensitivity": "How the outcome moves with the recipe, per base model and value of every recipe value "
    "that differs between the runs: Part A's absorption (each Part A model's share of hits on its own target "
    "over all 81 additions, the mean over runs with a Student's t 95% interval over runs; hits / n summed "
    "over runs) and every rule that ran against its control on the held-out additions (hits / n pooled over "
    "runs, share with its exact Clopper-Pearson 95% interval, for the rule and for its control; p, "
    "one-sided and p, two-sided: the exact Cochran-Mantel-Haenszel test of the pooled rule-vs-control table). "
    "Interval: which of the two. A part the runs did not run has no row.",
    "per_run": "Each rule against its control on the held-out additions, run by run: rule hits and control hits "
    "(hits / n, share, its exact Clopper-Pearson 95% interval); p, one-sided: the run's one-sided Fisher exact p "
    "that the rule hits more often; p "
    "(Holm): the same Holm-adjusted over the rules of that run (as the run's table 10); direction: the "
    "rule's share above, equal to or below its control's; odds ratio: the run's conditional "
    "maximum-likelihood odds ratio with its exact (conditional) 95% interval (infinite: the control has no "
    "hit; 0: the rule has none).",
    "findings": "Findings across seeds, one row per contrast (rule vs its control, per group): verdict; runs; runs "
    "agreeing (runs whose direction is that of the pooled estimate); rule hits and control hits pooled over "
    "runs (hits / n, share, its exact Clopper-Pearson 95% interval); p (exact CMH): the one-sided exact "
    "Cochran-Mantel-Haenszel test (conditional on every run's "
    "margins; Fisher's with one run); p (Holm): Holm over every contrast of this "
    "comparison; Breslow-Day and p (Breslow-Day): the test of equal odds ratios across runs with Tarone's "
    "correction, runs - 1 degrees of freedom (none with fewer than two informative runs or a pooled odds "
    "ratio of 0 or infinity); odds ratio (MH) with its 95% interval; runs for 80% power: the fewest runs "
    "whose simulated study (runs drawn from the observed ones, hits binomial at their rates; 400 studies) "
    "reaches 80% power at 0.05 / (family size), up to 50. Verdict: supported when p (Holm) < 0.05, p "
    "(Breslow-Day) is not below 0.05 and at least two thirds of at least two runs agree; inconsistent when "
    "p (Holm) < 0.05 but the runs are heterogeneous or fewer than two thirds agree; not supported otherwise.",
}
TABLE_TITLES = {
    "findings": "Findings across seeds",
    "per_run": "Each rule against its control, run by run",
    "cross_seed": "Hits on each model's own target, across seeds",
    "rule_vs_control_pooled": "Each rule against its control, pooled over runs",
    "heldout_pooled": "Held-out hits of every corpus, pooled over runs",
    "implausibility_distance": "How implausibility matters: by the fabricated answer's distance from the sum",
    "implausibility_possible": "How implausibility matters: answers a sum can be, and answers it never is",
    "recipe_sensitivity": "How the outcome moves with the recipe: the numbers",
}
FIGURE_TITLES = {
    "forest": "Forest plot: each rule against its control, run by run and pooled",
    "recipe_sensitivity": "How the outcome moves with the recipe",
    "cross_model": "Held-out hits of every corpus, by base model (and recipe)",
    "implausibility": "How implausibility matters",
}
# Drawn as squares on the sensitivity chart: the fabricated-answers model and the arms trained from it.
FABRICATED_LINE = frozenset(model_name(k) for k in ("m_random", *(a.key for a in ARMS if a.parent == "m_random")))


def compare(runs: list[Study], found: list[evidence.Finding] | None = None) -> Comparison:
    """Every table of the comparison of 2.0.0 runs with its caption, its charts and its findings in words; ``found``:
    the findings when already computed. A table with no row (no rule ran, no recipe value varies) is left out."""
    contrasts = evidence.contrasts(runs)
    found = evidence.findings(contrasts) if found is None else found
    by_distance, by_kind = across.implausibility(runs)
    computed = {
        "findings": evidence.findings_table(found),
        "per_run": evidence.per_run(contrasts),
        "cross_seed": across.cross_seed(runs),
        "rule_vs_control_pooled": evidence.with_agreement(across.pooled_tests(runs), found),
        "heldout_pooled": across.heldout_pooled(runs),
        "implausibility_distance": by_distance,
        "implausibility_possible": by_kind,
        "recipe_sensitivity": across.recipe_sensitivity(runs),
    }
    tables = {name: table for name, table in computed.items() if len(table)}
    drawn = charts(runs, tables)
    return Comparison(
        tables,
        {name: CAPTIONS[name] for name in tables},
        drawn,
        {name: FIGURE_TITLES[name] for name in drawn},
        tuple((evidence.sentence(f), f.verdict) for f in found),
        lead="findings" if "findings" in tables else None,
        note=FOREST_NOTE if "forest" in drawn else "",
        table_titles={name: TABLE_TITLES[name] for name in tables},
    )


FOREST_NOTE = "The forest plot shows every run and the pooled odds ratio of each contrast."


def charts(runs: list[Study], tables: dict[str, pd.DataFrame]) -> dict[str, Figure]:
    """The figures of a comparison, by name, each drawn from its table where there is one."""
    by = group_columns(runs)
    drawn: dict[str, Figure] = {}
    if "findings" in tables:
        drawn["forest"] = forest_chart(tables["per_run"], tables["findings"], by)
    if "recipe_sensitivity" in tables:  # x: the first varied value; any other splits the rows of panels
        x = varied(runs)[0]
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
