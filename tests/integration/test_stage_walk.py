"""A tiny-model pipeline (Part A, smoke profile) stopped at each of its stages by Ctrl-C, SIGTERM and kill -9,
and resumed each time (issue 31): before the session line, loading the model, the base model's measurement, an
arm, the tables, the figures, the reports. The Ctrl-C walk draws the figures (each arm's heatmaps as it is
measured, the rest at the figures stage, the finished arms' heatmaps kept on resume); the other two walks run
with ``--no-figures``, which reaches the figures stage at the same call with nothing to draw.

One walk per signal: a fresh run stopped before its session line (nothing is left: no run, no folder), a
fresh run stopped while loading, then ``--resume`` stopped at each later stage in turn, then a resume to the
end. After every stop by SIGINT or SIGTERM the process exits 130 or 143 with no run RUNNING (after kill -9
the runs stay RUNNING until the next resume ends them); the walk's last resume ends FINISHED with tables equal
to an uninterrupted run's (computed once for the module). The stage-by-signal table is printed at the end
(``pytest -s``) and written to ``$CCTK_STAGE_WALK_TABLE`` when set.

Each stage is held open in the real ``cctk`` process (the step waits at its start and says so in a file: the hold
of ``servers.FORK_SERVER``), so the signal lands in that stage every time, found by polling, never by sleeping a
fixed time. The 24 processes of the three walks are forked from one that imported what they import
(``servers.CctkForks``): each runs the real CLI in a process of its own and dies of its signal as a user's does;
the 4 s of imports a start pays are paid once.

A last walk stops the run the other way a user meets (issue 56): its tracking server goes away for longer than the
client's retries, in an arm; it resumes once the server is back, to the same uninterrupted tables."""

import os
import re
import signal
import time
from dataclasses import replace
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from servers import CctkForks, free_port, mlflow_server

from cctk.core.config import parse_seeds
from cctk.core.errors import CctkError
from cctk.manuals.configure import make_config
from cctk.pipeline import stages as pipeline
from cctk.results import load
from cctk.store import tracking

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# stage -> the step held at its start (module:attribute, looked up by its caller at each call)
STAGES = {
    "before the session line": "cctk.pipeline.stages:check_inputs",
    "loading": "cctk.core.lm.models:load_model",
    "base measurement": "cctk.pipeline.stages:measure",
    "an arm": "cctk.pipeline.stages:fine_tune",
    "tables": "cctk.outputs.write:write_tables",
    "figures": "cctk.outputs.render:run_all",
    "reports": "cctk.outputs.run_report:write",
}
SIGNALS = {"SIGINT": (signal.SIGINT, 130), "SIGTERM": (signal.SIGTERM, 143), "kill -9": (signal.SIGKILL, -9)}
SEED = "5"
WALKED: dict[tuple[str, str], str] = {}  # (stage, signal) -> what happened, for the table


def _stopped(forks: CctkForks, args: list[str], env: dict, stage: str, signum: int, held: Path, while_held=None) -> int:
    """Run ``cctk args`` with ``stage`` held at its start; once it is reached, send ``signum``; the exit code."""
    proc = forks.start(args, env, held.with_suffix(".log"), hold=STAGES[stage], reached=held)
    try:
        deadline = time.monotonic() + 300
        while not held.exists():
            assert proc.poll() is None, f"ended before {stage}: " + proc.output()[-2000:]
            assert time.monotonic() < deadline, f"{stage} not reached"
            time.sleep(0.05)
        if while_held is not None:
            while_held()
        proc.send_signal(signum)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=60)
    held.unlink()
    output = proc.output()
    assert signum == signal.SIGKILL or "Traceback" not in output, output[-2000:]
    return proc.returncode


@pytest.fixture(scope="module")
def uninterrupted(tiny_dir, tmp_path_factory, new_store):
    """The tables of the same run, not stopped (in this process, on a store of its own)."""
    folder = tmp_path_factory.mktemp("straight")
    old = os.environ.get("MLFLOW_TRACKING_URI")
    os.environ["MLFLOW_TRACKING_URI"] = new_store(folder)
    try:
        done = pipeline.run(
            make_config(str(tiny_dir), "smoke", parse_seeds(SEED), parts="A"),
            pipeline.Where(folder / "out"),
            replace(pipeline.QUIET, system_metrics=False, figures=False),
        )
    finally:
        os.environ.pop("MLFLOW_TRACKING_URI") if old is None else os.environ.__setitem__("MLFLOW_TRACKING_URI", old)
    return pipeline.registry.get("v2").tables(done.results)


@pytest.fixture(scope="module", autouse=True)
def table():
    """The stage-by-signal table, printed (and written) once every walk has run."""
    started = time.monotonic()
    yield
    names = list(SIGNALS)
    lines = ["| stage | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    lines += [f"| {stage} | " + " | ".join(WALKED.get((stage, s), "not run") for s in names) + " |" for stage in STAGES]
    lines.append(f"\n{len(WALKED)} stops in {time.monotonic() - started:.0f} s")
    text = "\n".join(lines)
    print("\n" + text)
    if os.environ.get("CCTK_STAGE_WALK_TABLE"):
        Path(os.environ["CCTK_STAGE_WALK_TABLE"]).write_text(text + "\n")


def _statuses(client) -> list[str]:
    experiment = client.get_experiment_by_name(tracking.EXPERIMENT)
    return [] if experiment is None else [r.info.status for r in client.search_runs([experiment.experiment_id], "")]


def _parent(client):
    experiment = client.get_experiment_by_name(tracking.EXPERIMENT)
    (parent,) = client.search_runs([experiment.experiment_id], f"tags.`{tracking.KIND}` = 'pipeline'")
    return parent


@pytest.mark.parametrize("signal_name", SIGNALS)
def test_a_walk_of_the_stages_resumes_to_the_uninterrupted_tables(
    signal_name, tiny_dir, tmp_path, uninterrupted, monkeypatch, new_store, forks
):
    signum, code = SIGNALS[signal_name]
    uri, out, held = new_store(tmp_path), tmp_path / "out", tmp_path / "held"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "PYTHONPATH": os.getcwd()}
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    figures = signal_name == "SIGINT"  # the other walks reach the figures stage with nothing to draw
    common = ["run", "--no-system-metrics", "--out", str(out)] + ([] if figures else ["--no-figures"])
    fresh = [*common, "--model", str(tiny_dir), "--profile", "smoke", "--seed", SEED, "--parts", "A"]
    client = mlflow.MlflowClient(uri)
    stops = []

    def refused_while_live():  # the process holds its session folder: a resume now is refused
        run_id = _parent(client).info.run_id
        with pytest.raises(CctkError, match=f"run {run_id} is still running: its process holds"):
            pipeline.resume(run_id, pipeline.Where(out))

    for i, stage in enumerate(STAGES):
        args = fresh if i < 2 else [*common, "--resume", _parent(client).info.run_id]
        exit_code = _stopped(forks, args, env, stage, signum, held, refused_while_live if i == 1 else None)
        statuses = _statuses(client)
        if i == 0:  # no run and no folder yet: nothing to resume, the next run starts afresh
            assert (exit_code, statuses, out.exists()) == (code, [], False)
            stops.append((stage, f"exit {exit_code}, no run"))
            continue
        if i == 1:  # the earliest moment a run can be resumed from
            assert [p.name for p in next(out.iterdir()).iterdir()] == ["targets.csv"]
        if signum == signal.SIGKILL:  # no process is left to end them: RUNNING until the next resume
            assert exit_code == code and _parent(client).info.status == "RUNNING"
        else:
            assert exit_code == code and "RUNNING" not in statuses and _parent(client).info.status == "KILLED"
        stops.append((stage, f"exit {exit_code}, {_parent(client).info.status}"))

    done = forks.start([*common, "--resume", _parent(client).info.run_id], env, tmp_path / "resumed.log")
    assert done.wait(timeout=600) == 0, done.output()[-4000:]
    parent = _parent(client)
    children = client.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    finished = sorted(c.data.tags[tracking.KEY] for c in children if c.info.status == "FINISHED")
    assert parent.info.status == "FINISHED" and "RUNNING" not in _statuses(client)  # stopped arms: KILLED
    v2 = pipeline.registry.get("v2")
    assert finished == sorted(m.key for m in v2.models(v2.spec.options_type.of(parts="A")))  # each model once
    resumed = load(next(out.iterdir()))
    drawn = int(re.search(r"(\d+) figures and \d+ tables in", done.output()).group(1))
    if not figures:
        assert drawn == 0 and resumed.figure_files == {}
    else:  # the Ctrl-C walk: every figure of Part A, the heatmaps of the arms measured before the stops kept
        assert drawn > 0 and len(resumed.figure_files) == drawn
        assert sum(name.startswith("heatmap") for name in resumed.figure_files) >= 3
        assert all(
            set(files) == {"png", "pdf", "eps"} and all(f.is_file() for f in files.values())
            for files in resumed.figure_files.values()
        )
    for name, table in uninterrupted.items():
        got = resumed.tables[name]
        if name == "table11":  # times differ
            cols = ["model", "examples", "steps", "loss_first_epoch", "loss_last_epoch"]
            table, got = table[cols], got[cols]
        pd.testing.assert_frame_equal(got.reset_index(drop=True), table.reset_index(drop=True), check_dtype=False)
    for stage, what in stops:  # the walk's last resume gave the uninterrupted tables
        WALKED[(stage, signal_name)] = what + ("; nothing to resume" if "no run" in what else "; resumed, tables equal")


# One retry, no back-off to speak of: MLflow's client gives a call up within a second of the server going away, not
# after the 4 minutes of its defaults (7 retries, factor 2)
BUDGET = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1"}


def test_a_pipeline_whose_server_is_down_past_the_retries_resumes_to_the_uninterrupted_tables(
    tiny_dir, tmp_path, uninterrupted, new_store, forks
):
    """A tracking server down longer than the client's retries (issue 56): the walk's pipeline, its system metrics
    on as a user's are, logs to a real ``mlflow server``, which is stopped (its whole process group) while the first
    arm is held at its start; let go, the arm's first logged epoch finds no server. The command ends in its one
    line, once (before, MLflow's system-metrics monitor said it again), exit 1, the runs it could not end named
    as RUNNING; the server started again on its store and port, ``--resume`` finishes the run: no run RUNNING, the
    tables equal to the uninterrupted run's."""
    backend, port, out, held = new_store(tmp_path / "server"), free_port(), tmp_path / "out", tmp_path / "held"
    env = {**{k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}, "PYTHONPATH": os.getcwd(), **BUDGET}
    fresh = ["run", "--no-figures", "--model", str(tiny_dir), "--profile", "smoke", "--seed", SEED, "--parts", "A"]
    with mlflow_server(backend, tmp_path / "server", port=port) as url:
        down = forks.start([*fresh, "--tracking", url, "--out", str(out)], env, tmp_path / "down.log",
                           hold=STAGES["an arm"], reached=held)  # fmt: skip
        while not held.exists():
            assert down.poll() is None, down.output()[-3000:]
            time.sleep(0.05)
    held.unlink()  # the server is gone: the arm goes on
    assert down.wait(timeout=300) == 1, down.output()[-3000:]
    output = down.output()
    said = [line for line in output.splitlines() if "stopped answering" in line or "Failed to" in line]
    assert len(said) == 1 and "Traceback" not in output, output[-3000:]
    assert said[0].startswith(f"Error: the tracking server at {url} stopped answering while cctk called ")
    assert "the connection was refused, past the client's 1 retry (0 s of back-off; MLFLOW_HTTP_REQUEST" in said[0]
    assert re.search("could not be ended there and stays? RUNNING: resume once the server answers", said[0])
    with mlflow_server(backend, tmp_path / "server", port=port):  # back, on its store and port
        client = mlflow.MlflowClient(url)
        parent = _parent(client)
        assert parent.info.status == "RUNNING" and parent.info.run_id in said[0]
        resume = ["run", "--resume", parent.info.run_id, "--no-figures", "--tracking", url, "--out", str(out)]
        resumed = forks.run(resume, env, tmp_path / "resumed.log")
        assert resumed.returncode == 0, resumed.stdout[-3000:]
        assert _parent(client).info.status == "FINISHED" and "RUNNING" not in _statuses(client)
    tables = load(next(out.iterdir())).tables
    for name, table in uninterrupted.items():
        got = tables[name]
        if name == "table11":  # times differ
            cols = ["model", "examples", "steps", "loss_first_epoch", "loss_last_epoch"]
            table, got = table[cols], got[cols]
        pd.testing.assert_frame_equal(got.reset_index(drop=True), table.reset_index(drop=True), check_dtype=False)
