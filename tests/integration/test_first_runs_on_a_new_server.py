"""Three first runs at once against a new ``mlflow server`` (SQLite backend, loopback): the experiment and its
``mlflow.experimentKind`` tag are created by whichever comes first, the others' refused inserts are no error,
and every pipeline FINISHES (issue 31, defect 3).

The three processes are held at the door of ``Store.experiment`` (this file's ``RACE`` wrapper, nothing in
cctk) and let in together, so they race on the experiment's creation every time, not by timing."""

import os
import subprocess
import sys
import time

import mlflow
import pytest
from servers import mlflow_server

from cctk.store import tracking

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RACE = """
import os, pathlib, sys, time
from cctk.store import tracking

experiment = tracking.Store.experiment

def at_once(self, *args, **kwargs):
    pathlib.Path(os.environ["CCTK_RACE_READY"]).touch()
    while not pathlib.Path(os.environ["CCTK_RACE_GO"]).exists():
        time.sleep(0.005)
    return experiment(self, *args, **kwargs)

tracking.Store.experiment = at_once
sys.argv = ["cctk", *sys.argv[1:]]
from cctk.cli.main import main
main()
"""
N = 3


@pytest.fixture
def new_server(tmp_path):
    """A fresh ``mlflow server`` on loopback whose SQLite store holds nothing yet (no cctk experiment)."""
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    with mlflow_server(f"sqlite:///{tmp_path}/server.db", tmp_path, workers=2, env=env) as url:
        yield url


def test_three_first_runs_at_once_on_a_new_server_all_finish(new_server, tiny_dir, tmp_path):
    assert mlflow.MlflowClient(new_server).get_experiment_by_name(tracking.EXPERIMENT) is None
    # one OpenMP thread each: three processes of two threads on two cores spin at every barrier of the tiny
    # model's small matrix products (this test took 104 s of CPU with them, 63 s without, beside another job)
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"} | {"OMP_NUM_THREADS": "1"}
    go, procs = tmp_path / "go", []
    for seed in range(1, N + 1):
        command = [
            sys.executable,
            "-c",
            RACE,
            "run",
            "--model",
            str(tiny_dir),
            "--profile",
            "smoke",
            "--seed",
            str(seed),
            "--parts",
            "A",
            "--no-figures",
            "--no-system-metrics",
            "--tracking",
            new_server,
            "--out",
            str(tmp_path / f"out{seed}"),
        ]
        procs.append(
            subprocess.Popen(
                command,
                env={**env, "CCTK_RACE_READY": str(tmp_path / f"ready{seed}"), "CCTK_RACE_GO": str(go)},
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    try:
        deadline = time.monotonic() + 300
        while not all((tmp_path / f"ready{seed}").exists() for seed in range(1, N + 1)):
            assert all(p.poll() is None for p in procs), [p.communicate()[0][-2000:] for p in procs if p.poll()]
            assert time.monotonic() < deadline, "the runs did not reach the experiment's creation"
            time.sleep(0.1)
        go.touch()  # all three create the experiment and tag its kind now
        outputs = [p.communicate(timeout=900)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0] * N, [o[-2000:] for o in outputs]
    client = mlflow.MlflowClient(new_server)
    (experiment,) = [e for e in client.search_experiments() if e.name == tracking.EXPERIMENT]
    assert experiment.tags["mlflow.experimentKind"] == tracking.EXPERIMENT_KIND
    runs = client.search_runs([experiment.experiment_id], "")
    parents = [r for r in runs if r.data.tags.get(tracking.KIND) == "pipeline"]
    assert sorted(p.data.params["seeds"].split(",")[0] for p in parents) == [str(s) for s in range(1, N + 1)]
    assert len(runs) == N * 4 and {r.info.status for r in runs} == {"FINISHED"}  # each: parent, base, two arms
