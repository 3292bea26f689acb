"""The KR-Test study end to end on the tiny model: five nested runs, the figure, the table, the LoRA pair, an
exclusive session folder; and the study over two seeds, nested under a sweep run, compared across seeds."""

import json
import weakref

import mlflow
import pandas as pd
import pytest
from click.testing import CliRunner

from cctk.cli.main import cli
from cctk.krtest import ARMS
from cctk.krtest.commands import study as study_command
from cctk.krtest.generation.generate import make_dataset, write_dataset
from cctk.krtest.measurement import train
from cctk.store import session

pytestmark = pytest.mark.integration
SMALL = ["--epochs", "1", "--batch-size", "2", "--eval-every", "1", "--budget", "5000"]


@pytest.fixture(scope="module")
def tiny_dir(tiny_dir_bundled):
    """KR-Test's text is English prose: the tiny Llama with the bundled tokenizer itself."""
    return tiny_dir_bundled


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("krstudy")
    write_dataset(make_dataset(4, entities=4, validation_entities=2), folder)
    return folder


def test_study_runs_five_nested_arms_and_writes_figure_and_table(
    tiny_dir, data_dir, tracking_uri, tmp_path, monkeypatch
):
    taken = tmp_path / "out" / "20260101-000000_tiny"  # a study of the same model started in the same second
    taken.mkdir(parents=True)
    monkeypatch.setattr(session, "session_name", lambda model, now=None: "20260101-000000_tiny")
    placed, alive = [], {}  # every model the study puts on its device; which of those before live at each move
    real = study_command.placed

    def watched(model, plan, where, arm):
        alive[arm] = [ref() is not None for ref in placed]
        placed.append(weakref.ref(model))
        return real(model, plan, where, arm)

    monkeypatch.setattr(study_command, "placed", watched)
    # the arms train on the rows the plan and the baselines cut: none cut again (before: three more times each)
    monkeypatch.setattr(train, "corpus_rows", lambda *a: pytest.fail("cut again"))
    result = CliRunner().invoke(
        cli,
        ["krtest", "study", "--model", str(tiny_dir), "--data", str(data_dir), *SMALL, "--out", str(tmp_path / "out")],
    )
    assert result.exit_code == 0, result.output
    # the untouched model (placed for both baselines) waits throughout; each trained copy is gone before the next
    # is made (before: the full arm's copy lived on while LoRA on attention's was made and placed, two copies on
    # the device where the plan counts one)
    assert alive == {
        "the blind baseline arm": [],
        "the open-book baseline arm": [True],
        "the full fine-tuning arm": [True, True],
        "the LoRA on attention arm": [True, True, False],
        "the LoRA on FFN arm": [True, True, False, False],
    }
    for name in ARMS.values():
        assert any(line.startswith(name) and "%" in line for line in result.output.splitlines())
    # the tiny Llama's widths (896, 1152) reach 5000 at ranks 6 and 4, 16.7% apart: the pair (5, 4) is 2.86% apart
    assert (
        "attention rank 5 trains 4,480, FFN rank 4 trains 4,608 parameters, 2.86% apart (the ranks closest to "
        "the budget, 6 and 4, were 16.67% apart"
    ) in result.output
    runs = mlflow.search_runs(search_all_experiments=True, output_format="list")
    parent = next(r for r in runs if r.data.tags.get("cctk.kind") == "krtest-study")
    *_, finished, link = result.output.strip().splitlines()  # the arms' accuracies before (before: after)
    assert finished.startswith("study finished in ") and link == f"MLflow UI: cctk ui {parent.info.run_id}"
    assert (
        parent.data.params["lora.difference_percent"] == "2.8571" and parent.data.params["lora.pair_searched"] == "True"
    )
    arms = {r.data.tags["cctk.arm"]: r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    assert set(arms) == set(ARMS) and all(r.data.tags["cctk.kind"] == "krtest" for r in arms.values())
    assert all(r.info.status == "FINISHED" for r in runs)
    # before the first trained arm: the three arms' compute limit and their evaluations (steps 1 and 2 each), logged
    # on the study's run; each arm logs its own limit and its training's ratio to it
    (forecast,) = [line for line in result.output.splitlines() if line.startswith("estimated: ")]
    assert result.output.index(forecast) < result.output.index("full fine-tuning:\n")
    assert " (12 rows x " in forecast and "; 6 evaluations (every step and the last) at " in forecast
    limits = [arms[key].data.metrics["compute_limit_seconds"] for key in ("full", "lora_attention", "lora_ffn")]
    assert parent.data.metrics["estimated_limit_seconds"] == pytest.approx(sum(limits), rel=1e-12)
    assert limits[1] == limits[2] == pytest.approx(limits[0] * 4 / 6, rel=1e-12)  # LoRA: no weight gradients
    for key in ("full", "lora_attention", "lora_ffn"):
        metrics = arms[key].data.metrics
        assert metrics["limit_ratio"] == pytest.approx(metrics["train_seconds"] / metrics["compute_limit_seconds"])
    client = mlflow.MlflowClient()
    for key in ("full", "lora_attention", "lora_ffn"):
        steps = [m.step for m in client.get_metric_history(arms[key].info.run_id, "kr_accuracy")]
        assert sorted(steps) == [0, 1, 2]
    for key, rank, trainable in (("lora_attention", "5", "4480"), ("lora_ffn", "4", "4608")):
        assert (arms[key].data.params["lora.rank"], arms[key].data.params["lora.trainable_parameters"]) == (
            rank,
            trainable,
        )
    assert arms["lora_attention"].data.params["lora.targets"] == "q_proj,k_proj,v_proj,o_proj"
    assert arms["lora_ffn"].data.params["lora.targets"] == "gate_proj,up_proj,down_proj"
    for run in arms.values():
        names = {d.dataset.name for d in client.get_run(run.info.run_id).inputs.dataset_inputs}
        assert names == {f"kr questions {data_dir.name}", f"kr corpus {data_dir.name}"}  # by the folder's name
        assert run.data.params["seed"] == "0"

    assert list(taken.iterdir()) == []  # the other study's folder is left alone
    folder = tmp_path / "out" / "20260101-000000_tiny-2"
    for stem in ("figure/kr_accuracy_and_perplexity", "table/final_accuracies"):
        exts = ("png", "pdf", "eps") if stem.startswith("figure") else ("csv", "xlsx", "tex")
        assert all((folder / f"{stem}.{ext}").stat().st_size > 0 for ext in exts)
    table = pd.read_csv(folder / "table" / "final_accuracies.csv")
    assert table.arm.tolist() == list(ARMS.values()) and table.trainable.tolist()[3:] == [4480, 4608]
    assert (table.lo <= table.accuracy).all() and (table.accuracy <= table.hi).all()
    tex = (folder / "table" / "final_accuracies.tex").read_text()
    assert (
        "\\begin{table" in tex
        and "resizebox" not in tex
        and "\\caption{" in tex
        and "\\label{tab:final_accuracies}" in tex
    )
    study = json.loads((folder / "study.json").read_text())
    assert set(study["arms"]) == set(ARMS) and study["lora_pair"]["closest_ranks"] == [6, 4]
    assert parent.data.metrics["blind.accuracy"] == study["arms"]["blind"]["accuracy"]
    trained = [arms[key].data.metrics["peak_cpu_memory_bytes"] for key in ("full", "lora_attention", "lora_ffn")]
    assert parent.data.metrics["peak_memory_bytes"] == max(trained) <= parent.data.metrics["memory_estimate_bytes"]
    assert not any("peak_cpu_memory_bytes" in arms[key].data.metrics for key in ("blind", "open_book"))
    assert (folder / "blind" / "by_passage.csv").is_file()
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"figure", "table", "study.json"} <= artifacts


def test_study_over_two_seeds_then_compare(tiny_dir, data_dir, tracking_uri, tmp_path):
    result = CliRunner().invoke(
        cli,
        [
            "krtest",
            "study",
            "--model",
            str(tiny_dir),
            "--data",
            str(data_dir),
            *SMALL,
            "--seeds",
            "11,12",
            "--out",
            str(tmp_path / "out"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "across seeds 11, 12" in result.output
    runs = mlflow.search_runs(search_all_experiments=True, output_format="list")
    sweep = next(r for r in runs if r.data.tags.get("cctk.kind") == "krtest-sweep")
    *_, finished, link = result.output.strip().splitlines()  # each study's link left to the sweep's
    assert finished.startswith(f"sweep {sweep.info.run_id} finished in ")
    assert link == f"MLflow UI: cctk ui {sweep.info.run_id}" and result.output.count("MLflow UI:") == 1
    studies = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == sweep.info.run_id]
    assert sorted(r.data.params["seed"] for r in studies) == ["11", "12"]
    assert all(r.data.tags["cctk.kind"] == "krtest-study" for r in studies) and sweep.data.params["seeds"] == "11,12"
    folder = next((tmp_path / "out").iterdir())
    pooled = pd.read_csv(folder / "tables" / "kr_pooled" / "kr_pooled.csv")
    assert pooled.arm.tolist() == list(ARMS.values()) and (pooled.runs == 2).all() and (pooled["items"] == 48).all()
    assert len([p for p in folder.iterdir() if p.is_dir() and p.name != "tables"]) == 2  # a session per seed
    paired = pd.read_csv(folder / "tables" / "kr_paired" / "kr_paired.csv")
    assert len(paired) == 30 and (paired.seeds == "all").sum() == 10  # 10 pairs of arms, 2 seeds and pooled
    assert sweep.data.metrics["full.pooled_accuracy"] == pytest.approx(
        pooled.set_index("arm").loc["full fine-tuning", "pooled_accuracy"]
    )
    # `cctk compare` of the sweep run gives the same tables from MLflow
    compared = CliRunner().invoke(cli, ["compare", "--runs", sweep.info.run_id, "--out", str(tmp_path / "cmp")])
    assert compared.exit_code == 0, compared.output
    again = pd.read_csv(tmp_path / "cmp" / "tables" / "kr_paired" / "kr_paired.csv")
    pd.testing.assert_frame_equal(again.drop(columns="model"), paired.drop(columns="model"))
