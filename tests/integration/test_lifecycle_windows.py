"""The lifecycle has no gap (issue 30, item 3): Ctrl-C or SIGTERM while the pipeline measures the device's GEMM
peak, and while a resume sets its run RUNNING again, leave no run RUNNING and the session folder free.

Each window is held open in a real ``cctk`` process by patching the step to wait (this file's ``WINDOW``
wrapper, nothing in cctk itself), so the signal lands there every time, not by timing."""

import os
import signal
import subprocess
import sys
import time

import mlflow
import pytest
from servers import as_from_a_terminal

from cctk.store import session

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# Runs the CLI with one step made to wait: "peak" (the GEMM peak, right after the parent run opened) or
# "reopen" (a resume's run just set RUNNING again); a file says the step was reached.
WINDOW = """
import os, pathlib, sys, time
from cctk.core.lm import compute
from cctk.store import tracking

def waiting(*args, **kwargs):
    pathlib.Path(os.environ["CCTK_WINDOW_REACHED"]).touch()
    time.sleep(300)

if os.environ["CCTK_WINDOW"] == "peak":
    compute.peak_gflops = waiting
else:
    reopen = tracking.Store.reopen
    def reopened(self, run_id):
        run = reopen(self, run_id)
        waiting()
        return run
    tracking.Store.reopen = reopened
sys.argv = ["cctk", *sys.argv[1:]]
from cctk.cli.main import main
main()
"""


def _stopped_in(window: str, args: list[str], env: dict, reached, signum: int) -> int:
    """Run ``cctk args`` with ``window`` held open, send ``signum`` once it is reached; the exit code."""
    env = {**env, "CCTK_WINDOW": window, "CCTK_WINDOW_REACHED": str(reached)}
    proc = subprocess.Popen(
        [sys.executable, "-c", WINDOW, *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_from_a_terminal,
    )
    try:
        deadline = time.monotonic() + 180
        while not reached.exists():
            assert proc.poll() is None, proc.stderr.read()[-2000:]
            assert time.monotonic() < deadline, f"the {window} window was not reached"
            time.sleep(0.1)
        proc.send_signal(signum)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    reached.unlink()
    return proc.returncode


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_in_the_peak_or_the_reopening_leaves_no_run_running(signum, code, tiny_dir, tmp_path, new_store):
    uri, out = new_store(tmp_path), tmp_path / "out"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "PYTHONPATH": os.getcwd()}
    common = ["run", "--no-figures", "--no-system-metrics", "--out", str(out)]
    reached = tmp_path / "reached"

    exit_code = _stopped_in(
        "peak",
        [*common, "--model", str(tiny_dir), "--profile", "smoke", "--seed", "5", "--parts", "A"],
        env,
        reached,
        signum,
    )
    client = mlflow.MlflowClient(uri)
    (parent,) = client.search_runs([client.get_experiment_by_name("cctk").experiment_id], "")
    assert (exit_code, parent.info.status) == (code, "KILLED")
    (folder,) = out.iterdir()
    session.release(session.hold(folder))  # let go of: a resume can take it

    exit_code = _stopped_in("reopen", [*common, "--resume", parent.info.run_id], env, reached, signum)
    runs = client.search_runs([parent.info.experiment_id], "")
    assert (exit_code, [r.info.status for r in runs]) == (code, ["KILLED"])  # no model run began either
    session.release(session.hold(folder))
