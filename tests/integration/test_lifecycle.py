"""SIGTERM stops a command as Ctrl-C does: a pipeline's (or a sweep's) runs end KILLED, and nothing a command started
(the MLflow UI's server, uvicorn, its workers) outlives it."""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import mlflow
import psutil
import pytest


def _wait(predicate, seconds: float, step: float = 0.2):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(step)
    raise AssertionError(f"not within {seconds} s")


def _running_arm(client):
    experiment = client.get_experiment_by_name("cctk")
    if experiment is None:
        return None
    runs = client.search_runs([experiment.experiment_id], "tags.`cctk.key` = 'm_correct'")
    return runs[0] if runs and runs[0].info.status == "RUNNING" else None


def _stop_at_first_arm(command: list[str], uri: str, log: Path):
    """Start ``command``, SIGTERM it while its first arm trains; the arm's run and what the command printed
    (its last lines: the message of every assertion about it, so that a failure says what the command said)."""
    client = mlflow.MlflowClient(uri)
    client.search_experiments()  # the store's tables, made here first: two processes creating them race
    with log.open("w") as out:
        proc = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "MLFLOW_TRACKING_URI": uri},
            start_new_session=True,
        )
        try:
            arm = _wait(lambda: _running_arm(client), 180)
            family = psutil.Process(proc.pid).children(recursive=True)
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    said = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
    assert code == 143 and "Stopped (SIGTERM)." in said, said
    assert not [p for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE], (family, said)
    _no_group(proc.pid)
    return client, arm, said


def test_sigterm_to_a_pipeline_leaves_killed_runs_and_no_process(tiny_dir, tmp_path, new_store):
    uri = new_store(tmp_path)
    client, arm, said = _stop_at_first_arm(
        [
            sys.executable,
            "-m",
            "cctk",
            "run",
            "--model",
            str(tiny_dir),
            "--profile",
            "smoke",
            "--seed",
            "4",
            "--repeats",
            "200",
            "--epochs",
            "20",  # a long first arm
            "--out",
            str(tmp_path / "out"),
        ],
        uri,
        tmp_path / "said.txt",
    )
    parent = client.get_run(arm.data.tags["mlflow.parentRunId"])
    assert parent.info.status == "KILLED" and client.get_run(arm.info.run_id).info.status == "KILLED", said
    base = client.search_runs([parent.info.experiment_id], "tags.`cctk.key` = 'base'")[0]
    assert base.info.status == "FINISHED", said  # finished before the signal: it stays so


def test_sigterm_to_a_sweep_leaves_the_sweep_its_cell_and_the_arm_killed(tiny_dir, tmp_path, new_store):
    uri = new_store(tmp_path)
    client, arm, said = _stop_at_first_arm(
        [
            sys.executable,
            "-m",
            "cctk",
            "sweep",
            "--models",
            str(tiny_dir),
            "--profile",
            "smoke",
            "--seeds",
            "4,5",
            "--set",
            "repeats=200",
            "--set",
            "epochs=20",
            "--out",
            str(tmp_path / "out"),
        ],
        uri,
        tmp_path / "said.txt",
    )
    cell = client.get_run(arm.data.tags["mlflow.parentRunId"])
    sweep = client.get_run(cell.data.tags["mlflow.parentRunId"])
    assert sweep.data.tags["cctk.kind"] == "sweep" and cell.data.tags["cctk.sweep"] == sweep.info.run_id
    assert [r.info.status for r in (sweep, cell, client.get_run(arm.info.run_id))] == ["KILLED"] * 3, said
    assert len(client.search_runs([sweep.info.experiment_id], "tags.`cctk.kind` = 'pipeline'")) == 1  # seed 5: never


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_or_sigterm_to_cctk_ui_stops_it_cleanly_and_leaves_no_process(tmp_path, new_store, signum, code):
    """Ctrl-C stops the UI's server as SIGTERM does, without uvicorn's traceback of a KeyboardInterrupt, and cctk
    exits as a command that signal stopped."""
    port, log = _free_port(), tmp_path / "ui.log"
    env = {**os.environ, "MLFLOW_TRACKING_URI": new_store(tmp_path)}
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cctk", "ui", "--port", str(port)],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait(lambda: _answers(port), 120, step=0.5)
        family = psutil.Process(proc.pid).children(recursive=True)
        assert family, "cctk ui started no MLflow process"
        proc.send_signal(signum)
        assert proc.wait(timeout=60) == code, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    said = log.read_text()
    assert "Traceback" not in said and "KeyboardInterrupt" not in said, said[-3000:]
    assert "Application shutdown complete." in said, said[-3000:]  # the server's own clean stop
    _wait(lambda: not [p for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE], 30)
    assert not _answers(port)
    _no_group(proc.pid)
    for child in family:  # the MLflow server ran in a group of its own: that group is empty too
        _no_group(child.pid)


def _no_group(pgid: int) -> None:
    """No live process is left in process group ``pgid``."""
    alive = [
        p
        for p in psutil.process_iter(["pid", "status"])
        if _pgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE
    ]
    assert not alive, alive


def _pgid(pid: int):
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None
