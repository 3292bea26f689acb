"""The MLflow service end to end: `mlflow run`, and a real tracking server on PostgreSQL with two
pipelines logging at once. Slow (smoke pipelines of Part A, the arms' nesting and logging the same for
every part): marked integration, run in CI."""

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import mlflow
import pytest
from servers import mlflow_server, postgres_cluster, postgres_down, postgres_up

from cctk.manuals.v2.design import models_for

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PART_A = models_for(("A",))  # base, correct sums, random: the arms of a Part A run


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def _children(client, parent):
    return client.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")


def test_mlflow_run_attaches_to_its_run_and_nests_its_arms(tiny_dir, tmp_path, new_store):
    uri = new_store(tmp_path)
    done = subprocess.run(
        [
            str(BIN / "mlflow"),
            "run",
            str(ROOT),
            "--env-manager",
            "local",
            "--experiment-name",
            "cctk",
            "-P",
            f"model={tiny_dir}",
            "-P",
            "profile=smoke",
            "-P",
            "seed=3",
            "-P",
            "figures=no",
            "-P",
            "parts=A",
            "-P",
            f"out={tmp_path / 'out'}",
        ],
        cwd=tmp_path,
        env=_env(MLFLOW_TRACKING_URI=uri),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    client = mlflow.MlflowClient(uri)  # an explicit URI: a global one would outlive the test
    experiment = client.get_experiment_by_name("cctk")
    runs = client.search_runs([experiment.experiment_id], "tags.`cctk.kind` = 'pipeline'")
    assert len(runs) == 1  # the run `mlflow run` created is the parent: no second pipeline run
    parent = runs[0]
    assert parent.data.tags.get("mlflow.project.entryPoint") == "main"
    assert parent.info.status == "FINISHED" and parent.data.params["parts"] == "A"  # -P parts=A reached the CLI
    assert sorted(c.data.tags["cctk.key"] for c in _children(client, parent)) == sorted(PART_A)
    (folder,) = (tmp_path / "out").iterdir()  # -P figures=no reached the CLI: tables and reports, no figures
    assert (folder / "report.html").is_file() and (folder / "tables").is_dir() and not (folder / "figures").exists()


def test_mlflow_run_without_a_store_named_logs_to_mlflows_default_and_says_how_to_read_it(tiny_dir, tmp_path):
    """`mlflow run` with no MLFLOW_TRACKING_URI logs to MLflow 3's own default, ./mlflow.db of the folder it
    runs in, and hands its command that URI: the closing line said `cctk ui RUN`, which in the user's shell
    looks in cctk's ./mlruns/mlflow.db and found no store. Now it names the store; `cctk ui` there says which
    store the folder holds."""
    env = {k: v for k, v in _env().items() if k != "MLFLOW_RUN_ID"}
    command = [str(BIN / "mlflow"), "run", str(ROOT), "-e", "measure", "--env-manager", "local"]
    command += ["--experiment-name", "cctk", "-P", f"model={tiny_dir}", "-P", f"out={tmp_path / 'out'}"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("cctk").experiment_id])
    assert done.stdout.strip().splitlines()[-1] == (
        f"MLflow UI: cctk ui {run.info.run_id} --tracking sqlite:///{tmp_path}/mlflow.db"
    )
    ui = subprocess.run([str(BIN / "cctk"), "ui"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert ui.returncode == 1 and "(./mlflow.db here is MLflow's own default store" in ui.stderr
    assert not (ROOT / "mlflow.db").exists()


def test_mlflow_run_on_a_gpu_its_torch_cannot_use_ends_in_one_line(fake_nvidia_smi, tmp_path, new_store):
    """`mlflow run` on a machine whose nvidia-smi answers and whose torch (the CPU build, as an environment
    built from conda.yaml may be for the driver) cannot use the GPU: the entry point's first check ends it in
    one line, nothing trains on the CPU, and the run `mlflow run` created ends FAILED, not RUNNING."""
    uri = new_store(tmp_path)
    parameters = ["-P", "model=smollm2-135m-bundled", "-P", f"out={tmp_path / 'out'}"]
    done = subprocess.run(
        [str(BIN / "mlflow"), "run", str(ROOT), "--env-manager", "local", "--experiment-name", "cctk", *parameters],
        cwd=tmp_path,
        env=_env(MLFLOW_TRACKING_URI=uri),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode != 0
    said = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(said) == 1 and said[0].startswith("Error: this machine has an NVIDIA GPU (Tesla T4, driver 535"), said
    assert not (tmp_path / "out").exists()  # no session folder: nothing ran
    client = mlflow.MlflowClient(uri)
    (run,) = client.search_runs([client.get_experiment_by_name("cctk").experiment_id])
    assert run.info.status == "FAILED"


@pytest.fixture
def postgres():
    """A private PostgreSQL cluster on a loopback port, started and stopped by the test."""
    with postgres_cluster() as uri:
        yield uri


@pytest.fixture
def tracking_server(postgres, tmp_path):
    with mlflow_server(postgres, tmp_path, env=_env()) as url:
        yield url


def test_two_pipelines_at_once_on_a_postgres_backed_server(tiny_dir, tracking_server, tmp_path):
    # one OpenMP thread each: two pipelines of two threads on two cores spin at every barrier of the tiny
    # model's small matrix products (this test took 304 s of CPU with them, 173 s without, beside another job)
    procs = [
        subprocess.Popen(
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
                str(seed),
                "--parts",
                "A",
                "--no-figures",
                "--tracking",
                tracking_server,
                "--out",
                str(tmp_path / f"out{seed}"),
            ],
            env=_env(OMP_NUM_THREADS="1"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for seed in (1, 2)
    ]
    for proc in procs:
        out, _ = proc.communicate(timeout=1800)
        assert proc.returncode == 0, out[-3000:]
    client = mlflow.MlflowClient(tracking_server)
    experiment = client.get_experiment_by_name("cctk")
    parents = client.search_runs([experiment.experiment_id], "tags.`cctk.kind` = 'pipeline'")
    assert sorted(p.data.params["seeds"].split(",")[0] for p in parents) == ["1", "2"]
    for parent in parents:
        assert parent.info.status == "FINISHED"
        children = _children(client, parent)
        assert sorted(c.data.tags["cctk.key"] for c in children) == sorted(PART_A)
        assert all(c.info.status == "FINISHED" for c in children)
        trained = [c for c in children if c.data.tags["cctk.key"] != "base"]
        assert all(len(client.get_metric_history(c.info.run_id, "loss")) == 2 for c in trained)
        names = {a.path for a in client.list_artifacts(parent.info.run_id)}
        assert "run_info.json" in names and "report.html" in names
        assert {a.path for a in client.list_artifacts(children[0].info.run_id)} >= {"measurement"}
        # each arm's corpus, an MLflow dataset whose source is an address on the server that serves the run's
        # targets.csv to anyone who reads the store (before: the session folder on the machine that ran it)
        seed = parent.data.params["seeds"].split(",")[0]
        (used,) = client.get_run(trained[0].info.run_id).inputs.dataset_inputs
        assert used.dataset.source_type == "http"
        url = json.loads(used.dataset.source)["url"]
        assert url == f"{tracking_server}/get-artifact?path=targets.csv&run_id={parent.info.run_id}"
        with urllib.request.urlopen(url, timeout=30) as served:
            assert served.read() == next((tmp_path / f"out{seed}").glob("*/targets.csv")).read_bytes()


def test_a_database_store_that_stops_answering_is_one_line_naming_the_run_left_running(postgres, monkeypatch):
    """A PostgreSQL store (the URI as --tracking) stopped mid-run: the write is one line naming the database
    and the call (before: MLflow's logged traceback, then its exception's), and the run it could not end is
    named as left RUNNING; started again, the database holds it RUNNING, for a resume to end."""
    import psycopg2

    from cctk.store import tracking

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    store = tracking.connect(postgres)
    run = tracking.LiveRun(store.start(store.experiment(), "arm").run_id, store.client)
    postgres_down(postgres)
    with pytest.raises(tracking.Unreachable) as gone, tracking.ending(run):
        run.tags({"cctk.note": "logged while the database is down"})
    said = str(gone.value)
    assert said.startswith(
        f"the tracking database at {postgres} stopped answering while cctk called set_tag: "
        "(psycopg2.OperationalError) connection to server at "
    )
    assert said.endswith(
        f"; run {run.run_id} could not be ended there and stays RUNNING: resume once the server answers "
        "(cctk run --resume RUN_ID for a pipeline)"
    )
    assert "[SQL:" not in said and "Background on this error" not in said
    postgres_up(postgres)
    with psycopg2.connect(postgres.replace("postgresql+psycopg2", "postgresql")) as connection:
        cursor = connection.cursor()
        cursor.execute("SELECT status FROM runs WHERE run_uuid = %s", (run.run_id,))
        assert cursor.fetchone() == ("RUNNING",)
    connection.close()


def test_a_pipeline_on_a_database_store_says_its_artifacts_stay_on_this_machine(
    tiny_dir, postgres, tmp_path, monkeypatch
):
    """A PostgreSQL database as the store itself (no server): MLflow puts the artifacts of the experiment it
    creates in ./mlruns of the working folder, which other machines sharing the database cannot read. The
    pipeline's first lines say where they go; once the folder is gone, a load names it."""
    from cctk import results
    from cctk.core.errors import CctkError
    from cctk.manuals.configure import make_config
    from cctk.pipeline import stages as pipeline
    from cctk.store import tracking

    def stop(*args, **kwargs):
        raise RuntimeError("stopped after the first lines")

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)  # MLflow's default artifact root, ./mlruns, is here
    monkeypatch.setattr(pipeline, "fine_tune", stop)
    said: list[str] = []
    options = pipeline.Options(echo=said.append, system_metrics=False, figures=False)
    config = make_config(str(tiny_dir), "smoke", (3,), device="cpu", parts="A")
    with pytest.raises(RuntimeError, match="stopped"):
        pipeline.run(config, pipeline.Where(tmp_path / "out", postgres), options)
    store = tracking.connect(postgres)
    (parent,) = store.search([store.experiment()], f"tags.`{tracking.KIND}` = 'pipeline'")
    there = tmp_path / "mlruns" / parent.experiment_id / parent.run_id / "artifacts"
    line = (
        f"artifacts in {there} of this machine: the database holds the runs, not their files, which other machines "
        "cannot read (a tracking server shares them: docs/mlflow.md#stores)"
    )
    assert said.index(line) == said.index(f"loading {tiny_dir} ...") - 1  # after the first lines, before the model
    assert parent.status == "FAILED"
    shown, said_last = store.link(parent.run_id).split("\n")  # every other command's last lines say it too
    assert shown.startswith("MLflow UI: cctk ui ") and said_last == line

    store.client.set_terminated(parent.run_id, "FINISHED")  # as if it had ended; its files then moved away
    (tmp_path / "mlruns").rename(tmp_path / "moved")
    with pytest.raises(CctkError, match=f"^MLflow run {parent.run_id} keeps its artifacts in {there}, a folder"):
        results.load(parent.run_id, tracking_name=postgres, cache=tmp_path / "cache")
    assert store.unshared_artifacts((tmp_path / "elsewhere").as_uri()) is not None
    assert store.unshared_artifacts("s3://bucket/runs") is None
    on_sqlite = tracking.connect(f"sqlite:///{tmp_path}/mlflow.db")
    assert on_sqlite.unshared_artifacts(there.as_uri()) is None
    assert "\n" not in on_sqlite.link(on_sqlite.start(on_sqlite.experiment(), "arm").run_id)
