"""A third manual is one folder and one line (#45 item 4): the toy manual of tests/toy_manual (its own facts, two
arms, one table, one figure), registered with the one line a manual adds to ``cctk.manuals.registry.HOMES``, runs
end to end on the tiny model with nothing of cctk changed: ``cctk run --protocol toy`` tracked as a parent run with
a nested run per model, its table and figure written, ``cctk report`` re-rendering them, ``cctk.results.load``
reading the folder and the run. Integration: the tiny model trains."""

from __future__ import annotations

import mlflow
import pandas as pd
from click.testing import CliRunner
from toy_manual.facts import digits

from cctk import results
from cctk.cli.main import cli
from cctk.core.readings import read
from cctk.manuals import registry


def test_the_toy_manual_registers_with_one_line_and_runs_end_to_end(tiny_dir, tmp_path, monkeypatch, new_store):
    monkeypatch.setitem(registry.HOMES, "toy", "toy_manual.manual:TOY")  # the one line
    uri = new_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("CCTK_CACHE", str(tmp_path / "cache"))
    args = ["run", "--protocol", "toy", "--model", str(tiny_dir), "--profile", "smoke", "--seed", "5"]
    done = CliRunner().invoke(cli, [*args, "--no-system-metrics", "--out", str(tmp_path / "out")])
    assert done.exit_code == 0, done.output
    assert "protocol toy finished" in done.output and "last digits: " in done.output

    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("cctk")
    (parent,) = client.search_runs([experiment.experiment_id], "tags.`cctk.kind` = 'pipeline'")
    assert parent.info.status == "FINISHED" and parent.data.tags["cctk.protocol"] == "toy"
    assert parent.data.params["protocol"] == "toy" and parent.data.params["candidates"] == "0..9"
    assert {"last_hits", "tens_hits"} <= set(parent.data.metrics)
    assert "--protocol toy" in parent.data.tags["cctk.reproduce"]
    nested = client.search_runs([experiment.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    assert {r.data.tags["cctk.key"]: r.info.status for r in nested} == dict.fromkeys(
        ("base", "last", "tens"), "FINISHED"
    )
    assert {r.data.tags["cctk.key"]: r.data.tags["cctk.parent"] for r in nested} == {
        "base": "",
        "last": "base",
        "tens": "base",
    }

    (folder,) = (tmp_path / "out").iterdir()
    loaded = results.load(folder)
    assert loaded.protocol == "toy" and list(loaded.tables) == ["table01"] and list(loaded.figures) == ["hits_by_model"]
    assert {p.suffix for p in loaded.figure_files["hits_by_model"].values()} == {".png", ".pdf", ".eps"}
    assert loaded.info.design.digits == ("last", "tens") and loaded.info.training["last"].parent == "base model"
    table = loaded.tables["table01"].set_index(["model_key", "target_key"])
    for key in ("base", "last", "tens"):  # every hit count is the measurement's own: argmax on the digit
        for target in ("last", "tens"):
            hits = int(read(loaded.measurement(key), digits(target))["hit"].sum())
            assert table.loc[(key, target), "hits"] == hits
    assert parent.data.metrics["last_hits"] == table.loc[("last", "last"), "hits"]
    by_id = results.load(parent.info.run_id)
    pd.testing.assert_frame_equal(by_id.tables["table01"], loaded.tables["table01"])

    csv = folder / "tables" / "table01_hits_on_the_digits" / "table01_hits_on_the_digits.csv"
    written = csv.read_bytes()
    again = CliRunner().invoke(cli, ["report", str(folder), "--out", str(tmp_path / "again")])
    assert again.exit_code == 0, again.output
    assert "re-rendered 1 figures, 1 tables" in again.output
    assert (tmp_path / "again" / folder.name / csv.relative_to(folder)).read_bytes() == written
    assert "The digits" in (tmp_path / "again" / folder.name / "report.html").read_text()
