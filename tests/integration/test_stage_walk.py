"""A tiny-model pipeline (Part A) stopped at several stages, by Ctrl-C and SIGTERM in turn, then resumed each
time: every stop exits 130 or 143 with no run left RUNNING, and the last resume's tables equal an
uninterrupted run's (issue 31)."""
import os
import signal
import subprocess
import sys

import mlflow
import pandas as pd
import pytest

from cctk import pipeline, tracking
from cctk.config import make_config, parse_seeds
from cctk.errors import CctkError
from cctk.results import load

pytestmark = pytest.mark.integration

# (the line after which the signal is sent, the signal, the exit code the shell expects)
STOPS = [("loading ", signal.SIGINT, 130),  # before the base model is measured: the folder holds targets.csv
         ("arm 2/2", signal.SIGTERM, 143)]  # the last arm trained: its measurement, the tables, the outputs
# (a stop after arm 1 adds little and a minute on two shared cores; tests/integration/test_resume_after_kill.py
# and test_lifecycle.py stop arms mid-training)


def _stopped(command: list[str], env: dict, after: str, signum: int, while_live=None) -> int:
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    for line in proc.stdout:
        if line.startswith(after):
            if while_live is not None:
                while_live()
            proc.send_signal(signum)
            break
    proc.stdout.read()
    return proc.wait(timeout=120)


def _runs(client, experiment_id):
    return client.search_runs([experiment_id], "")


def test_stops_at_each_stage_resume_to_the_uninterrupted_tables(tiny_dir, tmp_path, monkeypatch):
    uri, out = f"sqlite:///{tmp_path}/mlflow.db", tmp_path / "out"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "PYTHONUNBUFFERED": "1"}
    base = [sys.executable, "-m", "cctk", "run", "--no-figures", "--no-system-metrics", "--out", str(out)]
    command = base + ["--model", str(tiny_dir), "--profile", "smoke", "--seed", "5", "--parts", "A"]
    client = mlflow.MlflowClient(uri)
    walked = []
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)

    def refused_while_live():  # the process holds its session folder: a resume now is refused
        store = tracking.connect()
        (live,) = store.search([store.experiment()], "tags.`cctk.kind` = 'pipeline'")
        with pytest.raises(CctkError, match=f"run {live.run_id} is still running: its process holds"):
            pipeline.resume(live.run_id, out)

    for i, (after, signum, code) in enumerate(STOPS):
        walked.append((after, _stopped(command, env, after, signum, refused_while_live if i == 0 else None)))
        experiment = client.get_experiment_by_name("cctk").experiment_id
        (parent,) = [r for r in _runs(client, experiment) if r.data.tags.get("cctk.kind") == "pipeline"]
        assert walked[-1] == (after, code) and parent.info.status == "KILLED", walked
        assert "RUNNING" not in {r.info.status for r in _runs(client, experiment)}
        if i == 0:  # the earliest moment a run can be resumed from
            assert [p.name for p in next(out.iterdir()).iterdir()] == ["targets.csv"]
        command = base + ["--resume", parent.info.run_id]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert client.get_run(parent.info.run_id).info.status == "FINISHED"

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/other.db")
    straight = pipeline.run(make_config(str(tiny_dir), "smoke", parse_seeds("5"), parts="A"), tmp_path / "straight",
                            echo=lambda *_: None, system_metrics=False, figures=False)
    resumed = load(next(out.iterdir()))
    for name, table in pipeline.protocols.get("v2").compute_tables(straight.results).items():
        got = resumed.tables[name]
        if name == "table11":  # times differ
            cols = ["model", "examples", "steps", "loss_first_epoch", "loss_last_epoch"]
            table, got = table[cols], got[cols]
        pd.testing.assert_frame_equal(got.reset_index(drop=True), table.reset_index(drop=True), check_dtype=False)
