"""The smoke pipeline end to end on a tiny model: 14 measured models, 13 arms, nested MLflow runs,
determinism, learning curves that change nothing, a non-finite loss. Slow: integration."""

from dataclasses import replace

import mlflow
import pandas as pd
import pytest
import torch

from cctk.core.lm.finetune import NonFiniteLoss
from cctk.manuals.configure import make_config
from cctk.manuals.v2.design import ARMS
from cctk.manuals.v2.parts import ALL_SEEN, compute_tables
from cctk.pipeline import stages as pipeline


@pytest.fixture(scope="module")
def two_runs(tiny_dir, tmp_path_factory, new_store):
    """Two smoke runs with one seed, into one SQLite store: the first with learning curves, its 26 figures as
    PNG only (PDF and EPS are the slow formats; a pipeline's figures in all three: the Ctrl-C walk of
    tests/integration/test_stage_walk.py, every figure in all three: tests/integration/test_outputs_full.py)."""
    root = tmp_path_factory.mktemp("runs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_TRACKING_URI", new_store(root))
        mp.setattr("cctk.figures.common.FORMATS", ("png",))
        first = pipeline.run(
            make_config(str(tiny_dir), "smoke", (11, 12), curves=True), pipeline.Where(root / "a"), pipeline.QUIET
        )
        # the second draws no figures: 25 without curves is tests/integration/test_outputs_full.py's
        second = pipeline.run(
            make_config(str(tiny_dir), "smoke", (11, 12)),
            pipeline.Where(root / "b"),
            replace(pipeline.QUIET, figures=False),
        )
        yield root, first, second


def test_learning_curves_in_mlflow_on_disk_and_in_a_26th_figure(two_runs):
    root, first, second = two_runs
    client = mlflow.MlflowClient(f"sqlite:///{root}/mlflow.db")
    arms = {
        r.data.tags["cctk.key"]: r for r in client.search_runs(["1"], f"tags.`mlflow.parentRunId` = '{first.run_id}'")
    }
    seen = client.get_metric_history(arms["c3_random"].info.run_id, "curve_hits_seen")
    held = client.get_metric_history(arms["c3_random"].info.run_id, "curve_hits_heldout")
    assert [m.step for m in seen] == [1, 2] and [m.step for m in held] == [1, 2]
    assert [m.step for m in client.get_metric_history(arms["m_random"].info.run_id, "curve_hits_all")] == [1, 2]
    assert client.get_metric_history(arms["base"].info.run_id, "curve_hits_all") == []  # never trained
    curves = first.results.curves
    assert len(curves) == 2 * (2 * 1 + 11 * 2)  # epochs x (2 arms on all 81 + 11 arms with two groups)
    last = curves[(curves["model"] == "sum + 3 from fabricated answers") & (curves["epoch"] == 2)]
    table09 = compute_tables(first.results)["table09"].set_index(["model", "group"])
    assert (
        last.set_index("group").loc["heldout", "hits"]
        == table09.loc[("sum + 3 from fabricated answers", "held out"), "hits"]
    )
    figures = sorted((first.folder / "figures").iterdir())
    assert len(figures) == 26 and figures[-1].name == "26_learning_curves"
    assert second.results.curves is None and not (second.folder / "figures").exists()


def test_same_seed_gives_identical_tables(two_runs):
    _, first, second = two_runs
    a, b = compute_tables(first.results), compute_tables(second.results)
    assert list(a) == [f"table{i:02d}" for i in range(1, 12)]
    for name in a:
        if name == "table11":  # seconds differ; everything else must not
            cols = ["model", "parent", "examples", "steps", "loss_first_epoch", "loss_last_epoch"]
            pd.testing.assert_frame_equal(a[name][cols], b[name][cols])
        else:
            pd.testing.assert_frame_equal(a[name], b[name])
    for key in first.results.measurements:
        pd.testing.assert_frame_equal(first.results.measurements[key], second.results.measurements[key])


def test_parent_run_has_14_nested_runs_13_with_loss_history(two_runs):
    root, _first, _ = two_runs
    client = mlflow.MlflowClient(f"sqlite:///{root}/mlflow.db")
    experiment = client.get_experiment_by_name("cctk")
    parents = client.search_runs([experiment.experiment_id], "tags.`cctk.kind` = 'pipeline'")
    assert len(parents) == 2
    parent = parents[-1]
    assert parent.info.status == "FINISHED"
    assert parent.data.params["profile"] == "smoke" and parent.data.params["seeds"].startswith("11,")
    children = client.search_runs([experiment.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    assert len(children) == 14
    keys = {c.data.tags["cctk.key"]: c for c in children}
    assert set(keys) == {"base"} | {arm.key for arm in ARMS}
    for arm in ARMS:
        run = keys[arm.key]
        assert run.data.tags["cctk.parent"] == arm.parent
        history = client.get_metric_history(run.info.run_id, "loss")
        assert [m.step for m in history] == [1, 2]
        assert {"train_seconds", "steps", "examples_per_second"} <= set(run.data.metrics)
    for key, run in keys.items():  # models trained on all 81 additions have no held-out group
        groups = {"hits_all", "n_all"} if key in ALL_SEEN else {"hits_seen", "hits_heldout", "n_seen", "n_heldout"}
        assert groups <= set(run.data.metrics) and not {"hits_seen", "hits_all"} - groups & set(run.data.metrics)
    assert keys["m_random"].data.metrics["n_all"] == 81 and keys["c3_random"].data.metrics["n_seen"] == 57
    assert client.get_metric_history(keys["base"].info.run_id, "loss") == []
    assert keys["m_random"].data.tags["mlflow.runName"] == "fabricated answers"
    assert keys["c18_random"].data.tags["cctk.parent"] == "m_random"
    assert parent.data.params["recipe.epochs"] == "2" and parent.data.params["holdout_share"] == "0.3"


def test_non_finite_loss_fails_the_arm_and_keeps_what_was_written(tmp_path, tiny_dir, tracking_uri, monkeypatch):
    real = pipeline.fine_tune

    def poisoned(model, *args, **kwargs):  # the real training loop, on weights that turn the loss NaN
        with torch.no_grad():
            model.model.norm.weight.fill_(float("nan"))
        return real(model, *args, **kwargs)

    monkeypatch.setattr(pipeline, "fine_tune", poisoned)
    with pytest.raises(NonFiniteLoss, match="m_correct: the loss became nan"):
        pipeline.run(make_config(str(tiny_dir), "smoke", (1,)), pipeline.Where(tmp_path / "out"), pipeline.QUIET)
    assert len(list((tmp_path / "out").glob("*/measurements/base_model.csv"))) == 1
    client = mlflow.MlflowClient(tracking_uri)
    runs = {r.data.tags.get("mlflow.runName"): r.info.status for r in client.search_runs(["1"])}
    assert runs["correct sums"] == "FAILED"
    assert runs["base model"] == "FINISHED"
    assert [s for n, s in runs.items() if n not in ("correct sums", "base model")] == ["FAILED"]


def test_bench_absorb_trains_part_a_as_the_pipeline_does(two_runs, tiny_dir, tmp_path):
    """`python -m cctk.bench absorb` is for choosing a recipe: its Part A arms must be the pipeline's."""
    import json

    from click.testing import CliRunner

    from cctk.bench import bench
    from cctk.core.readings import summarize

    _, _, run = two_runs
    out = tmp_path / "absorb.jsonl"
    done = CliRunner().invoke(
        bench, ["absorb", "--model", str(tiny_dir), "--profile", "smoke", "--seeds", "11,12", "--json-out", str(out)]
    )
    assert done.exit_code == 0, done.output
    row = json.loads(out.read_text().splitlines()[0])
    assert row["seed"] == 11 and row["recipe"]["batch_size"] == 32
    for key, target in (("m_correct", "correct"), ("m_random", "fabricated")):
        assert row[key]["hits"] == summarize(run.results.readings(key, target)).hits
        assert row[key]["losses"] == list(run.results.training[key].losses)  # the same training, bit for bit
    assert done.output.splitlines()[1] == "seeds 11, 12"
    # (stderr is mixed in: Transformers' loading bar, without a newline, may precede the line)
    first_line = "seed 11:" + next(line for line in done.output.splitlines() if "seed 11:" in line).split("seed 11:")[1]
    assert f"correct sums {row['m_correct']['hits']}/81" in first_line
    assert first_line.endswith("absorbed" if row["absorbed"] else "(needs 77 and 73)")
