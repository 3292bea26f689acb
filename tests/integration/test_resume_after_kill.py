"""A smoke pipeline killed with SIGKILL in the middle of an arm resumes to the uninterrupted result. Its ``cctk``
processes are forked from one that imported what they import (``servers.CctkForks``): each a real process running
the real CLI, killed by a real SIGKILL."""

import os
import signal
import time
from dataclasses import replace
from pathlib import Path

import mlflow
import pandas as pd
from servers import CctkForks

from cctk.core.config import parse_seeds
from cctk.manuals.configure import make_config
from cctk.manuals.v2.parts import compute_tables
from cctk.pipeline import stages as pipeline
from cctk.results import load


def _killed_once_it_says(forks: CctkForks, args: list[str], env: dict, log: Path, start: str) -> None:
    """``cctk args``, sent SIGKILL as soon as it prints a line that starts with ``start``."""
    proc = forks.start(args, env, log)
    deadline = time.monotonic() + 900
    while not log.is_file() or not any(line.startswith(start) for line in log.read_text().splitlines()):
        assert proc.poll() is None, f"ended before {start!r}: " + proc.output()[-2000:]
        assert time.monotonic() < deadline, f"no line {start!r} in 900 s"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL


def _resumed(forks: CctkForks, run_id: str, env: dict, out: Path) -> str:
    """``cctk run --resume RUN_ID --no-figures --out OUT`` to its end (exit 0); what it printed."""
    done = forks.start(["run", "--resume", run_id, "--no-figures", "--out", str(out)], env, out.parent / "resumed.log")
    assert done.wait(timeout=900) == 0, done.output()[-2000:]
    return done.output()


def _pipeline_runs(client):
    experiment = client.get_experiment_by_name("cctk")
    return client.search_runs([experiment.experiment_id], "tags.`cctk.kind` = 'pipeline'")


def test_sigkill_then_resume_gives_the_uninterrupted_tables(tiny_dir, tmp_path, monkeypatch, new_store, forks):
    uri = new_store(tmp_path)
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "PYTHONPATH": os.getcwd()}
    args = ["run", "--model", str(tiny_dir), "--profile", "smoke", "--seed", "11", "--no-figures"]
    # tables only are compared: a resume that draws figures (and keeps the heatmaps of the finished arms) is
    # tests/integration/test_stage_walk.py's.
    # arm 4 (control for + 18: m_correct's children that are no parents train before m_random) has trained;
    # it is killed before its measurement is finished
    _killed_once_it_says(forks, [*args, "--out", str(tmp_path / "out")], env, tmp_path / "killed.log", "arm 4/13")

    client = mlflow.MlflowClient(uri)
    (parent,) = _pipeline_runs(client)
    before = {
        r.data.tags["cctk.key"]: r.info.run_id
        for r in client.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
        if r.info.status == "FINISHED"
    }
    assert set(before) == {"base", "m_correct", "c18_correct", "c3_correct"}

    assert "4 of 14 models already finished" in _resumed(forks, parent.info.run_id, env, tmp_path / "out")

    children = client.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    finished = [r for r in children if r.info.status == "FINISHED"]
    assert len(finished) == 14
    for key, run_id in before.items():  # taken from their runs, not trained again
        assert [r.info.run_id for r in children if r.data.tags["cctk.key"] == key] == [run_id]
    statuses = sorted(r.info.status for r in children if r.data.tags["cctk.key"] == "c18ctl_correct")
    assert statuses == ["FINISHED", "KILLED"]
    assert client.get_run(parent.info.run_id).info.status == "FINISHED"

    monkeypatch.setenv("MLFLOW_TRACKING_URI", new_store(tmp_path, "other.db"))
    # only its tables are compared: no figures (75 files in three formats) and no system metrics
    straight = pipeline.run(
        make_config(str(tiny_dir), "smoke", parse_seeds("11")),
        pipeline.Where(tmp_path / "straight"),
        replace(pipeline.QUIET, system_metrics=False, figures=False),
    )
    resumed = load(next((tmp_path / "out").iterdir()))
    expected = compute_tables(straight.results)
    for name, table in expected.items():
        got = resumed.tables[name]
        if name == "table11":
            cols = ["model", "examples", "steps", "loss_first_epoch", "loss_last_epoch"]
            table, got = table[cols], got[cols]
        pd.testing.assert_frame_equal(got.reset_index(drop=True), table.reset_index(drop=True), check_dtype=False)


def test_a_run_of_two_parts_resumes_to_its_own_parts(tiny_dir, tmp_path, new_store, forks):
    """``--parts A,C`` trains 8 arms; killed in the fourth, resumed, it finishes those 8 and no others."""
    uri = new_store(tmp_path)
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "PYTHONPATH": os.getcwd()}
    args = ["run", "--model", str(tiny_dir), "--profile", "smoke", "--seed", "11", "--parts", "A,C", "--no-figures"]
    _killed_once_it_says(forks, [*args, "--out", str(tmp_path / "out")], env, tmp_path / "killed.log", "arm 4/8")
    client = mlflow.MlflowClient(uri)
    (parent,) = _pipeline_runs(client)
    assert parent.data.params["parts"] == "A,C"
    assert "4 of 9 models already finished" in _resumed(forks, parent.info.run_id, env, tmp_path / "out")
    children = client.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    finished = sorted(r.data.tags["cctk.key"] for r in children if r.info.status == "FINISHED")
    assert finished == sorted(
        [
            "base",
            "m_correct",
            "m_random",
            "c18_correct",
            "c18_random",
            "c3_correct",
            "c3_random",
            "c18ctl_correct",
            "c3ctl_correct",
        ]
    )
    resumed = load(next((tmp_path / "out").iterdir()))
    assert resumed.parts == ("A", "C") and list(resumed.tables) == [
        "table01",
        "table04",
        "table09",
        "table10",
        "table11",
    ]
