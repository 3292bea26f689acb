"""The accelerator's step in whole commands, on this CPU (``CCTK_DEVICE_STEP=1``): the step every GPU user
takes, and no test ran before (``cctk krtest train`` and ``study`` died at their first step on every GPU).
A smoke pipeline on the device step gives the host step's tables and losses, bit for bit; a KR-Test study
on it finishes its five arms with their curves. (``make test-device-step``, which CI runs after ``make
test``, runs the training unit tests once more under the variable.)"""

import json

import mlflow
import pandas as pd
import pytest
from click.testing import CliRunner

from cctk.cli.main import cli
from cctk.krtest import ARMS
from cctk.krtest.generation.generate import make_dataset, write_dataset

pytestmark = pytest.mark.integration


def _pipeline(tiny_dir, out, device_step: str, monkeypatch):
    monkeypatch.setenv("CCTK_DEVICE_STEP", device_step)
    result = CliRunner().invoke(
        cli,
        [
            "run",
            "--model",
            str(tiny_dir),
            "--profile",
            "smoke",
            "--seed",
            "7",
            "--parts",
            "A",
            "--out",
            str(out),
            "--no-figures",
            "--no-system-metrics",
        ],
    )
    assert result.exit_code == 0, result.output
    (folder,) = out.iterdir()
    return folder


def _measured(table: pd.DataFrame) -> pd.DataFrame:
    """A table without its clock and memory columns (the table of fine-tuning runs times each arm)."""
    timed = ("seconds", "per_second", "per second", "examples/s", "memory")
    return table[[c for c in table.columns if not any(t in c.lower() for t in timed)]]


def test_a_smoke_pipeline_on_the_device_step_gives_the_host_steps_tables(tiny_dir, tmp_path, tracking_uri, monkeypatch):
    host = _pipeline(tiny_dir, tmp_path / "host", "0", monkeypatch)
    device = _pipeline(tiny_dir, tmp_path / "device", "1", monkeypatch)
    tables = sorted(p.relative_to(host) for p in host.glob("tables/*/*.csv"))
    assert len(tables) >= 3
    for name in tables:
        pd.testing.assert_frame_equal(*(_measured(pd.read_csv(f / name)) for f in (device, host)))
    for name in sorted(p.relative_to(host) for p in host.glob("measurements/*.csv")):
        pd.testing.assert_frame_equal(pd.read_csv(device / name), pd.read_csv(host / name))
    losses = [
        {k: v["losses"] for k, v in json.loads((f / "run_info.json").read_text())["training"].items()}
        for f in (host, device)
    ]
    assert losses[0] == losses[1] and set(losses[0]) == {"m_correct", "m_random"}
    runs = mlflow.search_runs(search_all_experiments=True, output_format="list")
    assert runs and all(r.info.status == "FINISHED" for r in runs)


def test_a_krtest_study_on_the_device_step_finishes_with_its_curves(
    tiny_dir_bundled, tmp_path, tracking_uri, monkeypatch
):
    data = tmp_path / "data"
    write_dataset(make_dataset(4, entities=4, validation_entities=2), data)
    monkeypatch.setenv("CCTK_DEVICE_STEP", "1")
    result = CliRunner().invoke(
        cli,
        [
            "krtest",
            "study",
            "--model",
            str(tiny_dir_bundled),
            "--data",
            str(data),
            "--epochs",
            "1",
            "--batch-size",
            "2",
            "--eval-every",
            "1",
            "--budget",
            "5000",
            "--out",
            str(tmp_path / "out"),
        ],
    )
    assert result.exit_code == 0, result.output
    runs = mlflow.search_runs(search_all_experiments=True, output_format="list")
    assert all(r.info.status == "FINISHED" for r in runs)
    arms = {r.data.tags["cctk.arm"]: r for r in runs if "cctk.arm" in r.data.tags}
    assert set(arms) == set(ARMS)
    client = mlflow.MlflowClient()
    for key in ("full", "lora_attention", "lora_ffn"):
        run_id = arms[key].info.run_id
        assert sorted(m.step for m in client.get_metric_history(run_id, "kr_accuracy")) == [0, 1, 2]
        assert sorted(m.step for m in client.get_metric_history(run_id, "train_loss")) == [1, 2]
