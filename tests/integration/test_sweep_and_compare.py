"""Sweeps end to end on the tiny model: 2 seeds on a local Ray instance, their comparison from MLflow
(findings across the seeds, one row per contrast), the same two seeds run locally, killed with SIGKILL in
the second cell and resumed to the same tables, and a recipe sweep of Parts A and C over two learning
rates, compared one row per rate."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import mlflow
import pandas as pd
import pytest

from cctk.manuals.v2.design import models_for
from cctk.store.session import rebuild

SEEDS = (11, 12)  # on Ray, and locally killed in the second cell and resumed: two seeds show every step of both


def cctk(*args, env, **kwargs):
    return subprocess.run(
        [sys.executable, "-m", "cctk", *args], env=env, capture_output=True, text=True, timeout=1500, **kwargs
    )


def cells(client, sweep_id):
    experiment = client.get_experiment_by_name("cctk").experiment_id
    return client.search_runs([experiment], f"tags.`cctk.sweep` = '{sweep_id}' and tags.`cctk.kind` = 'pipeline'")


def tables_by_seed(client, sweep_id) -> dict[int, dict]:
    out = {}
    for run in cells(client, sweep_id):
        if run.info.status == "FINISHED":
            back = rebuild(os.path.join(client.get_run(sweep_id).data.params["out"], run.data.tags["cctk.session"]))
            out[back.info.config.seed] = back.tables
    return out


@pytest.fixture(scope="module")
def env(tmp_path_factory, new_store):
    root = tmp_path_factory.mktemp("sweeps")
    return root, {
        **os.environ,
        "MLFLOW_TRACKING_URI": new_store(root),
        "OMP_NUM_THREADS": "1",
        "CCTK_CACHE": str(root / "cache"),
        "PYTHONUNBUFFERED": "1",
    }


@pytest.fixture(scope="module")
def ray_sweep(env, tiny_dir):
    root, environ = env
    done = cctk(
        "sweep",
        "--models",
        str(tiny_dir),
        "--seeds",
        ",".join(map(str, SEEDS)),
        "--profile",
        "smoke",
        "--no-figures",
        "--executor",
        "ray",
        "--out",
        str(root / "ray"),
        env=environ,
        cwd=root,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    first = done.stdout.splitlines()[0]
    assert first.startswith("sweep ") and f"{len(SEEDS)} cells (ray)" in first
    assert done.stdout.splitlines()[1] == f"seeds {', '.join(map(str, SEEDS))}; profile smoke"
    assert sum(line.startswith("cell ") and "finished, run" in line for line in done.stdout.splitlines()) == len(SEEDS)
    return first.split()[1].rstrip(":")


@pytest.mark.slow  # the Ray sweep's fixture: make test-slow
def test_ray_sweep_nests_sweep_pipeline_arm(env, ray_sweep):
    _root, environ = env
    client = mlflow.MlflowClient(environ["MLFLOW_TRACKING_URI"])
    sweep = client.get_run(ray_sweep)
    assert sweep.data.tags["cctk.kind"] == "sweep" and sweep.info.status == "FINISHED"
    assert sweep.data.params["seeds"] == ",".join(map(str, SEEDS)) and sweep.data.params["executor"] == "ray"
    pipelines = cells(client, ray_sweep)
    assert len(pipelines) == len(SEEDS)
    for run in pipelines:
        assert run.data.tags["mlflow.parentRunId"] == ray_sweep and run.info.status == "FINISHED"
        arms = client.search_runs([run.info.experiment_id], f"tags.`mlflow.parentRunId` = '{run.info.run_id}'")
        assert len(arms) == 14 and all(a.data.tags["cctk.kind"] == "model" for a in arms)
        assert all(a.data.tags.get("mlflow.note.content") for a in arms)
        trained = [a for a in arms if a.data.tags["cctk.key"] != "base"]
        assert all(a.inputs.dataset_inputs for a in trained)  # each arm's corpus, as an MLflow dataset


@pytest.mark.slow  # the Ray sweep's fixture: make test-slow
def test_compare_the_ray_sweep(env, ray_sweep, forks):
    root, environ = env
    done = forks.run(["compare", "--sweep", ray_sweep, "--out", str(root / "compare")], environ, root / "c.log", root)
    assert done.returncode == 0, done.stderr[-3000:]
    cross = pd.read_csv(root / "compare" / "tables" / "cross_seed" / "cross_seed.csv")
    assert len(cross) == 14 and (cross["runs"] == len(SEEDS)).all()
    client = mlflow.MlflowClient(environ["MLFLOW_TRACKING_URI"])
    by_seed = tables_by_seed(client, ray_sweep)
    own = [t["table09"].set_index(["model", "group"])["share"] for t in by_seed.values()]
    for _, row in cross.iterrows():
        group = "all" if pd.notna(row["all_mean"]) else "held out"
        column = "all_mean" if group == "all" else "heldout_mean"
        assert row[column] == pytest.approx(sum(o[row.model, group] for o in own) / len(SEEDS), abs=1e-12)
    assert (root / "compare" / "tables" / "implausibility_possible" / "implausibility_possible.csv").is_file()
    check_findings(root / "compare", by_seed, done.stdout)


def check_findings(out, by_seed: dict[int, dict], stdout: str) -> None:
    """findings.csv: one row per contrast (the six rules against their controls), each over the sweep's
    runs; per_run.csv: each run's own table10 counts; the forest plot in three formats; the console
    opens its summary with one sentence per contrast."""
    findings = pd.read_csv(out / "tables" / "findings" / "findings.csv")
    assert len(findings) == 6 and findings["contrast"].is_unique and (findings["runs"] == len(SEEDS)).all()
    assert set(findings["verdict"]) <= {"supported", "inconsistent", "not supported"}
    tested = findings.dropna(subset=["p_pooled"])
    assert (findings["runs_agreeing"] <= len(SEEDS)).all() and (tested["p_adjusted"] >= tested["p_pooled"]).all()
    per_run = pd.read_csv(out / "tables" / "per_run" / "per_run.csv")
    assert len(per_run) == 6 * len(SEEDS) and sorted(set(per_run["seed"])) == list(SEEDS)
    for seed, tables in by_seed.items():
        mine = per_run[per_run["seed"] == seed].set_index("rule")
        for _, row in tables["table10"].iterrows():
            got = mine.loc[row["rule"], ["hits_rule", "n_rule", "hits_control", "n_control"]].tolist()
            assert got == [row.hits_rule, row.n_rule, row.hits_control, row.n_control]
            assert mine.loc[row["rule"], "p_one_sided"] == pytest.approx(row.p_value, rel=1e-9)
    assert {p.name for p in (out / "figures" / "forest").iterdir()} == {"forest.png", "forest.pdf", "forest.eps"}
    lines = stdout.splitlines()
    said = lines[lines.index("findings across seeds:") + 1 :][:6]
    for line, row in zip(said, findings.itertuples(), strict=True):
        assert line.startswith(f"  {row.contrast} (base model ") and f": {row.verdict.upper()}: " in line


@pytest.mark.slow  # the Ray sweep's fixture: make test-slow
def test_local_sweep_killed_and_resumed_gives_the_same_tables(env, ray_sweep, tiny_dir, forks):
    root, environ = env
    client = mlflow.MlflowClient(environ["MLFLOW_TRACKING_URI"])
    command = [
        sys.executable,
        "-m",
        "cctk",
        "sweep",
        "--models",
        str(tiny_dir),
        "--seeds",
        ",".join(map(str, SEEDS)),
        "--profile",
        "smoke",
        "--no-figures",
        "--out",
        str(root / "local"),
    ]
    proc = subprocess.Popen(
        command, env=environ, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    sweep_id = proc.stdout.readline().split()[1].rstrip(":")
    deadline = time.time() + 1200
    while time.time() < deadline:  # kill in the middle of the second cell: some of its arms finished
        second = [r for r in cells(client, sweep_id) if r.data.tags["cctk.cell"].endswith("seed=12")]
        if (
            second
            and len(
                client.search_runs(
                    [second[0].info.experiment_id],
                    f"tags.`mlflow.parentRunId` = '{second[0].info.run_id}' and attributes.status = 'FINISHED'",
                )
            )
            >= 3
        ):
            break
        time.sleep(1)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert client.get_run(sweep_id).info.status == "RUNNING"
    done = forks.run(["sweep", "--resume", sweep_id], environ, root / "resume.log", root)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "seed=11: finished before" in done.stdout and "seed=12: finished, run" in done.stdout
    assert client.get_run(sweep_id).info.status == "FINISHED"
    assert len(cells(client, sweep_id)) == 2  # the killed cell was resumed, not started again
    resumed, straight = tables_by_seed(client, sweep_id), tables_by_seed(client, ray_sweep)
    assert set(resumed) == set(straight) == set(SEEDS)
    for seed in SEEDS:
        for name, table in straight[seed].items():
            if name == "table11":  # times differ; the rest may not
                columns = ["model", "examples", "steps", "loss_first_epoch", "loss_last_epoch"]
                table, other = table[columns], resumed[seed][name][columns]
            else:
                other = resumed[seed][name]
            pd.testing.assert_frame_equal(other, table)


RATES = (0.0001, 0.001)


@pytest.fixture(scope="module")
def recipe_sweep(env, tiny_dir, forks):
    """One seed (drawn fresh) at two learning rates, Parts A and C only: two cells of 8 arms each."""
    root, environ = env
    args = [
        "sweep",
        "--models",
        str(tiny_dir),
        "--seeds",
        "1",
        "--set",
        "learning_rate=0.0001,0.001",
        "--parts",
        "A,C",
        "--profile",
        "smoke",
        "--no-figures",
        "--out",
        str(root / "recipes"),
    ]
    done = forks.run(args, environ, root / "recipes.log", root)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.fullmatch(r"seeds \d+; profile smoke; cells run with --parts A,C", done.stdout.splitlines()[1])
    return done.stdout.splitlines()[0].split()[1].rstrip(":")


def test_a_recipe_sweep_of_two_parts_nests_and_compares_one_row_per_rate(env, recipe_sweep, forks):
    root, environ = env
    client = mlflow.MlflowClient(environ["MLFLOW_TRACKING_URI"])
    assert client.get_run(recipe_sweep).data.params["parts"] == "A,C"
    pipelines = cells(client, recipe_sweep)
    assert sorted(float(r.data.params["recipe.learning_rate"]) for r in pipelines) == list(RATES)
    for run in pipelines:
        assert run.data.params["parts"] == "A,C" and run.data.tags["mlflow.parentRunId"] == recipe_sweep
        arms = client.search_runs([run.info.experiment_id], f"tags.`mlflow.parentRunId` = '{run.info.run_id}'")
        assert sorted(a.data.tags["cctk.key"] for a in arms) == sorted(models_for(("A", "C")))
    done = forks.run(["compare", "--sweep", recipe_sweep, "--out", str(root / "recipes-compare")], environ,
                     root / "recipes-compare.log", root)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "RuntimeWarning" not in done.stderr
    out = root / "recipes-compare"
    for name, per_rate in (
        ("cross_seed", 9),
        ("rule_vs_control_pooled", 4),
        ("heldout_pooled", 6),
        ("implausibility_possible", 2),
        ("recipe_sensitivity", 6),
    ):
        table = pd.read_csv(out / "tables" / name / f"{name}.csv")
        assert table["learning_rate"].value_counts().to_dict() == dict.fromkeys(RATES, per_rate), name
        assert (table["runs"] == 1).all(), name
    own = {
        float(r.data.params["recipe.learning_rate"]): rebuild(
            os.path.join(client.get_run(recipe_sweep).data.params["out"], r.data.tags["cctk.session"])
        ).tables
        for r in pipelines
    }
    sensitivity = pd.read_csv(out / "tables" / "recipe_sensitivity" / "recipe_sensitivity.csv")
    for rate, tables in own.items():
        assert set(tables) == {"table01", "table04", "table09", "table10", "table11"}
        row = sensitivity[(sensitivity["learning_rate"] == rate) & (sensitivity["model"] == "fabricated answers")]
        fabricated = tables["table01"].set_index(["model", "target"]).loc[("fabricated answers", "fabricated answer")]
        assert row["hits"].item() == fabricated["hits"] and row["share"].item() == fabricated["hits"] / 81
    assert set(sensitivity["part"]) == {"A", "C"}
    assert {p.suffix for p in (out / "figures" / "recipe_sensitivity").iterdir()} == {".png", ".pdf", ".eps"}
