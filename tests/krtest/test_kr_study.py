"""The study's flow on the tiny model: five nested runs, the figure, the table, every check first."""
import json

import mlflow
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from cctk.cli import cli
from cctk.krtest.generate import make_dataset, write_dataset
from cctk.krtest.study import ARMS
from cctk.mlproject import strip_empty


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("krstudy")
    write_dataset(make_dataset(4, entities=4, validation_entities=2), folder)
    return folder


def test_study_runs_five_nested_arms_and_writes_figure_and_table(tiny_dir, data_dir, tracking_uri, tmp_path):
    result = CliRunner().invoke(cli, ["krtest", "study", "--model", str(tiny_dir), "--data", str(data_dir),
                                      "--epochs", "1", "--batch-size", "2", "--eval-every", "1", "--budget", "5000",
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    for name in ARMS.values():
        assert any(line.startswith(name) and "%" in line for line in result.output.splitlines())
    runs = mlflow.search_runs(search_all_experiments=True, output_format="list")
    parent = next(r for r in runs if r.data.tags.get("cctk.kind") == "krtest-study")
    arms = {r.data.tags["cctk.arm"]: r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    assert set(arms) == set(ARMS) and all(r.data.tags["cctk.kind"] == "krtest" for r in arms.values())
    assert all(r.info.status == "FINISHED" for r in runs)
    client = mlflow.MlflowClient()
    for key in ("full", "lora_attention", "lora_ffn"):
        steps = [m.step for m in client.get_metric_history(arms[key].info.run_id, "kr_accuracy")]
        assert sorted(steps) == [0, 1, 2]
    assert arms["lora_attention"].data.params["lora.targets"] == "q_proj,k_proj,v_proj,o_proj"
    assert arms["lora_ffn"].data.params["lora.targets"] == "gate_proj,up_proj,down_proj"

    session = next((tmp_path / "out").iterdir())
    for stem in ("figure/kr_accuracy_and_perplexity", "table/final_accuracies"):
        exts = ("png", "pdf", "eps") if stem.startswith("figure") else ("csv", "xlsx", "tex")
        assert all((session / f"{stem}.{ext}").stat().st_size > 0 for ext in exts)
    table = pd.read_csv(session / "table" / "final_accuracies.csv")
    assert table.arm.tolist() == list(ARMS.values())
    assert (table.lo <= table.accuracy).all() and (table.accuracy <= table.hi).all()
    tex = (session / "table" / "final_accuracies.tex").read_text()
    assert "\\begin{table}" in tex and "\\caption{" in tex and "\\label{tab:final_accuracies}" in tex
    study = json.loads((session / "study.json").read_text())
    assert set(study["arms"]) == set(ARMS) and set(study["lora"]) == {"lora_attention", "lora_ffn"}
    assert parent.data.metrics["blind.accuracy"] == study["arms"]["blind"]["accuracy"]
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"figure", "table", "study.json"} <= artifacts


def test_study_checks_its_data_before_any_run(data_dir, tracking_uri, tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    for name in ("corpus.txt", "validation.txt"):
        (bad / name).write_text((data_dir / name).read_text())
    lines = (data_dir / "questions.jsonl").read_text().splitlines()
    lines[4] = lines[4].replace('"location": ', '"location": "x", "old": ')
    (bad / "questions.jsonl").write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(cli, ["krtest", "study", "--data", str(bad), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert result.output.strip() == (f"Error: {bad / 'questions.jsonl'} line 5: field 'location' must be an integer "
                                     "(a character offset), got a string")
    assert not (tmp_path / "out").exists() and mlflow.search_runs(search_all_experiments=True).empty


def test_mlproject_entry_point_runs_the_study():
    import shlex
    from pathlib import Path

    from cctk.krtest.cli import study

    project = yaml.safe_load((Path(__file__).parents[2] / "MLproject").read_text())
    entry = project["entry_points"]["krtest"]
    assert {"model", "seed"} <= set(entry["parameters"])
    values = {k: shlex.quote(str(v["default"])) for k, v in entry["parameters"].items()}  # as `mlflow run` does
    argv = shlex.split(entry["command"].format(**values))
    assert argv[:5] == ["python", "-m", "cctk.mlproject", "krtest", "study"]
    ctx = study.make_context("study", strip_empty(argv[5:]))  # parses: every empty value dropped
    assert ctx.params["model"] == "smollm2-135m-bundled" and ctx.params["seed"] == 0 and ctx.params["data"] is None
