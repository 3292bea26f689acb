"""The pipeline's checks, before any work: nothing is written, no MLflow run is created."""
import pytest

from cctk import pipeline, tracking
from cctk.config import make_config
from cctk.errors import CctkError


@pytest.mark.parametrize("model, message", [("nope", "unknown model"), ("/no/such/dir", "no model directory")])
def test_bad_model_fails_before_any_work(model, message, tmp_path, tracking_uri):
    with pytest.raises(CctkError, match=message):
        pipeline.run(make_config(model, "smoke", (1,)), tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "mlflow.db").exists()


def test_unreachable_hub_fails_before_any_work(tmp_path, tracking_uri, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(CctkError, match="cannot reach the Hugging Face Hub"):
        pipeline.run(make_config("phi-1.5", "smoke", (1,)), tmp_path / "out")
    assert not (tmp_path / "out").exists() and not (tmp_path / "mlflow.db").exists()


def test_unreachable_tracking_server_fails_before_any_work(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    with pytest.raises(CctkError, match="cannot reach the MLflow tracking server"):
        pipeline.run(make_config("smollm2-135m-bundled", "smoke", (1,)), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_resume_of_an_unknown_or_foreign_run_fails_in_one_line(tracking_uri):
    store = tracking.connect()
    other = store.start(store.experiment(), "not a pipeline", {"cctk.kind": "measure"})
    with pytest.raises(CctkError, match="is not a cctk pipeline"):
        pipeline.resume(other.run_id)
    with pytest.raises(CctkError, match="no run 'deadbeef'"):
        pipeline.resume("deadbeef")


def test_auto_profile_is_paper_on_cuda_and_quick_on_a_cpu():
    assert make_config("m", "auto", (1,), device="cuda:0").profile == "paper"
    config = make_config("m", "auto", (1,), device="cpu")
    assert config.profile == "quick" and config.profile_note == "quick (auto: CPU)"
    assert config.as_params()["profile"] == "quick" and config.as_params()["profile_requested"] == "auto"
    assert make_config("m", "smoke", (1,), device="cuda").profile == "smoke"


def test_an_arm_that_raises_leaves_a_failed_nested_run(tiny_dir, tmp_path, tracking_uri, monkeypatch):
    """The second arm's training raises: its nested run and the pipeline are FAILED with the error as a
    tag; the base model and the first arm, finished before, stay FINISHED."""
    from cctk import finetune

    real, calls = finetune.fine_tune, []

    def broken_second_arm(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("out of memory in arm two")
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "fine_tune", broken_second_arm)
    with pytest.raises(RuntimeError, match="arm two"):
        pipeline.run(make_config(str(tiny_dir), "smoke", (3,)), tmp_path / "out", system_metrics=False,
                     figures=False, echo=lambda *_: None)
    store = tracking.connect()
    runs = {r.tags.get(tracking.KEY, "parent"): r for r in store.search([store.experiment()], "")}
    assert {k: r.status for k, r in runs.items()} == {"parent": "FAILED", "base": "FINISHED",
                                                      "m_correct": "FINISHED", "m_random": "FAILED"}
    assert runs["m_random"].tags[tracking.ERROR] == "RuntimeError: out of memory in arm two"
    assert runs["parent"].tags[tracking.ERROR] == "RuntimeError: out of memory in arm two"
