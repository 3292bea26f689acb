"""cctk.results.load: a session folder or an MLflow pipeline run id -> tables, measurements, figures."""

from __future__ import annotations

import mlflow
import pytest
from builders import SESSION, check_loaded

from cctk import results
from cctk.core.errors import CctkError


@pytest.fixture(scope="module")
def session(written_session):
    return written_session


def logged_run(folder, tmp_path, kind: str = "pipeline") -> str:
    """A run in the test's SQLite store with ``folder`` as its artifacts, as the pipeline logs it."""
    client = mlflow.MlflowClient()
    name = f"cctk-{kind}"
    experiment = client.get_experiment_by_name(name)
    experiment_id = (
        experiment.experiment_id
        if experiment
        else client.create_experiment(name, artifact_location=(tmp_path / "artifacts").as_uri())
    )
    run = client.create_run(experiment_id, tags={"cctk.kind": kind, "mlflow.runName": SESSION})
    client.log_artifacts(run.info.run_id, str(folder))
    client.set_terminated(run.info.run_id)
    return run.info.run_id


def test_load_a_session_folder(session):
    folder, _, tables = session
    loaded = results.load(folder)
    check_loaded(loaded, tables)
    assert loaded.folder == folder and "heatmap_recovery" in loaded.figures


def test_load_a_run_id_downloads_the_artifacts(session, tmp_path, tracking_uri):
    folder, _, tables = session
    run_id = logged_run(folder, tmp_path)
    loaded = results.load(run_id, cache=tmp_path / "cache")
    check_loaded(loaded, tables)
    assert loaded.folder == tmp_path / "cache" / run_id
    assert not list(loaded.folder.glob("*.zip"))  # the zip repeats the rest: not downloaded
    assert results.load(run_id, cache=tmp_path / "cache").folder == loaded.folder  # from the cache


def test_a_run_that_is_no_pipeline_fails_in_one_line(session, tmp_path, tracking_uri):
    folder, _, _ = session
    run_id = logged_run(folder / "measurements", tmp_path, kind="model")
    with pytest.raises(CctkError, match="not a cctk pipeline run") as error:
        results.load(run_id, cache=tmp_path / "cache")
    assert "\n" not in str(error.value)
    with pytest.raises(CctkError, match="neither a session folder nor a run"):
        results.load("0123456789abcdef0123456789abcdef", cache=tmp_path / "cache")
    with pytest.raises(CctkError, match="no session folder"):
        results.load(tmp_path / "nowhere")
    with pytest.raises(CctkError, match="not a cctk session folder"):
        results.load(folder / "tables")
