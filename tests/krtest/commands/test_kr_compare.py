"""KR-Test runs in ``cctk compare``: tables by hand, exact McNemar, runs gathered from a real MLflow store."""

import math
import re

import mlflow
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from scipy import stats

from cctk.cli.main import cli
from cctk.krtest.commands.compare import KrArm, mcnemar_exact, paired_table, pooled_table, runs_table
from cctk.store import tracking


def items(correct, contexts=None):
    n = len(correct)
    return pd.DataFrame(
        {"line": range(1, n + 1), "location": [0] * n, "context": contexts or ["c"] * n, "correct": correct}
    )


def test_mcnemar_exact_by_hand():
    # 7 items only the first arm got right, 1 only the second: two-sided binomial tail of 8 at p = 1/2
    assert mcnemar_exact(7, 1) == pytest.approx(2 * (1 + 8) / 2**8)  # 0.0703125
    assert mcnemar_exact(1, 7) == mcnemar_exact(7, 1)
    assert mcnemar_exact(10, 0) == pytest.approx(2 / 2**10)
    assert mcnemar_exact(3, 3) == 1.0 and mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(12, 4) == pytest.approx(stats.binomtest(4, 16).pvalue)


def test_tables_by_hand():
    a0 = items([True] * 6 + [False] * 4)  # seed 0: 6 / 10
    b0 = items([True] * 3 + [False] * 3 + [True] * 1 + [False] * 3)  # 4 / 10; only a: 3, only b: 1
    a1 = items([True] * 7 + [False] * 3, ["d"] * 10)  # seed 1: 7 / 10, other items
    b1 = items([False] * 7 + [True] * 1 + [False] * 2, ["d"] * 10)  # 1 / 10; only a: 7, only b: 1
    arms = [
        KrArm("r1", "full", "m", 0, "s0", a0),
        KrArm("r2", "blind", "m", 0, "s0", b0),
        KrArm("r3", "full", "m", 1, "s1", a1),
        KrArm("r4", "blind", "m", 1, "s1", b1),
    ]
    runs = runs_table(arms)
    assert runs.correct.tolist() == [6, 4, 7, 1] and runs.accuracy.tolist() == [0.6, 0.4, 0.7, 0.1]
    pooled = pooled_table(arms).set_index("arm")
    t = stats.t.ppf(0.975, 1) * np.std([0.6, 0.7], ddof=1) / math.sqrt(2)
    assert pooled.loc["full", "mean_accuracy"] == pytest.approx(0.65)
    assert (pooled.loc["full", "t_lo"], pooled.loc["full", "t_hi"]) == pytest.approx((0.65 - t, min(1.0, 0.65 + t)))
    assert (pooled.loc["full", "correct"], pooled.loc["full", "items"]) == (13, 20)
    ci = stats.binomtest(13, 20).proportion_ci(method="exact")
    assert (pooled.loc["full", "lo"], pooled.loc["full", "hi"]) == pytest.approx((ci.low, ci.high))
    paired = paired_table(arms)
    assert paired.seeds.tolist() == ["0", "1", "all"]  # no pair across the two seeds' different items
    assert paired[["both", "only_a", "only_b", "neither"]].to_numpy().tolist() == [
        [3, 3, 1, 3],
        [0, 7, 1, 2],
        [3, 10, 2, 5],
    ]
    assert paired.p_mcnemar.tolist() == pytest.approx(
        [mcnemar_exact(3, 1), 2 * (1 + 8) / 256, stats.binomtest(2, 12).pvalue]
    )
    assert paired.accuracy_a.tolist() == pytest.approx([0.6, 0.7, 0.65])


def log_arm(store, experiment, name, arm, correct, parent=None, params=None, tmp=None):
    run = store.start(experiment, name, {"cctk.kind": "krtest", "cctk.arm": arm}, parent=parent)
    run.params(params or {})
    folder = tmp / run.run_id
    folder.mkdir(parents=True)
    items(correct).to_csv(folder / "items.csv", index=False)
    run.files(folder / "items.csv")
    run.end()
    return run


def test_compare_gathers_kr_runs_from_mlflow(tracking_uri, tmp_path):
    store = tracking.connect(tracking_uri)
    experiment = store.experiment()
    study = store.start(experiment, "study", {"cctk.kind": "krtest-study"})
    study.params({"seed": 3, "model": "tiny"})
    log_arm(store, experiment, "blind baseline", "blind", [True, False, False, False, True, False], study, tmp=tmp_path)
    log_arm(
        store,
        experiment,
        "full fine-tuning",
        "full",
        [True, True, True, True, True, False],
        study,
        {"seed": 3},
        tmp=tmp_path,
    )
    study.end()
    lone = log_arm(
        store, experiment, "krtest eval ckpt-100", "blind", [True] * 6, None, {"model": "ckpt-100"}, tmp=tmp_path
    )
    out = tmp_path / "cmp"
    result = CliRunner().invoke(cli, ["compare", "--runs", f"{study.run_id},{lone.run_id}", "--out", str(out)])
    assert result.exit_code == 0, result.output
    runs = pd.read_csv(out / "tables" / "kr_runs" / "kr_runs.csv")
    assert runs.arm.tolist() == ["blind baseline", "full fine-tuning", "ckpt-100 (blind)"]
    assert runs.seed.tolist()[:2] == [3, 3] and runs.model.tolist() == ["tiny", "tiny", "ckpt-100"]
    paired = pd.read_csv(out / "tables" / "kr_paired" / "kr_paired.csv")
    first = paired.iloc[0]
    assert (first.arm_a, first.arm_b, first.only_a, first.only_b) == ("blind baseline", "full fine-tuning", 0, 3)
    assert first.p_mcnemar == pytest.approx(0.25)  # 3 discordant, all one way: 2 / 2**3
    assert len(paired) == 3  # the lone run pairs with both arms: the same items
    page = (out / "compare.html").read_text()
    assert page.count("<h2 ") == 3 and ">KR-Test arms compared on the same items</h2>" in page
    # as the LaTeX prints them (before: run_id, only_a, p_mcnemar over an accuracy and its lo, hi apart)
    headers = set(re.findall(r"<th[^>]*>([^<]+)</th>", page))
    assert {"Arm", "Only the first", "p (McNemar)", "Accuracy", "Pooled accuracy"} <= headers
    assert not {h for h in headers if "_" in h}, headers
    assert ">1 (0.541\u20131)</td>" in page  # ckpt-100's 6 of 6 with its exact interval, in one cell
    compare = [
        r
        for r in mlflow.search_runs(search_all_experiments=True, output_format="list")
        if r.data.tags.get("cctk.kind") == "compare"
    ]
    assert len(compare) == 1 and compare[0].data.params["kind"] == "krtest"
    assert result.output.strip().splitlines()[-1] == f"MLflow UI: cctk ui {compare[0].info.run_id}"


def test_compare_refuses_a_mix_and_an_unfinished_arm(tracking_uri, tmp_path):
    store = tracking.connect(tracking_uri)
    experiment = store.experiment()
    kr = log_arm(store, experiment, "eval", "blind", [True, False], tmp=tmp_path)
    pipeline = store.start(experiment, "pipe", {"cctk.kind": "pipeline"})
    mixed = CliRunner().invoke(
        cli, ["compare", "--runs", f"{kr.run_id},{pipeline.run_id}", "--out", str(tmp_path / "a")]
    )
    assert mixed.exit_code == 1 and "KR-Test runs or pipelines, not both" in mixed.output
    running = store.start(experiment, "eval", {"cctk.kind": "krtest", "cctk.arm": "blind"})
    unfinished = CliRunner().invoke(cli, ["compare", "--runs", running.run_id, "--out", str(tmp_path / "b")])
    assert unfinished.exit_code == 1 and f"KR-Test run {running.run_id} is not finished" in unfinished.output


def test_compare_no_log_logs_no_run_and_one_arm_says_no_pair(tracking_uri, tmp_path):
    store = tracking.connect(tracking_uri)
    lone = log_arm(store, store.experiment(), "eval", "blind", [True, False, True], tmp=tmp_path)
    before = len(mlflow.search_runs(search_all_experiments=True, output_format="list"))
    out = tmp_path / "cmp"
    result = CliRunner().invoke(cli, ["compare", "--runs", lone.run_id, "--out", str(out), "--no-log"])
    assert result.exit_code == 0, result.output
    assert len(mlflow.search_runs(search_all_experiments=True, output_format="list")) == before  # no compare run
    lines = result.output.strip().splitlines()
    assert lines[-1] == f"3 tables in {out}; no MLflow run (--no-log)"
    assert "no two arms scored on the same items: no paired test" in lines and "Empty DataFrame" not in result.output
    assert (out / "tables" / "kr_pooled" / "kr_pooled.csv").is_file()


def test_compare_refuses_a_generation_run_and_names_what_it_takes(tracking_uri, tmp_path):
    store = tracking.connect(tracking_uri)
    generation = store.start(store.experiment(), "generate", {"cctk.kind": "krtest-generate"})
    result = CliRunner().invoke(cli, ["compare", "--runs", generation.run_id, "--out", str(tmp_path / "c")])
    assert result.exit_code == 1 and result.output.strip() == (
        f"Error: MLflow run {generation.run_id} is a KR-Test run of kind 'krtest-generate', which scores no model: "
        "cctk compare takes KR-Test eval and train runs, studies and their seed sweeps (or pipelines)"
    )
    assert not (tmp_path / "c").exists()
