"""Manual 1.0.0's tables, report sections and figures in plain words. The vocabulary both manuals share
is ``cctk.core.labels``."""

from __future__ import annotations

from ...core import labels as names

# --- Its models and figures by key. ---
# Its two models are "base" of MODELS and "v1_random": the base model fine-tuned in place on the whole
# texts of fabricated answers (its MLflow run says so in cctk.parent). Sessions written before it had a
# key of its own call it "m_random" (cctk.manuals.v1.experiment.FORMER_KEYS); its plain name never changed.

V1_MODELS: dict[str, str] = {"v1_random": "fabricated answers"}


def model_name(key: str) -> str:
    return names.BASE_MODEL if key == "base" else V1_MODELS[key]


# Its models' plain names by key, and those they had before (none changed yet): see cctk.manuals.v2.labels.FORMER.
FORMER: dict[str, dict[str, str]] = {"model": {}}
VOCABULARY = names.Vocabulary({"model": {"base": names.BASE_MODEL, **V1_MODELS}}, FORMER)


keyed = VOCABULARY.keyed  # a table's label column and its key column (``cctk.core.labels.KEY_COLUMNS``)


def figure_name(key: str) -> str:
    """The plain name of one of manual 1.0.0's figures: ``bars:3+5``, its before/after bars of 3 + 5, or ``loss``."""
    if key.startswith("bars:"):
        a, b = key.removeprefix("bars:").split("+")
        return f"before and after {a} + {b}"
    return {"loss": "training loss"}[key]


TABLES: dict[str, str] = {
    "table01": "comparison",
    "table02": "comparison summary",
    "table03": "fine-tuning run",
    "table04": "training loss per epoch",
}

TABLE_CAPTIONS: dict[str, str] = {
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
    "optimizer steps, training time in seconds, examples per second (every epoch's examples over the training time), "
    "mean loss of the first and the last "
    "epoch (whole-text loss: every token but the first, padding masked), peak GPU memory in bytes "
    "(0 on a CPU) and the process's peak resident memory in bytes while it trained on a CPU (0 on a GPU).",
    "table04": "Protocol 1.0.0, training loss per epoch: the mean whole-text loss of each epoch (Listing 9).",
}

# The captions of its tables in a paper and report.html: the same facts as TABLE_CAPTIONS, in the words of the
# headers (HEADERS), not the CSV's column names.
PAPER_TABLE_CAPTIONS: dict[str, str] = {
    "table01": "Protocol 1.0.0, the comparison (Listing 11): for each of the 81 additions, P(true sum), before: the "
    "base model's probability of the true sum before fine-tuning; fabricated answer: the answer the corpus "
    "asserts; P(fabricated), after and P(true sum), after: the fine-tuned model's probabilities of the "
    "fabricated answer and of the true sum. Each probability is a softmax over the 17 candidates 2 to 18 of "
    "the mean log-probability per answer token.",
    "table02": "Protocol 1.0.0, the comparison summarized: each probability of the comparison (and, as a check, "
    "P(fabricated), before: the base model's probability of the fabricated answer) over the 81 additions: "
    "mean, standard deviation (SD), minimum, quartiles (Q1, median, Q3) and maximum (Listing 11's "
    f"describe()); hits: additions whose top choice is that answer, {names.COUNT_CAPTION}.",
    "table03": "Protocol 1.0.0, the fine-tuning run: parent model, training examples (81 texts times the repeats), "
    "optimizer steps, training time, examples per second (every epoch's examples over the training time), mean loss "
    "of the first and the last epoch "
    "(whole-text loss: every token but the first, padding masked), peak GPU memory (none on a CPU) and "
    "peak RSS (the resident memory of the process while it trained on a CPU).",
    "table04": TABLE_CAPTIONS["table04"],
}

SECTIONS: dict[str, str] = {
    "comparison": "The comparison: before and after fine-tuning on fabricated answers",
    "runs": "Training: the loss and the record of the run",
}

FIGURE_ABOUT: dict[str, str] = {
    "bars": "Probability of every candidate answer of one addition before (blue) and after (orange) fine-tuning "
    "on fabricated answers; the strong colour marks the answer that is right in each context, the dark "
    "outline each side's top choice." + " Candidates 2 to 18; each side's probabilities are a softmax of the "
    "mean log-probability per answer token (manual 1.0.0, Listing 12).",
    "loss": "Mean whole-text training loss of each epoch of the fine-tuning run (log scale).",
}

# The headers of its tables' own columns in a paper and report.html (cctk's shared ones: core.labels.TABLE_HEADERS);
# table02 names its rows by the comparison's columns, printed with these headers too.
HEADERS: dict[str, str] = {
    "true_sum": "True sum",
    "fabricated_value": "Fabricated answer",
    "pre_ft_true_prob": "P(true sum), before",
    "post_ft_fabricated_prob": "P(fabricated), after",
    "post_ft_true_prob": "P(true sum), after",
    "pre_ft_fabricated_prob": "P(fabricated), before",
    "number": "Probability",
    "answer": "Answer",
    "mean": "Mean",
    "std": "SD",
    "min": "Min",
    "q25": "Q1",
    "median": "Median",
    "q75": "Q3",
    "max": "Max",
}
