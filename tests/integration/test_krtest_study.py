"""KR-Test end to end on the bundled SmolLM2-135M: generate -> study (a small one: 6 people, 36 items; full
fine-tuning 8 epochs of 3 steps at 8e-4, from which the bundled model learns in 24 steps (91.7% here, blind
52.8%) where the default 1e-4 needed 48; each LoRA arm one epoch, its curve's start and end)."""

import mlflow
import pytest
from click.testing import CliRunner

from cctk.cli.main import cli

pytestmark = pytest.mark.integration


# ~100 s, make test's longest test until it went here: make test runs the study's whole code path on a tiny model
# (test_krtest_tiny.py) and on the accelerator's step (test_device_step.py); this one shows the bundled model learns
@pytest.mark.slow
def test_small_study_on_the_bundled_model(tmp_path, tracking_uri):
    data, out = tmp_path / "data", tmp_path / "out"
    runner = CliRunner()
    made = runner.invoke(
        cli, ["krtest", "generate", "--seed", "1", "--entities", "6", "--validation-entities", "4", "--out", str(data)]
    )
    assert made.exit_code == 0, made.output
    result = runner.invoke(
        cli,
        [
            "krtest",
            "study",
            "--model",
            "smollm2-135m-bundled",
            "--seed",
            "1",
            "--data",
            str(data),
            "--epochs",
            "8",
            "--full-learning-rate",
            "8e-4",
            "--lora-epochs",
            "1",
            "--batch-size",
            "2",
            "--eval-every",
            "12",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    print(result.output)

    runs = mlflow.search_runs(search_all_experiments=True, output_format="list")
    parent = next(r for r in runs if r.data.tags.get("cctk.kind") == "krtest-study")
    arms = {r.data.tags["cctk.arm"]: r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    blind, book, full = (arms[k].data.metrics for k in ("blind", "open_book", "full"))
    assert blind["n"] == 36
    # The untouched model cannot know invented facts: its interval holds 50%, or lies near it.
    assert blind["lo"] <= 0.5 <= blind["hi"] or abs(blind["accuracy"] - 0.5) <= 0.12
    # The oracle reads the answer in the passage before the context.
    assert book["accuracy"] >= 0.85 and book["lo"] > blind["hi"]
    # Full fine-tuning on the corpus rises above its start, and the curve is in MLflow.
    history = sorted(
        mlflow.MlflowClient().get_metric_history(arms["full"].info.run_id, "kr_accuracy"), key=lambda m: m.step
    )
    assert [m.step for m in history] == [0, 12, 24]
    assert history[0].value == blind["accuracy"]  # step 0 is the untouched model
    assert full["accuracy"] >= blind["accuracy"] + 0.1 and full["lo"] > 0.5
    ppl = sorted(
        mlflow.MlflowClient().get_metric_history(arms["full"].info.run_id, "val_perplexity"), key=lambda m: m.step
    )
    assert len(ppl) == 3 and min(m.value for m in ppl) < ppl[0].value
    for key in ("lora_attention", "lora_ffn"):  # 1 epoch of 3 steps: evaluated at the start and the end
        curve = mlflow.MlflowClient().get_metric_history(arms[key].info.run_id, "kr_accuracy")
        assert sorted(m.step for m in curve) == [0, 3]
        assert arms[key].data.params["recipe.epochs"] == "1" and parent.data.params["lora.epochs"] == "1"
    assert arms["full"].data.params["recipe.epochs"] == "8" and parent.data.params["full.epochs"] == "8"
