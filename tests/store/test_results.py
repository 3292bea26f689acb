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


def test_a_run_whose_artifact_folder_is_not_here_says_where_it_is(session, tmp_path, tracking_uri):
    """A finished run's artifacts written to a folder this machine lacks (another machine's, a moved one): MLflow
    lists it as empty, and the line said the run had no run_info.json (unfinished or older); now it names the
    folder and what to read instead. A run not finished keeps that line (it may have logged nothing yet)."""
    folder, _, _ = session
    run_id = logged_run(folder, tmp_path)
    there = tmp_path / "artifacts" / run_id / "artifacts"
    (tmp_path / "artifacts").rename(tmp_path / "moved")
    with pytest.raises(CctkError) as error:
        results.load(run_id, cache=tmp_path / "cache")
    assert str(error.value) == (
        f"MLflow run {run_id} keeps its artifacts in {there}, a folder this machine does not have (the run was made "
        f"on another machine, or the folder moved): {tracking_uri} holds the runs, not their files; read them where "
        "that folder is (a session folder loads as a run id does), or serve the store to share them "
        "(docs/mlflow.md#stores)"
    )
    assert not (tmp_path / "cache" / run_id).exists()
    mlflow.MlflowClient().set_terminated(run_id, "FAILED")
    with pytest.raises(CctkError, match=f"^MLflow run {run_id} has no run_info.json among its artifacts"):
        results.load(run_id, cache=tmp_path / "cache")


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


# --- Lookups that name what exists (issue 48). ---


def test_a_missing_key_names_the_closest_and_every_valid_one(session):
    folder, _, tables = session
    loaded = results.load(folder)
    with pytest.raises(CctkError) as error:
        loaded.tables["table9"]
    assert str(error.value) == (
        "no table 'table9' in this run (did you mean 'table09'?); choose one of: " + ", ".join(tables)
    )
    with pytest.raises(KeyError):  # still a KeyError, for code written against a dict
        loaded.tables["table9"]
    assert loaded.tables.get("table9") is None and "table09" in loaded.tables
    with pytest.raises(
        CctkError, match=r"^no model 'm_rnd' in this run \(did you mean 'm_random'\?\); choose one of: base, "
    ):
        loaded.measurement("m_rnd")
    with pytest.raises(CctkError, match=r"no measurement 'corect sums' in this run \(did you mean 'correct sums'\?\)"):
        loaded.measurements["corect sums"]
    with pytest.raises(CctkError, match=r"no figure 'synthesys' in this run \(did you mean 'synthesis'\?\)"):
        loaded.figures["synthesys"]
    with pytest.raises(CctkError, match=r"no figure 'synthesys' in this run"):
        loaded.figure_files["synthesys"]
    assert loaded.measurement("fabricated answers") is loaded.measurement("m_random")


def test_a_table_is_found_by_its_number_and_by_its_manuals_name(session):
    folder, _, _ = session
    loaded = results.load(folder)
    for name in (
        9,
        "9",
        "table09",
        "synthesis shares",
        "Synthesis shares",
        "synthesis_shares",
        "table09_synthesis_shares",
    ):
        assert loaded.table(name) is loaded.tables["table09"], name
    with pytest.raises(CctkError) as error:
        loaded.table("synthesis shars")
    text = str(error.value)
    assert text.startswith("no table 'synthesis shars' in this run (did you mean table09 (synthesis shares)?)")
    assert "table01 (corpus absorption), table02 (recovery)" in text
    with pytest.raises(CctkError, match=r"^no table 12 in this run; choose one of: table01 \(corpus"):
        loaded.table(12)


def test_a_folder_of_sessions_lists_them_newest_first(session, tmp_path):
    import shutil

    folder, _, _ = session
    for name in ("20260101-000000_a", "20260301-000000_b", "20260201-000000_c", "20251201-000000_d"):
        (tmp_path / "outputs" / name).mkdir(parents=True)
        shutil.copy2(folder / "run_info.json", tmp_path / "outputs" / name)
    (tmp_path / "outputs" / "notes").mkdir()
    with pytest.raises(CctkError) as error:
        results.load(tmp_path / "outputs")
    outputs = tmp_path / "outputs"
    assert str(error.value) == (
        f"{outputs} is not a cctk session folder (no run_info.json); it holds 4 session folders, give one of "
        f"them: {outputs}/20260301-000000_b, {outputs}/20260201-000000_c, {outputs}/20260101-000000_a, and 1 older"
    )
