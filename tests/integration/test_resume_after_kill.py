"""A smoke pipeline killed with SIGKILL in the middle of an arm resumes to the uninterrupted result."""

import os
import signal
import subprocess
import sys
from dataclasses import replace

import mlflow
import pandas as pd

from cctk.core.config import parse_seeds
from cctk.manuals.registry import make_config
from cctk.manuals.v2.parts import compute_tables
from cctk.pipeline import stages as pipeline
from cctk.results import load


def _pipeline_runs(client):
    experiment = client.get_experiment_by_name("cctk")
    return client.search_runs([experiment.experiment_id], "tags.`cctk.kind` = 'pipeline'")


def test_sigkill_then_resume_gives_the_uninterrupted_tables(tiny_dir, tmp_path, monkeypatch, new_store):
    uri = new_store(tmp_path)
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "PYTHONUNBUFFERED": "1"}
    command = [
        sys.executable,
        "-m",
        "cctk",
        "run",
        "--model",
        str(tiny_dir),
        "--profile",
        "smoke",
        "--seed",
        "11",
        "--no-figures",
        "--out",
        str(tmp_path / "out"),
    ]  # tables only are compared:
    # a resume that draws figures (and keeps the heatmaps of the finished arms) is
    # tests/integration/test_stage_walk.py's
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    # arm 4 (control for + 18: m_correct's children that are no parents train before m_random) has trained;
    # it is killed before its measurement is finished
    for line in proc.stdout:
        if line.startswith("arm 4/13"):
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL

    client = mlflow.MlflowClient(uri)
    (parent,) = _pipeline_runs(client)
    before = {
        r.data.tags["cctk.key"]: r.info.run_id
        for r in client.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
        if r.info.status == "FINISHED"
    }
    assert set(before) == {"base", "m_correct", "c18_correct", "c3_correct"}

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cctk",
            "run",
            "--resume",
            parent.info.run_id,
            "--no-figures",
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "4 of 14 models already finished" in done.stdout

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


def test_a_run_of_two_parts_resumes_to_its_own_parts(tiny_dir, tmp_path, new_store):
    """``--parts A,C`` trains 8 arms; killed in the fourth, resumed, it finishes those 8 and no others."""
    uri = new_store(tmp_path)
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "PYTHONUNBUFFERED": "1"}
    command = [
        sys.executable,
        "-m",
        "cctk",
        "run",
        "--model",
        str(tiny_dir),
        "--profile",
        "smoke",
        "--seed",
        "11",
        "--parts",
        "A,C",
        "--no-figures",
        "--out",
        str(tmp_path / "out"),
    ]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    for line in proc.stdout:
        if line.startswith("arm 4/8"):
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=60)
    client = mlflow.MlflowClient(uri)
    (parent,) = _pipeline_runs(client)
    assert parent.data.params["parts"] == "A,C"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cctk",
            "run",
            "--resume",
            parent.info.run_id,
            "--no-figures",
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "4 of 9 models already finished" in done.stdout
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
