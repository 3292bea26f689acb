import json

import mlflow
import pandas as pd
from click.testing import CliRunner

from cctk.cli import cli
from cctk.krtest.generate import make_dataset, write_dataset
from cctk.krtest.scoring import ITEM_COLUMNS


def test_eval_writes_items_and_summary_prints_and_tracks(tiny_dir, tracking_uri, tmp_path):
    paths = write_dataset(make_dataset(5, entities=2, validation_entities=2), tmp_path / "data")
    for book in (False, True):
        out = tmp_path / ("book" if book else "blind")
        args = ["krtest", "eval", "--model", str(tiny_dir), "--questions", str(paths["questions.jsonl"]),
                "--corpus", str(paths["corpus.txt"]), "--out", str(out)] + (["--open-book"] if book else [])
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        items = pd.read_csv(out / "items.csv")
        assert list(items.columns) == ITEM_COLUMNS and items.line.tolist() == list(range(1, 13))
        assert (items.margin == items.logprob_true - items.logprob_false).all()
        assert (items.correct == (items.margin > 0)).all()
        summary = json.loads((out / "summary.json").read_text())
        assert list(summary) == ["n", "correct", "accuracy", "lo", "hi", "mean_margin", "ties", "identical"]
        assert summary["n"] == 12 and summary["correct"] == int(items.correct.sum())
        assert f"KR accuracy {100 * summary['accuracy']:.1f}% (exact 95% CI" in result.output
    runs = mlflow.search_runs(search_all_experiments=True, output_format="list")
    assert sorted(r.data.tags["cctk.arm"] for r in runs) == ["blind", "open_book"]
    client = mlflow.MlflowClient()
    for run in runs:
        assert run.data.tags["cctk.kind"] == "krtest"
        assert {"accuracy", "lo", "hi", "mean_margin", "ties", "identical", "n", "correct"} <= set(run.data.metrics)
        assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"items.csv", "summary.json"}
