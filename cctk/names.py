"""Plain-language names for everything a user sees, translated from internal keys in one place."""
from __future__ import annotations

MODELS: dict[str, str] = {
    "base": "base model",
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
    "random": "fabricated answer",
    "plus18": "sum + 18",
    "plus3": "sum + 3",
    "ctl18": "random offset 1..18",
    "ctl3": "random offset 1..3",
    "cond": "conditional rule",
    "condctl": "shuffled conditional answers",
}

GROUPS = {"seen": "seen", "heldout": "never seen", "all": "all additions"}


def model_name(key: str) -> str:
    return MODELS[key] if key in MODELS else V1_MODELS[key]


def target_name(key: str) -> str:
    return TARGETS[key]


def file_stem(text: str) -> str:
    """A plain name made safe for a file name: ``sum + 18 from correct sums`` -> ``sum_plus_18_from_correct_sums``."""
    cleaned = text.replace("+", "plus").replace(".", "_")
    return "_".join("".join(c if c.isalnum() else " " for c in cleaned).split())


# --- Outputs of a run (cctk.outputs): plain titles of the tables, figures and report sections. ---

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
_SPLIT_COLUMNS = ("hits_seen / n_seen: additions seen in fine-tuning whose top choice is the target, and how many "
                  "there are, with lo_seen, hi_seen, the exact (Clopper-Pearson) 95% interval of the share; "
                  "prob_target_seen: mean probability on the target; surprise_seen: mean negative "
                  "log-probability per token of the target (the unit of the training loss); the same with _heldout "
                  "for the never-seen additions; n_excluded: never-seen additions left out because the fabricated "
                  "answer already equals the target")

TABLE_CAPTIONS: dict[str, str] = {
    "table01": "Part A, corpus absorption: the base model, the correct-sums model and the fabricated-answers model, "
               "each scored on both targets over all 81 additions. hits / n: additions whose top choice is the "
               f"target; {_INTERVAL}; prob_target: mean probability on the target; mass_impossible: mean "
               "probability on answers above 18, which no correct sum reaches.",
    "table02": "Part B, recovery: the fabricated-answers model and the recovery model (trained back on the correct "
               "sums of the seen additions), scored on the correct sum over the recovery run's two groups: "
               "recovery_seen, the additions of the recovery corpus, and recovery_heldout, those held out of it "
               "(the fabricated-answers model, trained on all 81 additions, saw both groups). hits / n with lo, hi, "
               "the exact (Clopper-Pearson) 95% interval of the share; prob_target: mean probability on the "
               "target; surprise: mean negative log-probability per token of the target; surprise_gap: surprise "
               "on recovery_heldout minus recovery_seen.",
    "table03": "Training loss per epoch of the Part A and B runs: one column per model, the mean loss over the "
               "answer tokens (prompt masked) in each epoch.",
    "table04": "Part C, simple rules (sum + 18, sum + 3) from both parents and their controls (sum plus a random "
               "offset), each on its own target. " + _SPLIT_COLUMNS + "; parent: the model it was trained from.",
    "table05": "Part D, the conditional rule (sum + 18 if a >= b, else sum + 9) and its control (the rule's answers "
               "shuffled over the additions), from both parents, each on its own target. " + _SPLIT_COLUMNS +
               "; parent: the model it was trained from.",
    "table06": "Part D, hits of the conditional rule and its controls by condition (a > b, a = b, a < b): "
               "hits_seen / n_seen and hits_heldout / n_heldout count the additions of that condition whose top "
               "choice is the model's own target, seen and never seen, each with lo, hi, the exact "
               "(Clopper-Pearson) 95% interval of the share.",
    "table07": "Part D, offsets on the never-seen additions, per condition: top choice minus the correct sum, counted "
               "as + 18 (plus18), + 9 (plus9), 0 (plain_sum) or anything else (other); rule_offset: the offset the "
               "rule asks in that condition (+ 18 for a >= b, + 9 for a < b), so that an offset of the other "
               "condition (the model learned both shifts but not when to use each) is told from the right one; "
               "n: never-seen additions of that condition read.",
    "table08": "Part D, deviation bands: k is the smallest half-width such that a share 'coverage' of the "
               "rule-trained model's never-seen deviations (top choice minus the rule's target) lie within plus or "
               "minus k; k_lo, k_hi: bootstrap 95% interval of k (2000 resamples); n_rule, n_control: never-seen "
               "additions of each model; rule_inside, control_inside: share of each model's deviations within the "
               "band, the control's deviations also taken from the rule's target (not the control's own).",
    "table09": "Synthesis: for every model, the share of additions whose top choice is its own target, with an "
               "exact (Clopper-Pearson) 95% interval. group: all additions (models trained on all 81, and the "
               "base model), seen or never seen ('held out'); hits / n; share = hits / n; lo, hi: the interval.",
    "table10": "Each rule against its control on the never-seen additions: hits_rule / n_rule and hits_control / "
               "n_control count top choices on each model's own target, each with lo, hi, the exact "
               "(Clopper-Pearson) 95% interval of the share; odds_ratio and p_value of a one-sided Fisher exact "
               "test that the rule-trained model hits more often; p_adjusted: that p Holm-adjusted over the rules "
               "of this run. One run supports statements about this run only: cctk sweep --seeds and cctk "
               "compare turn seeds into findings.",
    "table11": "Fine-tuning runs: parent model, training examples (corpus size with repeats), optimizer steps, "
               "training time in seconds, examples per second, mean loss of the first and the last epoch, and "
               "peak GPU memory in bytes (every model held on the GPU while the run trained; 0 on a CPU).",
}

# The headers of the tables in a paper (cctk export --latex): hits<s> stands for the count hits<s> / n<s> with
# its interval lo<s>-hi<s>, printed in one cell; k for k with its interval k_lo-k_hi.
TABLE_HEADERS: dict[str, str] = {
    "model": "Model", "target": "Target", "parent": "Parent", "group": "Group", "condition": "Condition",
    "rule": "Rule", "control": "Control", "epoch": "Epoch", "n": "n",
    "hits": "Hits", "hits_seen": "Seen", "hits_heldout": "Never seen", "hits_recovery_seen": "Recovery corpus",
    "hits_recovery_heldout": "Held out of it", "hits_rule": "Rule hits", "hits_control": "Control hits",
    "prob_target": "P(target)", "prob_target_seen": "P(target), seen", "prob_target_heldout": "P(target), never seen",
    "prob_target_recovery_seen": "P(target), recovery corpus", "prob_target_recovery_heldout": "P(target), held out",
    "surprise_seen": "Surprise, seen", "surprise_heldout": "Surprise, never seen",
    "surprise_recovery_seen": "Surprise, recovery corpus", "surprise_recovery_heldout": "Surprise, held out",
    "surprise_gap": "Surprise gap", "mass_impossible": "Mass above 18", "n_excluded": "Left out",
    "rule_offset": "Rule offset", "plus18": "+18", "plus9": "+9", "plain_sum": "+0", "other": "Other",
    "coverage": "Coverage", "k": "k (95% CI)", "n_rule": "n rule", "n_control": "n control",
    "rule_inside": "Rule inside", "control_inside": "Control inside", "odds_ratio": "Odds ratio", "p_value": "p",
    "p_adjusted": "p (Holm)", "examples": "Examples", "steps": "Steps", "seconds": "Time (s)",
    "examples_per_second": "Examples/s", "loss_first_epoch": "Loss, first epoch", "loss_last_epoch": "Loss, last epoch",
    "peak_gpu_memory_bytes": "Peak GPU memory", "peak_cpu_memory_bytes": "Peak RSS",
    # protocol v1
    "true_sum": "True sum", "fabricated_value": "Fabricated answer", "pre_ft_true_prob": "P(true sum), before",
    "post_ft_fabricated_prob": "P(fabricated), after", "post_ft_true_prob": "P(true sum), after",
    "pre_ft_fabricated_prob": "P(fabricated), before",
    "number": "Probability", "answer": "Answer", "mean": "Mean", "std": "SD", "min": "Min", "q25": "Q1",
    "median": "Median", "q75": "Q3", "max": "Max", "loss": "Loss",
}

_COUNT = "a count is hits / n (share, exact Clopper-Pearson 95% interval)"
# The captions of the tables in a paper: the same facts as TABLE_CAPTIONS, in the words of TABLE_HEADERS.
PAPER_TABLE_CAPTIONS: dict[str, str] = {
    "table01": "Corpus absorption (Part A): the base model, the correct-sums model and the fabricated-answers model, "
               f"each scored on both targets over all 81 additions. Hits: additions whose top choice is the target; "
               f"{_COUNT}. P(target): mean probability on the target; mass above 18: mean probability on answers "
               "above 18, which no correct sum reaches.",
    "table02": "Recovery (Part B): the fabricated-answers model and the recovery model, trained back on the correct "
               "sums of the seen additions, scored on the correct sum over the additions of the recovery corpus and "
               f"those held out of it; {_COUNT}. Surprise: mean negative log-probability per token of the target; "
               "surprise gap: held out minus recovery corpus.",
    "table03": "Training loss per epoch of the Part A and B runs: the mean loss over the answer tokens (prompt "
               "masked) in each epoch.",
    "table04": "Simple rules (Part C), sum + 18 and sum + 3 from both parents, and their controls (sum plus a random "
               f"offset), each on its own target, on the seen and the never-seen additions; {_COUNT}. Surprise: mean "
               "negative log-probability per token of the target; left out: never-seen additions whose fabricated "
               "answer already equals the target.",
    "table05": "The conditional rule (Part D: sum + 18 if a >= b, else sum + 9) and its control (the rule's answers "
               "shuffled over the additions), from both parents, each on its own target; "
               f"{_COUNT}. Surprise and left out as in the simple rules' table.",
    "table06": "Hits of the conditional rule and its controls by condition (a > b, a = b, a < b), seen and never "
               f"seen; {_COUNT}.",
    "table07": "Offsets on the never-seen additions by condition: top choice minus the correct sum, counted as +18, "
               "+9, +0 (the plain sum) or other; rule offset: the offset the rule asks in that condition; n: "
               "never-seen additions of that condition.",
    "table08": "Deviation bands: k is the smallest half-width such that a share (coverage) of the rule-trained "
               "model's never-seen deviations (top choice minus the rule's target) lie within plus or minus k, with "
               "its bootstrap 95% interval (2000 resamples); rule inside, control inside: the share of each model's "
               "deviations within the band, the control's also taken from the rule's target.",
    "table09": "Synthesis: for every model, the additions whose top choice is its own target; group: all additions "
               f"(models trained on all 81, and the base model), seen or never seen (held out); {_COUNT}.",
    "table10": "Each rule against its control on the never-seen additions, hits on each model's own target; "
               f"{_COUNT}. Odds ratio and p of a one-sided Fisher exact test that the rule-trained model hits more "
               "often; p (Holm): Holm-adjusted over the rules of this run. One run supports statements about this "
               "run only.",
    "table11": "Fine-tuning runs: parent model, training examples (corpus size with repeats), optimizer steps, "
               "training time, examples per second, mean loss of the first and the last epoch, and peak GPU memory "
               "(every model held on the GPU while the run trained; none on a CPU).",
}

# What each kind of figure shows, in a paper's caption (cctk report --style paper): the paper style's colours,
# markers and lines; a figure's own notes (its numbers) follow.
PAPER_FIGURE_ABOUT: dict[str, str] = {
    "heatmap": "Probability on the target in every addition (first addend a in rows, second addend b in columns); "
               "the fill's hue says whether the top choice is the target, its shade how much probability the "
               "target has.",
    "profile": "Mean probability of each candidate answer over the 81 additions (lines, left axis; each model its "
               "own colour, marker and line style) and how many additions have each answer as their target (gray bars, "
               "right axis).",
    "bars": "Probability of every candidate answer of one addition before (light blue) and after (light orange) "
            "fine-tuning on fabricated answers; the strong colour (blue before, vermillion after) marks the answer "
            "that is right in each context, the dark outline each side's top choice.",
    "deviation": "Never-seen additions by deviation (top choice minus the rule's target, for both series: the "
                 "control is read against the rule's target too), for the rule-trained model (blue) and its control "
                 "(gray). Light blue band: the smallest band holding 90% of the rule-trained model's deviations.",
    "synthesis": "For every model, the share of additions whose top choice is its own target, with its exact 95% "
                 "interval: seen (blue circles), never seen (vermillion squares), never seen by a control (gray "
                 "triangles), the base model on all 81 additions (black diamond).",
    "loss": "Training loss per epoch of every fine-tuning run, on a log scale; each run has its own colour, marker "
            "and line style.",
    "curves": "Each arm measured after every epoch (cctk run --curves): the share of additions whose top choice is "
              "its own target, on the seen (blue, solid) and never-seen (vermillion, dashed) additions, or all 81 "
              "(blue) for the models trained on all of them.",
}

# Beside a run's synthesis (report.html): what one run can and cannot say, and how seeds become findings.
# ``{model}`` and ``{profile}``: the run's own, so that the command repeats its recipe over seeds.
SINGLE_RUN = ("One run supports within-run statements only: table10 tests each rule against its control on "
              "this run's never-seen additions, and the next seed may not agree. To turn seeds into findings, "
              "run the same recipe over several seeds, cctk sweep --models {model} --seeds 5 --profile {profile} "
              "(with --set NAME=VALUE for any recipe value this run overrode; --resume SWEEP_ID continues it), then "
              "cctk compare --sweep SWEEP_ID --out DIR: its findings.csv says for each rule whether it holds across "
              "the seeds (supported, inconsistent, not supported) and how many seeds it would need.")

SECTIONS: dict[str, str] = {  # report section key -> heading (manual 2.0.0)
    "A": "Part A: corpus absorption",
    "B": "Part B: recovery",
    "C": "Part C: simple rules",
    "D": "Part D: the conditional rule",
    "synthesis": "Synthesis",
    "runs": "Training: the loss and the record of every run",
}

FIGURES: dict[str, str] = {
    **{f"heatmap:{key}": f"heatmap {name}" for key, name in MODELS.items()},
    "heatmap:m_random:correct": "heatmap fabricated answers on the correct sum",
    "profile:random": "profile fabricated answers",
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


# What each kind of figure shows: the caption report.html gives it after its title.
FIGURE_ABOUT: dict[str, str] = {
    "heatmap": "Probability on the target in every addition (first addend a in rows, second addend b in "
               "columns). Blue: the top choice is the target, red: it is not; green and orange: the same for "
               "never-seen additions; hatched gray: never-seen additions left out of the results because the "
               "fabricated answer already equals the target. Second line: target | chosen answer.",
    "profile": "Mean probability of each candidate answer over the 81 additions (lines, left axis) and how many "
               "additions have each answer as their target (bars, right axis). Bands: answers the corpus can "
               "ask for (blue) and cannot (red), with each model's share of probability in each.",
    "bars": "Probability of every candidate answer of one addition before (blue) and after (orange) fine-tuning "
            "on fabricated answers; the strong colour marks the answer that is right in each context, the dark "
            "outline each side's top choice.",
    "deviation": "Never-seen additions by deviation (top choice minus the rule's target, for both series: the "
                 "control is read against the rule's target too), for the rule-trained "
                 "model (green) and its control (gray). Blue band: the smallest band holding 90% of the "
                 "rule-trained model's deviations; the counts above say how many additions of each fall in each band.",
    "synthesis": "For every model, the share of additions whose top choice is its own target, with its exact 95% "
                 "interval: blue seen, green never seen, gray never seen by a control, dark gray the base model.",
    "loss": "Training loss per epoch of every fine-tuning run, on a log scale: the main sequence in colour, the "
            "rule and control runs in gray.",
    "curves": "Each arm measured after every epoch (cctk run --curves): the share of additions whose top choice is "
              "its own target, on the seen (blue) and never-seen (green, dashed) additions, or all 81 (blue) for "
              "the models trained on all of them.",
}


def table_title(name: str) -> str:
    return TABLES[name]


def figure_name(key: str) -> str:
    """The plain name of a figure; ``bars:3+5`` is protocol v1's before/after bars of 3 + 5."""
    if key not in FIGURES and key.startswith("bars:"):
        a, b = key.removeprefix("bars:").split("+")
        return f"before and after {a} + {b}"
    return FIGURES[key]


# --- Protocol v1 (manual 1.0.0, cctk.v1): its models, tables, figures and report sections. ---
# Its two models are "base" of MODELS and "v1_random": the base model fine-tuned in place on the whole
# texts of fabricated answers (its MLflow run says so in cctk.parent). Sessions written before it had a
# key of its own call it "m_random" (cctk.v1.experiment.FORMER_KEYS); its plain name never changed.

V1_MODELS: dict[str, str] = {"v1_random": "fabricated answers"}

V1_TABLES: dict[str, str] = {
    "table01": "comparison",
    "table02": "comparison summary",
    "table03": "fine-tuning run",
    "table04": "training loss per epoch",
}

V1_TABLE_CAPTIONS: dict[str, str] = {
    "table01": "Protocol 1.0.0, the comparison table (manual 1.0.0, Listing 11): for each of the 81 additions, "
               "pre_ft_true_prob, the base model's probability of the true sum before fine-tuning; "
               "fabricated_value, the answer the corpus asserts; post_ft_fabricated_prob and post_ft_true_prob, "
               "the fine-tuned model's probability of the fabricated value and of the true sum. Each probability is "
               "a softmax over the 17 candidates 2..18 of the mean log-probability per answer token.",
    "table02": "Protocol 1.0.0, the comparison summarized: each probability of the comparison table (and, as a "
               "check, the base model's probability of the fabricated value) over the 81 additions: mean, standard "
               "deviation, minimum, quartiles and maximum (Listing 11's describe()); hits / n: additions whose top "
               "choice is that answer, with lo, hi, the exact (Clopper-Pearson) 95% interval of the share.",
    "table03": "Protocol 1.0.0, the fine-tuning run: parent model, training examples (81 texts times the repeats), "
               "optimizer steps, training time in seconds, examples per second, mean loss of the first and the last "
               "epoch (whole-text loss: every token but the first, padding masked), and peak GPU memory in bytes "
               "(0 on a CPU).",
    "table04": "Protocol 1.0.0, training loss per epoch: the mean whole-text loss of each epoch (Listing 9).",
}

V1_SECTIONS: dict[str, str] = {
    "comparison": "The comparison: before and after fine-tuning on fabricated answers",
    "runs": "Training: the loss and the record of the run",
}

V1_FIGURE_ABOUT: dict[str, str] = {
    "bars": FIGURE_ABOUT["bars"] + " Candidates 2 to 18; each side's probabilities are a softmax of the "
                                   "mean log-probability per answer token (manual 1.0.0, Listing 12).",
    "loss": "Mean whole-text training loss of each epoch of the fine-tuning run (log scale).",
}
