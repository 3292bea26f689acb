import json

import mlflow
import pandas as pd
import pytest
from click.testing import CliRunner

from cctk.cli.main import cli
from cctk.core.stats import clopper_pearson
from cctk.krtest.generation.generate import make_dataset, write_dataset
from cctk.krtest.measurement.scoring import ITEM_COLUMNS, PASSAGE_COLUMNS, by_passage


def test_eval_writes_items_and_summary_prints_and_tracks(tiny_dir, tracking_uri, tmp_path):
    data = make_dataset(5, entities=2, validation_entities=2)
    paths = write_dataset(data, tmp_path / "data")
    for book in (False, True):
        out = tmp_path / ("book" if book else "blind")
        args = [
            "krtest",
            "eval",
            "--model",
            str(tiny_dir),
            "--questions",
            str(paths["questions.jsonl"]),
            "--corpus",
            str(paths["corpus.txt"]),
            "--out",
            str(out),
        ] + (["--open-book"] if book else [])
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        items = pd.read_csv(out / "items.csv")
        assert list(items.columns) == ITEM_COLUMNS and items.line.tolist() == list(range(1, 13))
        assert items.location.tolist() == [i.location for i in data.items]
        assert items.context.tolist() == [i.context for i in data.items]  # the item's own, open book or not
        assert (items.margin == items.logprob_true - items.logprob_false).all()
        assert (items.correct == (items.margin > 0)).all()
        passages = pd.read_csv(out / "by_passage.csv")
        assert list(passages.columns) == PASSAGE_COLUMNS and passages["items"].tolist() == [6, 6]
        assert passages.correct.tolist() == [int(items.correct[:6].sum()), int(items.correct[6:].sum())]
        summary = json.loads((out / "summary.json").read_text())
        assert list(summary) == ["n", "correct", "accuracy", "lo", "hi", "mean_margin", "ties", "identical"]
        assert summary["n"] == 12 and summary["correct"] == int(items.correct.sum())
        assert f"KR accuracy {100 * summary['accuracy']:.1f}% (exact 95% CI" in result.output
        (newest, *_) = mlflow.search_runs(search_all_experiments=True, output_format="list")
        assert newest.data.tags["cctk.arm"] == ("open_book" if book else "blind")
        assert result.output.splitlines()[-1] == f"MLflow UI: cctk ui {newest.info.run_id}"  # before: not named
    runs = mlflow.search_runs(search_all_experiments=True, output_format="list")
    assert sorted(r.data.tags["cctk.arm"] for r in runs) == ["blind", "open_book"]
    client = mlflow.MlflowClient()
    for run in runs:
        assert run.data.tags["cctk.kind"] == "krtest" and run.data.params["location"] == "char"
        assert {"accuracy", "lo", "hi", "mean_margin", "ties", "identical", "n", "correct"} <= set(run.data.metrics)
        assert {a.path for a in client.list_artifacts(run.info.run_id)} == {
            "items.csv",
            "by_passage.csv",
            "summary.json",
        }
        inputs = {d.dataset.name: d for d in client.get_run(run.info.run_id).inputs.dataset_inputs}
        assert set(inputs) == {"kr questions data", "kr corpus data"}  # data/questions.jsonl, data/corpus.txt
        assert inputs["kr questions data"].dataset.source_type == "local"


def test_by_passage_counts_and_exact_intervals():
    table = pd.DataFrame(
        {
            "location": [40, 0, 40, 0, 0],
            "correct": [True, True, False, False, True],
            "margin": [1.0, 2.0, -1.0, -0.5, 0.5],
        }
    )
    found = by_passage(table)
    assert found.location.tolist() == [0, 40] and found["items"].tolist() == [3, 2]
    assert found.correct.tolist() == [2, 1] and found.accuracy.tolist() == [2 / 3, 0.5]
    assert (found.lo[0], found.hi[0]) == pytest.approx(clopper_pearson(2, 3))
    assert found.lo[0] == pytest.approx(0.094299, abs=1e-6) and found.hi[0] == pytest.approx(0.991596, abs=1e-6)
    assert found.mean_margin.tolist() == pytest.approx([2 / 3, 0.0])


def test_line_locations_on_eval(tiny_dir, tracking_uri, tmp_path):
    data = make_dataset(5, entities=2, validation_entities=2, location="line")
    paths = write_dataset(data, tmp_path / "data")
    args = [
        "krtest",
        "eval",
        "--model",
        str(tiny_dir),
        "--questions",
        str(paths["questions.jsonl"]),
        "--corpus",
        str(paths["corpus.txt"]),
        "--out",
        str(tmp_path / "out"),
        "--open-book",
    ]
    assert CliRunner().invoke(cli, [*args, "--location", "line"]).exit_code == 0
    assert pd.read_csv(tmp_path / "out" / "by_passage.csv").location.tolist() == [0, 2]
    wrong = CliRunner().invoke(cli, [*args[:-1], "--location", "line", "--segment", "tokens:20"])
    assert wrong.exit_code == 1 and "--location line cannot point at a token window" in wrong.output


@pytest.mark.parametrize(
    ("error", "status"), [(RuntimeError("scoring broke"), "FAILED"), (KeyboardInterrupt(), "KILLED")]
)
def test_an_interrupted_eval_ends_its_run_failed_or_killed(
    tiny_dir, tracking_uri, tmp_path, monkeypatch, error, status
):
    import cctk.krtest.commands.jobs as jobs

    paths = write_dataset(make_dataset(5, entities=2, validation_entities=2), tmp_path / "data")

    def broken(*args, **kwargs):
        raise error

    monkeypatch.setattr(jobs, "score", broken)
    with pytest.raises(type(error)):
        jobs.run_eval(str(tiny_dir), paths["questions.jsonl"], tmp_path / "out", echo=lambda *_: None)
    run = mlflow.search_runs(search_all_experiments=True, output_format="list")[0]
    assert run.info.status == status and run.data.tags["cctk.kind"] == "krtest"
    if status == "FAILED":
        assert run.data.tags["cctk.error"] == "RuntimeError: scoring broke"
