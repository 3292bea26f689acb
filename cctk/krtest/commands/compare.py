"""KR-Test runs compared: accuracy per arm and seed, pooled over seeds, and paired exact McNemar tests.

``cctk compare --runs ID1,ID2,...`` takes KR-Test runs as well as pipelines: a run tagged
``cctk.kind=krtest`` (an eval, a train, an arm of a study) is itself; a study (``krtest-study``) stands
for its arms; a seed sweep of studies (``krtest-sweep``) for the arms of all its studies. Each arm's
``items.csv`` (one row per item: correct or not) is downloaded, and three tables are written:

    kr_runs     one row per arm run: arm, model, seed, items, correct, accuracy, exact 95% interval
    kr_pooled   one row per model and arm: runs, the mean accuracy over runs with a Student's t 95%
                interval (runs - 1 degrees of freedom), and the items pooled over runs (correct / n)
                with the exact (Clopper-Pearson) interval of the pooled share
    kr_paired   two arms (or two checkpoints) scored on the same items: per pair and seed, and pooled
                over seeds, the items both got right, only one, neither, and the exact McNemar test
                (two-sided binomial test of the discordant items, statsmodels ``mcnemar(exact=True)``)

Items are "the same" when their files' ``line``, ``location`` and ``context`` columns are equal. The
table functions are pure (``KrArm`` records in, DataFrames out); ``gather`` and ``compare`` talk to
the tracking store.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from statsmodels.stats.contingency_tables import mcnemar

from ...core.errors import CctkError
from ...core.labels import counted
from ...core.stats import clopper_pearson, t_interval
from ...outputs import comparison
from ...store.tracking import ARM, KIND, Store, TrackedRun
from .. import ARMS, RUN, STUDY_RUN, SWEEP_RUN
from ..measurement.report import HEADERS as KR_HEADERS

KINDS = (RUN, STUDY_RUN, SWEEP_RUN)
SAME_ITEMS = ["line", "location", "context"]
COUNTS = ["both", "only_a", "only_b", "neither"]  # of a pair of arms' items: both right, one only, neither
PAIRED = ["arm_a", "arm_b", "model", "seeds", "items", *COUNTS, "accuracy_a", "accuracy_b", "p_mcnemar"]
TITLES = {
    "kr_runs": "KR-Test runs",
    "kr_pooled": "KR-Test across seeds",
    "kr_paired": "KR-Test arms compared on the same items",
}
# In the words of the headers (HEADERS): compare.html and the LaTeX print these over them.
CAPTIONS = {
    "kr_runs": "KR-Test runs: for every arm run, its items, how many it got right (the true continuation scores "
    "strictly higher over the first T tokens), the accuracy and its exact (Clopper-Pearson) 95% interval.",
    "kr_pooled": "KR-Test across seeds: for every model and arm, the runs, the mean accuracy over runs with a "
    "Student's t 95% interval (runs - 1 degrees of freedom, clipped to [0, 1]; none for one run), and "
    "the items pooled over runs with the exact (Clopper-Pearson) 95% interval of the pooled accuracy.",
    "kr_paired": "KR-Test arms compared on the same items: items both arms got right, only the first, only the "
    "second, neither; the two accuracies; and the exact McNemar test (two-sided binomial test of the "
    "discordant items). Rows with seeds 'all' pool the discordant items over the seeds.",
}
# Its own columns' headers beside KR-Test's and cctk's shared ones (run_id, model, seed, runs: core.labels)
HEADERS = {
    **KR_HEADERS,
    "study": "Study",
    "seeds": "Seeds",
    "mean_accuracy": "Mean accuracy",
    "pooled_accuracy": "Pooled accuracy",
    "arm_a": "First arm",
    "arm_b": "Second arm",
    "both": "Both",
    "only_a": "Only the first",
    "only_b": "Only the second",
    "neither": "Neither",
    "accuracy_a": "Accuracy, first",
    "accuracy_b": "Accuracy, second",
    "p_mcnemar": "p (McNemar)",
}


@dataclass(frozen=True)
class KrArm:
    """One scored KR-Test arm: where it comes from and its per-item results (``items.csv``)."""

    run_id: str
    label: str  # the arm's plain name in a study, else the run's name
    model: str
    seed: int | None
    study: str  # the study run it belongs to ("" for a run of its own)
    items: pd.DataFrame


def runs_table(arms: list[KrArm]) -> pd.DataFrame:
    rows = []
    for arm in arms:
        n, correct = len(arm.items), int(arm.items["correct"].sum())
        lo, hi = clopper_pearson(correct, n)
        rows.append(
            {
                "run_id": arm.run_id,
                "study": arm.study,
                "model": arm.model,
                "arm": arm.label,
                "seed": arm.seed,
                "items": n,
                "correct": correct,
                "accuracy": correct / n,
                "lo": lo,
                "hi": hi,
            }
        )
    return pd.DataFrame(rows).astype({"seed": "Int64"})


def pooled_table(arms: list[KrArm]) -> pd.DataFrame:
    runs = runs_table(arms)
    rows = []
    for (model, label), part in runs.groupby(["model", "arm"], sort=False):
        mean, t_lo, t_hi = t_interval(part["accuracy"])
        correct, n = int(part["correct"].sum()), int(part["items"].sum())
        lo, hi = clopper_pearson(correct, n)
        rows.append(
            {
                "model": model,
                "arm": label,
                "runs": len(part),
                "seeds": ",".join(str(s) for s in part["seed"].dropna()),
                "mean_accuracy": mean,
                "t_lo": t_lo,
                "t_hi": t_hi,
                "correct": correct,
                "items": n,
                "pooled_accuracy": correct / n,
                "lo": lo,
                "hi": hi,
            }
        )
    return pd.DataFrame(rows)


def paired_counts(a: pd.DataFrame, b: pd.DataFrame) -> dict[str, int]:
    """Both right, only ``a``, only ``b``, neither, over the same items (in the same order)."""
    x, y = a["correct"].astype(bool).to_numpy(), b["correct"].astype(bool).to_numpy()
    return {
        "both": int((x & y).sum()),
        "only_a": int((x & ~y).sum()),
        "only_b": int((~x & y).sum()),
        "neither": int((~x & ~y).sum()),
    }


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value of the discordant counts (1.0 when there are none)."""
    if only_a + only_b == 0:
        return 1.0
    return float(mcnemar([[0, only_a], [only_b, 0]], exact=True).pvalue)


def same_items(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Equal ``line``, ``location`` and ``context`` columns (those both files have: older ones lack the last two)."""
    columns = [c for c in SAME_ITEMS if c in a.columns and c in b.columns]
    return len(a) == len(b) and a[columns].reset_index(drop=True).equals(b[columns].reset_index(drop=True))


def paired_table(arms: list[KrArm]) -> pd.DataFrame:
    """Every pair of arms on the same items (within a study, or two runs given), then pooled over seeds."""
    rows = []
    for first, second in itertools.combinations(arms, 2):
        if (first.study != second.study and first.study and second.study) or not same_items(first.items, second.items):
            continue
        rows.append(
            {
                "arm_a": first.label,
                "arm_b": second.label,
                "model": first.model,
                "seeds": "" if first.seed is None else str(first.seed),
                **paired_counts(first.items, second.items),
            }
        )
    if not rows:
        return pd.DataFrame(columns=PAIRED)
    table = pd.DataFrame(rows)
    pooled = [
        {
            "arm_a": a,
            "arm_b": b,
            "model": m,
            "seeds": "all",
            **{k: int(part[k].sum()) for k in COUNTS},
        }
        for (a, b, m), part in table.groupby(["arm_a", "arm_b", "model"], sort=False)
        if len(part) > 1
    ]
    table = pd.concat([table, pd.DataFrame(pooled)], ignore_index=True) if pooled else table
    table["items"] = table[COUNTS].sum(axis=1)
    table["accuracy_a"] = (table["both"] + table["only_a"]) / table["items"]
    table["accuracy_b"] = (table["both"] + table["only_b"]) / table["items"]
    table["p_mcnemar"] = [mcnemar_exact(x, y) for x, y in zip(table["only_a"], table["only_b"], strict=True)]
    return table[PAIRED]


def tables(arms: list[KrArm]) -> dict[str, pd.DataFrame]:
    return {"kr_runs": runs_table(arms), "kr_pooled": pooled_table(arms), "kr_paired": paired_table(arms)}


# --- From the tracking store. ---


def is_kr(store: Store, runs: list[str]) -> bool:
    """Are ``--runs`` KR-Test runs? All or none of them must be; a mix fails in one line."""
    kinds = [store.get(run_id).tags.get(KIND) for run_id in runs]
    for run_id, kind in zip(runs, kinds, strict=True):
        if kind and kind.startswith("krtest") and kind not in KINDS:  # a generation or an oracle: no arm scored
            raise CctkError(
                f"MLflow run {run_id} is a KR-Test run of kind {kind!r}, which scores no model: cctk compare "
                "takes KR-Test eval and train runs, studies and their seed sweeps (or pipelines)"
            )
    kr = [k in KINDS for k in kinds]
    if any(kr) and not all(kr):
        raise CctkError("cctk compare --runs takes KR-Test runs or pipelines, not both in one comparison")
    return all(kr) and bool(runs)


def arm_runs(store: Store, run_id: str) -> list[TrackedRun]:
    """The KR arm runs ``run_id`` stands for (itself, a study's arms, a sweep's studies' arms), finished."""
    run = store.get(run_id)
    kind = run.tags.get(KIND)
    if kind == RUN:
        found = [run]
    elif kind == STUDY_RUN:
        found = sorted(
            (c for c in store.children(run) if c.tags.get(KIND) == RUN),
            key=lambda r: ARM_ORDER.get(r.tags.get(ARM, ""), len(ARM_ORDER)),  # no arm tag: last
        )
    elif kind == SWEEP_RUN:
        studies = [s for s in store.children(run) if s.tags.get(KIND) == STUDY_RUN]
        found = [
            arm
            for study in sorted(studies, key=lambda s: int(s.params.get("seed", 0)))
            for arm in arm_runs(store, study.run_id)
        ]
    else:
        raise CctkError(f"MLflow run {run_id} is not a KR-Test run (tag {KIND} is {kind!r})")
    unfinished = [r.run_id for r in found if r.status != "FINISHED"]
    if unfinished:
        raise CctkError(f"KR-Test run {unfinished[0]} is not finished ({len(unfinished)} of {len(found)} arms)")
    return found


ARM_ORDER = {key: i for i, key in enumerate(ARMS)}


def gather(store: Store, runs: list[str], folder: Path) -> list[KrArm]:
    """Every arm of ``--runs`` (each run once), its items.csv downloaded under ``folder/<run id>/``."""
    arms = []
    for run_id in runs:
        for run in arm_runs(store, run_id):
            parent = run.tags.get("mlflow.parentRunId", "")
            parent_run = store.get(parent) if parent else None
            study = parent_run if parent_run is not None and parent_run.tags.get(KIND) == STUDY_RUN else None
            in_study = study is not None
            store.download(run.run_id, folder / run.run_id)
            seed = run.params.get("seed", study.params.get("seed") if study is not None else None)
            model = run.params.get("model", study.params.get("model", "") if study is not None else "")
            arms.append(
                KrArm(
                    run.run_id,
                    label(run.tags.get(ARM, ""), model, in_study),
                    model,
                    None if seed in (None, "") else int(seed),
                    parent if in_study else "",
                    pd.read_csv(folder / run.run_id / "items.csv"),
                )
            )
    return arms


def label(arm: str, model: str, in_study: bool) -> str:
    """A study's arm by its plain name; a run of its own by its model and arm: ``ckpt-200 (blind)``."""
    return ARMS.get(arm, arm) if in_study else f"{model} ({arm.replace('_', ' ')})"


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>cctk compare: KR-Test</title>
<style>body {{ font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 24px 32px; color: #222; }}
table {{ border-collapse: collapse; font-size: 13px; }}
th, td {{ padding: 3px 9px; border-bottom: 1px solid #e2e2e2; text-align: right; }}  /* names: left, their own */
.caption {{ color: #444; font-size: 14px; max-width: 1000px; }}</style></head><body>
<h1>cctk compare: KR-Test</h1>{body}</body></html>
"""


def write(arms: list[KrArm], out: Path) -> dict[str, pd.DataFrame]:
    """The three tables (CSV, XLSX, LaTeX) under ``out/tables/<name>/`` and ``compare.html``, in place of any
    comparison written there before (``comparison.replacing``)."""
    from html import escape

    from ...outputs.html_report import plain_table
    from ...outputs.tables import write_table

    found = tables(arms)
    sections = []
    with comparison.replacing(out) as into:  # in place of any comparison written there before
        for name, table in found.items():
            write_table(table, into / "tables" / name, name, CAPTIONS[name], HEADERS)
            sections.append(
                f'<h2 id="{name}">{TITLES[name]}</h2><p class="caption">{escape(CAPTIONS[name])}</p>'
                + plain_table(table, name, HEADERS)  # as the LaTeX: plain headers, an accuracy with its interval
            )
        (into / comparison.PAGE).write_text(PAGE.format(body="\n".join(sections)), encoding="utf-8")
    return found


def compare(
    store: Store, runs: list[str], out: Path, echo: Callable[[str], None] = print, log: bool = True
) -> dict[str, pd.DataFrame]:
    """``cctk compare --runs`` on KR-Test runs: gather, write, print the pooled and paired tables, and log a run
    (``log``; ``--no-log``: none, for a reader who may not write)."""
    out = Path(out)
    comparison.check_folder(out)
    arms = gather(store, runs, out / "runs")
    if not arms:
        raise CctkError(f"no finished KR-Test arm in {','.join(runs)}")
    echo(f"comparing {len(arms)} KR-Test arms ...")
    found = write(arms, out)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        echo(found["kr_pooled"].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        paired = found["kr_paired"]
        echo(
            paired.to_string(index=False, float_format=lambda v: f"{v:.3g}")
            if len(paired)
            else "no two arms scored on the same items: no paired test"
        )
    if not log:
        echo(f"{counted(len(found), 'table')} in {out}; no MLflow run (--no-log)")
        return found
    with store.run("compare", f"compare {len(arms)} KR-Test arms", {"mlflow.source.name": "cctk compare"}) as run:
        run.params({"runs": ",".join(runs), "kind": RUN, "arms": len(arms)})
        for name in found:
            run.files(out / "tables" / name, f"tables/{name}")
        run.files(out / "compare.html")
    echo(f"{counted(len(found), 'table')} in {out}; MLflow run {run.run_id}")
    echo(store.link(run.run_id))
    return found
