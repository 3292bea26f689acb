import mlflow
import pandas as pd
import pytest

from cctk.core.lm.scoring import COLUMNS
from cctk.pipeline import measure as measure_job


def test_measure_writes_table_and_heatmap_and_tracks_them(tiny_dir, tmp_path, tracking_uri):
    lines = []
    summary = measure_job.run(str(tiny_dir), tmp_path / "out", echo=lines.append)
    table = pd.read_csv(tmp_path / "out" / "measurement.csv")
    assert list(table.columns) == COLUMNS and len(table) == 2835
    assert {p.suffix for p in (tmp_path / "out").glob("target_heatmap_correct_sum.*")} == {".png", ".pdf", ".eps"}
    assert f"hits on the correct sum: {summary.hits}/81" in lines
    client = mlflow.MlflowClient()
    (run,) = client.search_runs([client.get_experiment_by_name("cctk").experiment_id])
    assert run.data.tags["cctk.kind"] == "measure" and run.info.status == "FINISHED"
    assert lines[-1] == f"MLflow UI: cctk ui {run.info.run_id}"  # the run it logged, last (before: not named)
    assert run.data.metrics["hits_correct"] == summary.hits
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"measurement.csv", "figures"} <= artifacts
    assert len(client.list_artifacts(run.info.run_id, "figures")) == 3


def test_measure_becomes_the_run_mlflow_run_created(tiny_dir, tmp_path, tracking_uri, monkeypatch):
    """`mlflow run . -e measure` left its own run empty and logged a second one beside it."""
    from cctk.store import tracking

    client = mlflow.MlflowClient()
    created = client.create_run(tracking.connect().experiment())
    monkeypatch.setenv("MLFLOW_RUN_ID", created.info.run_id)
    lines = []
    measure_job.run(str(tiny_dir), tmp_path / "out", echo=lines.append)
    (run,) = client.search_runs([created.info.experiment_id])  # one run: the one created
    assert run.info.run_id == created.info.run_id and run.data.tags["cctk.kind"] == "measure"
    # the store spelled out: MLFLOW_TRACKING_URI was `mlflow run`'s to its command, not the user's shell's
    assert lines[-1] == f"MLflow UI: cctk ui {created.info.run_id} --tracking {tracking_uri}"
    assert "hits_correct" in run.data.metrics


def test_a_model_too_large_to_measure_is_refused_before_it_loads(tmp_path, tracking_uri, monkeypatch):
    """`cctk measure` plans the measurement (float32 weights and the scorer's logits): the bundled model on a
    machine with 0.5 GiB free is refused in one line, before the store, the model or the folder's files."""
    from click.testing import CliRunner

    from cctk.cli.main import cli
    from cctk.core.lm import device
    from cctk.core.lm.memory import GIB, Room

    monkeypatch.setattr(device, "room", lambda where: Room(GIB // 2, GIB // 2, "cpu", "cpu"))  # the plan's
    monkeypatch.setattr(measure_job, "load_model", lambda *a, **k: pytest.fail("loaded"))
    result = CliRunner().invoke(cli, ["measure", "--model", "smollm2-135m-bundled", "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert result.output == (
        "Error: smollm2-135m-bundled measured in float32 needs about 1.3 GiB in host memory (weights 0.5 GiB, "
        "scoring logits 0.5 GiB, runtime 0.2 GiB), 0.5 GiB free; or a machine with at least 1.3 GiB of free memory\n"
    )
    assert not mlflow.MlflowClient().search_experiments(filter_string="name = 'cctk'")
