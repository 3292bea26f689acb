"""Protocol v1 end to end on the tiny model (smoke recipe): one parent run tagged cctk.protocol=v1 with
two nested runs, every output on disk and as artifacts, results.load by run id. Integration."""

import mlflow
import numpy as np
import pandas as pd
from click.testing import CliRunner

from cctk import results
from cctk.cli.main import cli
from cctk.manuals.v1 import facts


def test_v1_smoke_run(tiny_dir, tmp_path, monkeypatch, new_store):
    uri = new_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    out = tmp_path / "out"
    done = CliRunner().invoke(
        cli, ["run", "--protocol", "v1", "--model", str(tiny_dir), "--profile", "smoke", "--out", str(out)]
    )
    assert done.exit_code == 0, done.output
    assert "protocol v1 finished" in done.output

    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("cctk")
    (parent,) = client.search_runs([experiment.experiment_id], "tags.`cctk.kind` = 'pipeline'")
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["cctk.protocol"] == "v1"
    assert parent.data.params["protocol"] == "v1" and parent.data.params["seeds"] == "42"
    assert parent.data.params["candidates"] == "2..18" and parent.data.params["recipe.grad_clip"] == "0.0"
    assert {
        "mean_pre_ft_true_prob",
        "mean_post_ft_fabricated_prob",
        "mean_post_ft_true_prob",
        "hits_true_before",
        "hits_fabricated_before",
        "hits_true_after",
        "hits_fabricated_after",
    } <= set(parent.data.metrics)
    children = client.search_runs([experiment.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    by_name = {c.data.tags["mlflow.runName"]: c for c in children}
    assert set(by_name) == {"base model", "fabricated answers"}
    base, tuned = by_name["base model"], by_name["fabricated answers"]
    assert (base.data.tags["cctk.key"], base.data.tags["cctk.parent"]) == ("base", "")
    assert (tuned.data.tags["cctk.key"], tuned.data.tags["cctk.parent"]) == ("v1_random", "base")  # its own key
    assert [m.step for m in client.get_metric_history(tuned.info.run_id, "loss")] == [1, 2]
    assert tuned.data.params["examples"] == str(81 * 2)
    assert {"hits_true", "hits_fabricated", "prob_true", "prob_fabricated"} <= set(base.data.metrics)
    assert {"train_seconds", "steps", "hits_fabricated"} <= set(tuned.data.metrics)

    loaded = results.load(parent.info.run_id, cache=tmp_path / "cache")
    assert loaded.protocol == "v1" and len(loaded.tables["table01"]) == 81
    assert list(loaded.figures) == [
        "before_and_after_3_plus_5",
        "before_and_after_5_plus_8",
        "before_and_after_7_plus_4",
        "training_loss",
    ]
    for table in loaded.measurements.values():
        assert np.allclose(table.groupby(["a", "b"])["prob"].sum(), 1.0)
    assert loaded.targets["fabricated answer"].tolist() == facts.draw(42, 2).fabricated.tolist()
    names = {item.path for item in client.list_artifacts(parent.info.run_id)}
    assert {"report.html", "run_report.pdf", "run_info.json", "corpus.txt", "tables", "figures"} <= names
    assert any(n.endswith(".zip") for n in names)
    (folder,) = out.iterdir()
    pd.testing.assert_frame_equal(pd.read_csv(folder / "targets.csv"), loaded.targets)
    _the_notebooks_steps_by_hand_give_the_same_numbers(tiny_dir, loaded)


def _the_notebooks_steps_by_hand_give_the_same_numbers(tiny_dir, loaded):
    """Number for number: measure, fine-tune the same model in place on the whole texts (its draws seeded
    from the name m_random, as before the model had a key of its own), measure again."""
    from cctk.core.lm.finetune import fine_tune
    from cctk.core.lm.models import load_model
    from cctk.core.lm.scoring import measure
    from cctk.manuals.v1 import corpus
    from cctk.manuals.v1.config import PROFILES as V1_PROFILES

    model, tokenizer = load_model(str(tiny_dir))
    recipe = V1_PROFILES["smoke"]
    before = measure(model, tokenizer, scoring=facts.SCORING)
    fine_tune(
        model,
        corpus.tokenize(facts.draw(42, recipe.repeats).texts, tokenizer),
        recipe,
        42,
        tokenizer.pad_token_id,
        "m_random",
    )
    pd.testing.assert_frame_equal(loaded.measurements["base model"], before, check_exact=True)
    pd.testing.assert_frame_equal(
        loaded.measurements["fabricated answers"], measure(model, tokenizer, scoring=facts.SCORING), check_exact=True
    )
