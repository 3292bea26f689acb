"""Manual 2.0.0's tables and report sections in plain words: titles, captions (of the report and of a paper)
and the note beside a single run's synthesis. The vocabulary both manuals share is ``cctk.core.labels``."""

from __future__ import annotations

from ...core.labels import (
    BASE_MODEL,
    COUNT_CAPTION as _COUNT,
    GROUPS,
    PAPER_FIGURE_ABOUT as SHARED_PAPER_ABOUT,
    Vocabulary,
)

# --- Its models and targets by key, the names of its figures and what each kind shows (report.html). ---

MODELS: dict[str, str] = {
    "base": BASE_MODEL,
    "m_correct": "correct sums",
    "m_random": "fabricated answers",
    "m_recover": "recovery",
    "c18_correct": "sum + 18 from correct sums",
    "c18_random": "sum + 18 from fabricated answers",
    "c3_correct": "sum + 3 from correct sums",
    "c3_random": "sum + 3 from fabricated answers",
    "c18ctl_correct": "control for + 18",
    "c3ctl_correct": "control for + 3",
    "d_correct": "conditional rule from correct sums",
    "d_random": "conditional rule from fabricated answers",
    "dctl_correct": "control for the conditional rule from correct sums",
    "dctl_random": "control for the conditional rule from fabricated answers",
}

TARGETS: dict[str, str] = {
    "correct": "correct sum",
    "fabricated": "fabricated answer",
    "plus18": "sum + 18",
    "plus3": "sum + 3",
    "ctl18": "sum + random offset 1..18",  # the target is the sum plus the offset drawn (manual 5.8)
    "ctl3": "sum + random offset 1..3",
    "cond": "conditional rule",
    "condctl": "shuffled conditional answers",
}


def model_name(key: str) -> str:
    return MODELS[key]


def target_name(key: str) -> str:
    return TARGETS[key]


# The plain names a key had before today's, by kind: a session's files written then still read (a label
# changed here gets its former name added here, so that its old sessions keep their keys). The controls' targets
# were named for their offset alone until 2026-12-06.
FORMER: dict[str, dict[str, str]] = {
    "model": {},
    "target": {"random offset 1..18": "ctl18", "random offset 1..3": "ctl3"},
    "group": {},
}
VOCABULARY = Vocabulary({"model": MODELS, "target": TARGETS, "group": GROUPS}, FORMER)


# A table's label column and its key column: ``keyed("model", "m_recover")`` ->
# ``{"model": "recovery", "model_key": "m_recover"}`` (``cctk.core.labels.KEY_COLUMNS``).
keyed = VOCABULARY.keyed


FIGURES: dict[str, str] = {
    **{f"heatmap:{key}": f"heatmap {name}" for key, name in MODELS.items()},
    "heatmap:m_random:correct": "heatmap fabricated answers on the correct sum",
    "profile:fabricated": "profile fabricated answers",
    "bars": "before and after fine-tuning on fabricated answers",
    "profile:correct": "profile correct sums and recovery",
    "profile:plus18": "profile sum + 18",
    "profile:plus3": "profile sum + 3",
    "profile:cond": "profile conditional rule",
    "deviation:m_correct": "deviation from correct sums",
    "deviation:m_random": "deviation from fabricated answers",
    "synthesis": "synthesis",
    "loss": "training loss",
    "curves": "learning curves",
}


# A heatmap's caption in report.html names only the colours it has: held-out additions (green and orange) where
# the model has them, and those left out (hatched gray) where there are some (the catalog's ``Spec.shows``).
_HEATMAP = (
    "Probability on the target in every addition (first addend a in rows, second addend b in columns). Blue: the "
    "top choice is the target, red: it is not"
)
_HELD = "; green and orange: the same for held-out additions"
_LEFT_OUT = (
    "; hatched gray: held-out additions left out of the results because the fabricated answer already equals the target"
)
_SECOND_LINE = ". Second line: target | chosen answer."
HEATMAP_HELD = "heatmap, held out"  # figure_about's entry of a heatmap with held-out additions
HEATMAP_LEFT_OUT = "heatmap, held out and left out"  # and with held-out additions left out

# What each kind of figure shows: the caption report.html gives it after its title.
FIGURE_ABOUT: dict[str, str] = {
    "heatmap": _HEATMAP + _SECOND_LINE,  # a model trained on every addition it is read on
    HEATMAP_HELD: _HEATMAP + _HELD + _SECOND_LINE,
    HEATMAP_LEFT_OUT: _HEATMAP + _HELD + _LEFT_OUT + _SECOND_LINE,
    "profile": "Mean probability of each candidate answer over the 81 additions (lines, left axis) and how many "
    "additions have each answer as their target (bars, right axis). Bands: answers the corpus can "
    "ask for (blue) and cannot (red), with each model's share of probability in each.",
    "bars": "Probability of every candidate answer of one addition before (blue) and after (orange) fine-tuning "
    "on fabricated answers; the strong colour marks the answer that is right in each context, the dark "
    "outline each side's top choice.",
    "deviation": "Held-out additions by deviation (top choice minus the rule's target, for both series: the "
    "control is read against the rule's target too), for the rule-trained "
    "model (green) and its control (gray). Blue band: the smallest band holding 90% of the "
    "rule-trained model's deviations; the counts above say how many additions of each fall in each band.",
    "synthesis": "For every model, the share of additions whose top choice is its own target, with its exact 95% "
    "interval: blue seen, green held out, gray held out by a control, dark gray the base model.",
    "loss": "Training loss per epoch of every fine-tuning run, on a log scale: the main sequence in colour, the "
    "rule and control runs in gray (their first and last losses are in the fine-tuning runs' table).",
    "curves": "Each arm measured after every epoch (cctk run --curves): the share of additions whose top choice is "
    "its own target, on the seen (blue) and held-out (green, dashed) additions, or all 81 (blue) for "
    "the models trained on all of them.",
}
# How manual 2.0.0 reads each kind of chart (its section 7), where it says: the sentence that follows what a
# chart shows in every caption of it (report.html's and a paper's).
READINGS: dict[str, str] = {
    "heatmap": "The fill is read on one fixed scale, 0 to 100%, in every heatmap but the base model's (its "
    "observed range): the same scale is what lets two heatmaps be compared by eye.",
    "profile": "The two axes have the same number of intervals, so one set of gridlines serves both; the share "
    "above a band is the share of each model's probability that falls inside it (the fabricated answers' "
    "profile has no bands: every value from 2 to 36 can be a fabricated answer).",
    "deviation": "The band is fitted to the rule-trained model, so the 90% of its additions inside it is true by "
    "construction; what carries information is the half-width k and how many of the control's additions "
    "fall inside the same band.",
    "synthesis": "A model trained on all 81 additions has one point (no held-out group); held out means held out of "
    "the model's own corpus (the recovery model's were learned, correct, by the correct-sums model it descends "
    "from); a rule is read against its control on the held-out additions, which fixes what chance and memory "
    "alone produce.",
}


def read_as(about: dict[str, str]) -> dict[str, str]:
    """``about`` (what each kind of chart shows) with the manual's reading of that kind after it (``READINGS``); an
    entry for some charts of a kind (``heatmap, held out``) is read as its kind (before the comma)."""
    read = {key: READINGS.get(key.split(",")[0]) for key in about}
    return {key: f"{text} {read[key]}" if read[key] else text for key, text in about.items()}


FIGURE_ABOUT = read_as(FIGURE_ABOUT)  # and the manual's reading of each kind

# What each kind of its figures shows in a paper's caption (cctk report --style paper): the paper style's colours,
# markers and lines (cctk's shared kinds as cctk says them), each with the manual's reading after it.
PAPER_FIGURE_ABOUT: dict[str, str] = read_as(
    {
        **SHARED_PAPER_ABOUT,
        "profile": "Mean probability of each candidate answer over the 81 additions (lines, left axis; each model "
        "its own colour, marker and line style) and how many additions have each answer as their target (gray "
        "bars, right axis).",
        "deviation": "Held-out additions by deviation (top choice minus the rule's target, for both series: the "
        "control is read against the rule's target too), for the rule-trained model (blue) and its control "
        "(gray). Light blue band: the smallest band holding 90% of the rule-trained model's deviations.",
        "synthesis": "For every model, the share of additions whose top choice is its own target, with its exact "
        "95% interval: seen (blue circles), held out (vermillion squares), held out by a control (gray "
        "triangles), the base model on all 81 additions (black diamond).",
        "curves": "Each arm measured after every epoch (cctk run --curves): the share of additions whose top "
        "choice is its own target, on the seen (blue, solid) and held-out (vermillion, dashed) additions, or all "
        "81 (blue) for the models trained on all of them.",
    }
)

# The headers of its tables' own columns in a paper and report.html (cctk's shared ones: core.labels.TABLE_HEADERS).
HEADERS: dict[str, str] = {
    "condition": "Condition",
    "rule": "Rule",
    "control": "Control",
    "hits_recovery_seen": "Recovery corpus",
    "hits_recovery_heldout": "Held out of it",
    "hits_rule": "Rule hits",
    "hits_control": "Control hits",
    "prob_target_recovery_seen": "P(target), recovery corpus",
    # held out of the recovery run: the fabricated-answers model, trained on all 81, has no held-out group of its own
    "prob_target_recovery_heldout": "P(target), held out of it",
    "surprise_recovery_seen": "Surprise, recovery corpus",
    "surprise_recovery_heldout": "Surprise, held out of it",
    "surprise_gap": "Surprise gap",
    "mass_impossible": "Mass above 18",
    "n_excluded": "Left out",
    "rule_offset": "Rule offset",
    "plus18": "+18",
    "plus9": "+9",
    "plain_sum": "+0",
    "other": "Other",
    "coverage": "Coverage",
    "k": "k (95% CI)",
    "n_rule": "n rule",
    "n_control": "n control",
    "rule_inside": "Rule inside",
    "control_inside": "Control inside",
    "odds_ratio": "Odds ratio",
    "p_value": "p",
    "p_adjusted": "p (Holm)",
    # cctk compare's tables (cctk.manuals.v2.compare): the runs pooled over seeds
    "contrast": "Contrast",
    "verdict": "Verdict",
    "runs_agreeing": "Runs agreeing",
    "direction": "Direction",
    "chi2": "CMH chi-square",
    "p_two_sided": "p, two-sided",
    "p_one_sided": "p, one-sided",
    "p_pooled": "p (exact CMH)",
    "odds_ratio_mh": "Odds ratio (MH)",
    "bd_statistic": "Breslow-Day",
    "p_heterogeneity": "p (Breslow-Day)",
    "seeds_for_80_power": "Runs for 80% power",
    "all_mean": "All additions",
    "seen_mean": "Seen",
    "heldout_mean": "Held out",
    "distance": "Distance",
    "answer": "Fabricated answer",
    "additions": "Additions",
    "share": "Share",
    "mean_prob": "P(fabricated)",
    "part": "Part",
    "interval": "Interval",
}


def figure_name(key: str) -> str:
    """The plain name of one of manual 2.0.0's figures."""
    return FIGURES[key]


TABLES: dict[str, str] = {
    "table01": "corpus absorption",
    "table02": "recovery",
    "table03": "training loss per epoch, Parts A and B",
    "table04": "simple rules and controls",
    "table05": "conditional rule and controls",
    "table06": "conditional rule hits by condition",
    "table07": "conditional rule offsets",
    "table08": "deviation bands",
    "table09": "synthesis shares",
    "table10": "rules against controls",
    "table11": "fine-tuning runs",
}

_INTERVAL = "lo, hi: the exact (Clopper-Pearson) 95% interval of that share of hits"
_SPLIT_COLUMNS = (
    "hits_seen / n_seen: additions seen in fine-tuning whose top choice is the target, and how many "
    "there are, with lo_seen, hi_seen, the exact (Clopper-Pearson) 95% interval of the share; "
    "prob_target_seen: mean probability on the target; surprise_seen: mean negative "
    "log-probability per token of the target (the unit of the training loss); the same with _heldout "
    "for the held-out additions; n_excluded: held-out additions left out because the fabricated "
    "answer already equals the target"
)

TABLE_CAPTIONS: dict[str, str] = {
    "table01": "Part A, corpus absorption: the base model, the correct-sums model and the fabricated-answers model, "
    "each scored on both targets over all 81 additions. hits / n: additions whose top choice is the "
    f"target; {_INTERVAL}; prob_target: mean probability on the target; mass_impossible: mean "
    "probability on answers above 18, which no correct sum reaches.",
    "table02": "Part B, recovery: the fabricated-answers model and the recovery model (trained back on the correct "
    "sums of the seen additions), scored on the correct sum over the recovery run's two groups: "
    "recovery_seen, the additions of the recovery corpus, and recovery_heldout, those held out of it "
    "(the fabricated-answers model, trained on all 81 additions, saw both groups, and the correct-sums model "
    "it was trained from had learned the correct sums of both). hits / n with lo, hi, "
    "the exact (Clopper-Pearson) 95% interval of the share; prob_target: mean probability on the "
    "target; surprise: mean negative log-probability per token of the target; surprise_gap: surprise "
    "on recovery_heldout minus recovery_seen.",
    "table03": "Training loss per epoch of the Part A and B runs: one column per model, the mean over the epoch's "
    "batches of each batch's mean loss per answer token (prompt masked).",
    "table04": "Part C, simple rules (sum + 18, sum + 3) from both parents and their controls (sum plus a random "
    "offset), each on its own target. " + _SPLIT_COLUMNS + "; parent: the model it was trained from.",
    "table05": "Part D, the conditional rule (sum + 18 if a >= b, else sum + 9) and its control (the rule's answers "
    "shuffled over the additions), from both parents, each on its own target. "
    + _SPLIT_COLUMNS
    + "; parent: the model it was trained from.",
    "table06": "Part D, hits of the conditional rule and its controls by condition (a > b, a = b, a < b): "
    "hits_seen / n_seen and hits_heldout / n_heldout count the additions of that condition whose top "
    "choice is the model's own target, seen and held out, each with lo, hi, the exact "
    "(Clopper-Pearson) 95% interval of the share.",
    "table07": "Part D, offsets on the held-out additions, per condition: top choice minus the correct sum, counted "
    "as + 18 (plus18), + 9 (plus9), 0 (plain_sum) or anything else (other); rule_offset: the offset the "
    "rule asks in that condition (+ 18 for a >= b, + 9 for a < b), so that an offset of the other "
    "condition (the model learned both shifts but not when to use each) is told from the right one; "
    "n: held-out additions of that condition read.",
    "table08": "Part D, deviation bands: k is the smallest half-width such that a share 'coverage' of the "
    "rule-trained model's held-out deviations (top choice minus the rule's target) lie within plus or "
    "minus k; k_lo, k_hi: bootstrap 95% interval of k (percentiles of 2000 resamples of the held-out deviations, "
    "drawn from the run's seed); n_rule, n_control: held-out "
    "additions of each model; rule_inside, control_inside: share of each model's deviations within the "
    "band, the control's deviations also taken from the rule's target (not the control's own).",
    "table09": "Synthesis: for every model, the share of additions whose top choice is its own target, with an "
    "exact (Clopper-Pearson) 95% interval. group: all additions (models trained on all 81, and the "
    "base model), seen or held out (of the model's own corpus: the recovery model's held-out additions had "
    "their correct sums learned by the correct-sums model it descends from); hits / n; share = hits / n; "
    "lo, hi: the interval.",
    "table10": "Each rule against its control on the held-out additions: hits_rule / n_rule and hits_control / "
    "n_control count top choices on each model's own target, each with lo, hi, the exact "
    "(Clopper-Pearson) 95% interval of the share; odds_ratio: the sample odds ratio (rule hits x control "
    "misses over rule misses x control hits, as scipy's fisher_exact gives it; cctk compare's per_run gives the "
    "conditional maximum-likelihood one); p_value: a one-sided Fisher exact test that the rule-trained model "
    "hits more often; p_adjusted: that p Holm-adjusted over the rules "
    "of this run. One run supports statements about this run only: cctk sweep --seeds and cctk "
    "compare turn seeds into findings.",
    "table11": "Fine-tuning runs: parent model, training examples (corpus size with repeats), optimizer steps, "
    "training time in seconds, examples per second (every epoch's examples over the training time), mean loss of the "
    "first and the last epoch, and "
    "peak GPU memory in bytes (every model held on the GPU while the run trained; 0 on a CPU) and the "
    "process's peak resident memory in bytes while the run trained on a CPU (0 on a GPU).",
}

# The captions of the tables in a paper: the same facts as TABLE_CAPTIONS, in the words of the headers.
PAPER_TABLE_CAPTIONS: dict[str, str] = {
    "table01": "Corpus absorption (Part A): the base model, the correct-sums model and the fabricated-answers model, "
    f"each scored on both targets over all 81 additions. Hits: additions whose top choice is the target; "
    f"{_COUNT}. P(target): mean probability on the target; mass above 18: mean probability on answers "
    "above 18, which no correct sum reaches.",
    "table02": "Recovery (Part B): the fabricated-answers model and the recovery model, trained back on the correct "
    "sums of the seen additions, scored on the correct sum over the additions of the recovery corpus and "
    "those held out of it (whose correct sums the correct-sums model, two steps back, had learned); "
    f"{_COUNT}. Surprise: mean negative log-probability per token of the target; "
    "surprise gap: held out minus recovery corpus.",
    "table03": "Training loss per epoch of the Part A and B runs: the mean over the epoch's batches of each "
    "batch's mean loss per answer token (prompt masked).",
    "table04": "Simple rules (Part C), sum + 18 and sum + 3 from both parents, and their controls (sum plus a random "
    f"offset), each on its own target, on the seen and the held-out additions; {_COUNT}. Surprise: mean "
    "negative log-probability per token of the target; left out: held-out additions whose fabricated "
    "answer already equals the target.",
    "table05": "The conditional rule (Part D: sum + 18 if a >= b, else sum + 9) and its control (the rule's answers "
    "shuffled over the additions), from both parents, each on its own target; "
    f"{_COUNT}. Surprise and left out as in the simple rules' table.",
    "table06": "Hits of the conditional rule and its controls by condition (a > b, a = b, a < b), seen and never "
    f"seen; {_COUNT}.",
    "table07": "Offsets on the held-out additions by condition: top choice minus the correct sum, counted as +18, "
    "+9, +0 (the plain sum) or other; rule offset: the offset the rule asks in that condition; n: "
    "held-out additions of that condition.",
    "table08": "Deviation bands: k is the smallest half-width such that a share (coverage) of the rule-trained "
    "model's held-out deviations (top choice minus the rule's target) lie within plus or minus k, with "
    "its bootstrap 95% interval (percentiles of 2000 resamples drawn from the run's seed); rule inside, control "
    "inside: the share of each model's "
    "deviations within the band, the control's also taken from the rule's target.",
    "table09": "Synthesis: for every model, the additions whose top choice is its own target; group: all additions "
    "(models trained on all 81, and the base model), seen or held out of the model's own corpus (the recovery "
    f"model's were learned, correct, by the correct-sums model it descends from); {_COUNT}.",
    "table10": "Each rule against its control on the held-out additions, hits on each model's own target; "
    f"{_COUNT}. Odds ratio: the sample odds ratio (rule hits x control misses over rule misses x control "
    "hits); p: a one-sided Fisher exact test that the rule-trained model hits more often; p (Holm): "
    "Holm-adjusted over the rules of this run. One run supports statements about this run only.",
    "table11": "Fine-tuning runs: parent model, training examples (corpus size with repeats), optimizer steps, "
    "training time, examples per second (every epoch's examples over the training time), mean loss of the first and "
    "the last epoch, peak GPU memory "
    "(every model held on the GPU while the run trained; none on a CPU) and peak RSS (the resident memory "
    "of the process while the run trained on a CPU).",
}

# Beside a run's synthesis (report.html): what one run can and cannot say, and how seeds become findings.
# ``{model}`` and ``{profile}``: the run's own, so that the command repeats its recipe over seeds.
SINGLE_RUN = (
    "One run supports within-run statements only: table10 tests each rule against its control on "
    "this run's held-out additions, and the next seed may not agree. To turn seeds into findings, "
    "run the same recipe over several seeds, cctk sweep --models {model} --seeds 5 --profile {profile} "
    "(with --set NAME=VALUE for any recipe value this run overrode; --resume SWEEP_ID continues it), then "
    "cctk compare --sweep SWEEP_ID --out DIR: its findings.csv says for each rule whether it holds across "
    "the seeds (supported, inconsistent, not supported) and how many seeds it would need."
)

SECTIONS: dict[str, str] = {  # report section key -> heading (manual 2.0.0)
    "A": "Part A: corpus absorption",
    "B": "Part B: recovery",
    "C": "Part C: simple rules",
    "D": "Part D: the conditional rule",
    "synthesis": "Synthesis",
    "runs": "Training: the loss and the record of every run",
}
