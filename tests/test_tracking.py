import pytest

from cctk import tracking
from cctk.errors import CctkError


def test_embedded_is_the_default(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    config = tracking.resolve(None)
    assert config.tracking_uri == "sqlite:///mlruns/mlflow.db"
    assert config.artifact_location == "mlruns/artifacts"


def test_environment_wins_over_the_option(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:1234")
    assert tracking.resolve("server").tracking_uri == "http://127.0.0.1:1234"


def test_names_and_uris(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking.resolve("server").tracking_uri == "http://127.0.0.1:5000"
    assert tracking.resolve("sqlite:////tmp/x.db").tracking_uri == "sqlite:////tmp/x.db"
    with pytest.raises(CctkError, match="unknown tracking configuration 'nope'.*embedded"):
        tracking.resolve("nope")


def test_unreachable_server_fails_in_one_line():
    config = tracking.TrackingConfig("x", "http://127.0.0.1:9")
    with pytest.raises(CctkError, match="cannot reach the MLflow tracking server at http://127.0.0.1:9"):
        tracking.check_reachable(config, timeout=1)


def test_runs_nest_and_log(tracking_uri):
    import mlflow

    experiment = tracking.activate(tracking.resolve())
    parent = tracking.start(experiment, "parent", {"cctk.kind": "pipeline"})
    child = tracking.start(experiment, "child", {"cctk.key": "m_correct"}, parent=parent)
    child.params({"examples": 81, "lr": 5e-05})
    child.metrics({"loss": 0.5}, step=1)
    child.metrics({"loss": 0.25}, step=2)
    child.end()
    parent.end()
    client = mlflow.MlflowClient()
    got = client.get_run(child.run_id)
    assert got.data.tags["mlflow.parentRunId"] == parent.run_id
    assert got.data.params == {"examples": "81", "lr": "5e-05"}
    assert [m.value for m in client.get_metric_history(child.run_id, "loss")] == [0.5, 0.25]
    assert got.info.status == "FINISHED"
