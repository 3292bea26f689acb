import os
import re
import signal
import sys
from pathlib import Path

import pytest

from cctk.core.errors import CctkError
from cctk.manuals import configure
from cctk.store import tracking

ROOT = Path(__file__).resolve().parents[2]  # the checkout


def test_embedded_is_the_default(monkeypatch):
    """./mlruns/ of the folder the command runs in, recorded as an absolute path (readable from anywhere)."""
    from pathlib import Path

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    config = tracking.resolve(None)
    assert config.tracking_uri == f"sqlite:///{Path.cwd()}/mlruns/mlflow.db"
    assert config.artifact_location == str(Path.cwd() / "mlruns/artifacts")


def test_environment_wins_over_the_option(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:1234")
    assert tracking.resolve("server").tracking_uri == "http://127.0.0.1:1234"


def test_a_sqlite_store_named_by_its_uri_keeps_its_artifacts_beside_its_database(tmp_path, monkeypatch):
    """MLflow's default artifact root is ./mlruns of whichever folder a command creating the experiment ran in
    (a test suite's stores piled their files into the checkout's); cctk puts a SQLite store's beside it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///runs/x.db")  # relative: made absolute, and its folder
    assert tracking.resolve(None).artifact_location == str(tmp_path / "runs" / "artifacts")
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    (tmp_path / "db").mkdir()
    store = tracking.connect(f"sqlite:///{tmp_path}/db/mlflow.db")
    with store.run("pipeline", "one") as run:
        (tmp_path / "a.txt").write_text("a")
        run.files(tmp_path / "a.txt")
    assert (tmp_path / "db" / "artifacts").is_dir() and not (tmp_path / "mlruns").exists()
    assert (tmp_path / "db" / "artifacts" / run.run_id / "artifacts" / "a.txt").read_text() == "a"  # as embedded's
    assert tracking.resolve("http://127.0.0.1:5000").artifact_location is None  # a server keeps its own
    assert tracking.beside_database("postgresql://u@h/db") is None


def test_names_and_uris(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking.resolve("server").tracking_uri == "http://127.0.0.1:5000"
    assert tracking.resolve("sqlite:////tmp/x.db").tracking_uri == "sqlite:////tmp/x.db"
    with pytest.raises(CctkError, match=r"unknown tracking configuration 'nope'.*embedded"):
        tracking.resolve("nope")


def test_the_shipped_configurations_are_the_checkouts_top_level_folder_in_an_empty_folder(tmp_path, monkeypatch):
    """From a checkout (the tests', or ``pip install -e .``): no mlruns_config/ where the command runs, the
    repository's top-level mlruns_config/ (the one source; the package holds no copy) gives the names, and
    the default store is ./mlruns/ of that folder."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    assert not (Path(tracking.__file__).parents[1] / "mlruns_config").exists()  # cctk/store/ holds none
    assert tracking.config_folders() == [ROOT / "mlruns_config"]
    assert tracking.config_names() == ["embedded", "postgres", "server"]
    config = tracking.resolve(None)
    assert config.tracking_uri == f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    assert config.artifact_location == str(tmp_path / "mlruns" / "artifacts")
    assert tracking.resolve("postgres").tracking_uri == "http://127.0.0.1:5001"


def test_the_checkouts_top_as_the_working_folder_is_looked_up_once(monkeypatch):
    monkeypatch.chdir(ROOT)
    assert tracking.config_folders() == [ROOT / "mlruns_config"]


def test_an_installed_package_reads_its_own_copy(tmp_path, monkeypatch):
    """A wheel installed anywhere: the build put the configurations into the package
    (cctk/store/mlruns_config/), and those are read, not a checkout's (scripts/wheel-check.sh checks a real
    wheel; here the package's folder is one made to look like it)."""
    package = tmp_path / "site-packages" / "cctk" / "store"
    (package / "mlruns_config").mkdir(parents=True)
    (package / "mlruns_config" / "lab.toml").write_text('tracking_uri = "http://10.0.0.7:5000"\n')
    monkeypatch.setattr(tracking.config.resources, "files", lambda name: package if name == "cctk.store" else None)
    monkeypatch.chdir(tmp_path)
    assert tracking.config_folders() == [package / "mlruns_config"]
    assert tracking.config_names() == ["lab"]


def test_a_working_folders_configuration_wins_by_name_and_adds_its_own(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mlruns_config").mkdir()
    (tmp_path / "mlruns_config" / "server.toml").write_text('tracking_uri = "http://127.0.0.1:5999"\n')
    (tmp_path / "mlruns_config" / "lab.toml").write_text('tracking_uri = "http://10.0.0.7:5000"\n')
    assert tracking.resolve("server").tracking_uri == "http://127.0.0.1:5999"  # the working folder's
    assert tracking.resolve("lab").tracking_uri == "http://10.0.0.7:5000"
    assert tracking.resolve(None).tracking_uri == f"sqlite:///{tmp_path}/mlruns/mlflow.db"  # the package's
    assert tracking.config_names() == ["embedded", "lab", "postgres", "server"]
    with pytest.raises(CctkError, match="'nope'; choose one of: embedded, lab, postgres, server, or give"):
        tracking.resolve("nope")


def test_unreachable_server_fails_in_one_line():
    config = tracking.TrackingConfig("x", "http://127.0.0.1:9")
    with pytest.raises(CctkError, match=r"cannot reach the MLflow tracking server at http://127.0.0.1:9"):
        tracking.check_reachable(config, timeout=1)


def test_runs_nest_and_log(tracking_uri):
    import mlflow

    store = tracking.connect()
    experiment = store.experiment()
    parent = store.start(experiment, "parent", {"cctk.kind": "pipeline"})
    child = store.start(experiment, "child", {"cctk.key": "m_correct"}, parent=parent)
    child.params({"examples": 81, "lr": 5e-05})
    child.metrics({"loss": 0.5}, step=1)
    child.metrics({"loss": 0.25}, step=2)
    child.end()
    parent.end()
    client = mlflow.MlflowClient(tracking_uri)
    got = client.get_run(child.run_id)
    assert got.data.tags["mlflow.parentRunId"] == parent.run_id
    assert got.data.params == {"examples": "81", "lr": "5e-05"}
    assert [m.value for m in client.get_metric_history(child.run_id, "loss")] == [0.5, 0.25]
    assert got.info.status == "FINISHED"


def test_the_global_tracking_uri_is_never_set(tracking_uri, tmp_path):
    import mlflow

    before = mlflow.get_tracking_uri()
    other = f"sqlite:///{tmp_path}/other.db"
    store = tracking.Store(tracking.TrackingConfig("other", other))
    store.start(store.experiment(), "a run").end()
    assert mlflow.get_tracking_uri() == before
    assert [r.info.run_name for r in mlflow.MlflowClient(other).search_runs([store.experiment()])] == ["a run"]


def test_pipeline_runs_are_read_back_as_plain_values(tracking_uri):
    store = tracking.connect()
    experiment = store.experiment()
    parent = store.start(experiment, "p", {"cctk.kind": "pipeline"})
    parent.params({"seeds": "1,2"})
    done = store.start(experiment, "done", {"cctk.key": "base"}, parent=parent)
    done.end()
    stale = store.start(experiment, "stale", {"cctk.key": "m_correct"}, parent=parent)
    run = store.pipeline(parent.run_id)
    assert run.params == {"seeds": "1,2"} and run.tags["cctk.kind"] == "pipeline"
    assert store.finished_children(run) == {"base": done.run_id}
    assert store.get(stale.run_id).status == "KILLED"  # a RUNNING child of a dead process
    with pytest.raises(CctkError, match="is not a cctk pipeline run"):
        store.pipeline(done.run_id)
    sweep = store.start(experiment, "s", {"cctk.kind": "sweep"})  # `cctk run --resume SWEEP`: the sweep's commands
    with pytest.raises(CctkError, match=rf"\(a sweep's: cctk sweep --resume {sweep.run_id}, cctk compare --sweep "):
        store.pipeline(sweep.run_id)
    arm = store.start(experiment, "arm", {"cctk.kind": "model", "cctk.key": "m_random"}, parent=parent)
    with pytest.raises(CctkError) as nested:  # an arm's id, copied from the UI, names the pipeline to give
        store.pipeline(arm.run_id)
    assert str(nested.value) == (
        f"MLflow run {arm.run_id} is a model's nested run (tag cctk.kind is 'model'), not a pipeline's: give its "
        f"pipeline's run, {parent.run_id}"
    )
    with pytest.raises(CctkError, match="no run 'deadbeef'"):
        store.pipeline("deadbeef")


def test_a_sweep_is_read_back_and_a_cells_run_names_its_sweep(tracking_uri):
    """`cctk sweep --resume` and `cctk compare --sweep` take a sweep's run; a cell's pipeline given instead (its
    id copied from the UI) names the sweep to give."""
    store = tracking.connect()
    experiment = store.experiment()
    sweep = store.start(experiment, "sweep", {tracking.KIND: "sweep"})
    cell = store.start(experiment, "cell", {tracking.KIND: "pipeline", tracking.SWEEP: sweep.run_id}, parent=sweep)
    alone = store.start(experiment, "alone", {tracking.KIND: "pipeline"})
    assert store.sweep(sweep.run_id).run_id == sweep.run_id
    with pytest.raises(CctkError) as of_a_sweep:
        store.sweep(cell.run_id)
    assert str(of_a_sweep.value) == (
        f"MLflow run {cell.run_id} is not a cctk sweep (tag cctk.kind is 'pipeline'): it is a run of sweep "
        f"{sweep.run_id}, give that"
    )
    with pytest.raises(CctkError) as no_sweep:
        store.sweep(alone.run_id)
    assert str(no_sweep.value) == f"MLflow run {alone.run_id} is not a cctk sweep (tag cctk.kind is 'pipeline')"


def test_searches_read_every_page_not_the_first_thousand(tracking_uri, monkeypatch):
    """Before: ``children`` asked MLflow's default 1000 runs and ``search`` 5000, so a parent with more child
    runs (a long sweep's pipelines, a resumed study) was cut short without a word. A page of 2 stands for them."""
    store = tracking.connect()
    experiment = store.experiment()
    parent = store.start(experiment, "p", {"cctk.kind": "pipeline"})
    done = [store.start(experiment, f"c{i}", {"cctk.key": f"k{i}"}, parent=parent) for i in range(5)]
    for run in done:
        run.end()
    others = [store.start(store.experiment(f"other {i}"), "o", {"cctk.kind": "pipeline"}) for i in range(3)]
    monkeypatch.setattr(tracking.runs, "PAGE", 2)
    run = store.pipeline(parent.run_id)
    assert sorted(c.run_id for c in store.children(run)) == sorted(r.run_id for r in done)
    assert store.finished_children(run) == {f"k{i}": r.run_id for i, r in enumerate(done)}
    assert len(store.experiment_ids()) == 5  # Default, ours and the three others
    assert {r.run_id for r in store.pipelines()} == {parent.run_id, *(o.run_id for o in others)}


def test_a_parameter_past_mlflows_limit_goes_whole_into_an_artifact(tracking_uri, tmp_path):
    """`cctk compare` of 200 runs logs their ids as one parameter, 6,599 characters: MLflow cut it to 6,000 (a
    warning in its log) and the parameter named 181 of them. Now the value goes whole into params/runs.txt and
    the parameter says so; one at the limit is logged as it is."""
    store = tracking.connect()
    run = store.start(store.experiment(), "compare", {})
    ids = ",".join(f"{i:032x}" for i in range(200))
    run.params({"runs": ids, "sweep": "", "edge": "x" * 6000})
    params = store.client.get_run(run.run_id).data.params
    assert params["runs"] == "6,599 characters, whole in the artifact params/runs.txt"
    assert params["edge"] == "x" * 6000 and params["sweep"] == ""
    got = store.client.download_artifacts(run.run_id, "params/runs.txt", str(tmp_path))
    assert Path(got).read_text() == ids
    # read back whole (a sweep of 1,000 seeds resumes from its parameters), by id and by search
    assert store.get(run.run_id).params == {"runs": ids, "sweep": "", "edge": "x" * 6000}
    (found,) = store.search([store.experiment()], f"attributes.run_id = '{run.run_id}'")
    assert found.params["runs"] == ids


def test_a_parameter_mlflow_run_logged_is_kept_and_the_value_in_force_logged_beside_it(tracking_uri):
    """`mlflow run . -P profile=auto` logs profile=auto before cctk runs; MLflow refuses to change it, so
    the profile in force goes under profile.resolved (and a value equal to the logged one is left alone)."""
    import mlflow

    from cctk.manuals.configure import make_config
    from cctk.manuals.v2.manual import V2

    store = tracking.connect()
    run = store.start(store.experiment(), "project run", {})
    mlflow.MlflowClient(tracking_uri).log_batch(
        run.run_id, params=[mlflow.entities.Param("profile", "auto"), mlflow.entities.Param("curves", "no")]
    )
    config = make_config("org/model", "auto", (3, 4, 5, 6, 7), device="cpu")
    run.params(configure.params(V2, config))
    params = mlflow.MlflowClient(tracking_uri).get_run(run.run_id).data.params
    assert params["profile"] == "auto" and params["profile.resolved"] == "quick"
    assert params["profile_requested"] == "auto" and params["curves"] == "no" and "curves.resolved" not in params
    assert configure.config_from_params(V2, params) == config


def test_a_dataset_logged_by_two_pipelines_at_once_is_retried_after_a_duplicate_key(tracking_uri):
    """PostgreSQL told the loser of two concurrent pipelines 'duplicate key value violates unique constraint
    "dataset_pk"' (CI); the input is logged again, and the dataset row the winner made is used."""
    import mlflow
    import pandas as pd
    from mlflow.exceptions import MlflowException

    store = tracking.connect()
    experiment = store.experiment()
    table = pd.DataFrame({"a": [1, 2], "b": [3, 4]})
    winner = store.start(experiment, "winner", {})
    winner.dataset(table, name="correct sum", source="/tmp/targets.csv")
    loser = store.start(experiment, "loser", {})
    real, calls = loser._client.log_inputs, []

    def race(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise MlflowException(
                '(psycopg2.errors.UniqueViolation) duplicate key value violates unique constraint "dataset_pk"'
            )
        return real(*args, **kwargs)

    loser._client.log_inputs = race
    loser.dataset(table, name="correct sum", source="/tmp/targets.csv")
    client = mlflow.MlflowClient(tracking_uri)
    assert len(calls) == 2
    for run in (winner, loser):
        (logged,) = client.get_run(run.run_id).inputs.dataset_inputs
        assert logged.dataset.name == "correct sum"
    loser._client.log_inputs = lambda *a, **k: (_ for _ in ()).throw(MlflowException("RESOURCE_DOES_NOT_EXIST"))
    with pytest.raises(MlflowException, match="RESOURCE_DOES_NOT_EXIST"):
        loser.dataset(table, name="correct sum", source="/tmp/targets.csv")


def test_a_dataset_is_logged_without_mlflows_two_spurious_warnings(tracking_uri):
    """Every arm logs its corpus: MLflow's warnings about a local source matched twice and about
    integer columns were printed 26 times in a run's console. The dataset itself is logged as before."""
    import warnings

    import mlflow
    import pandas as pd

    store = tracking.connect()
    run = store.start(store.experiment(), "quiet", {})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run.dataset(pd.DataFrame({"a": [1, 2], "b": [3, 4]}), name="correct sum", source="/tmp/targets.csv")
    assert [str(w.message)[:60] for w in caught if w.category is UserWarning] == []
    (logged,) = mlflow.MlflowClient(tracking_uri).get_run(run.run_id).inputs.dataset_inputs
    assert logged.dataset.name == "correct sum" and '"a"' in logged.dataset.schema


@pytest.mark.parametrize(
    ("raised", "status"), [(None, "FINISHED"), (RuntimeError("disk full"), "FAILED"), (KeyboardInterrupt(), "KILLED")]
)
def test_the_run_lifecycle_ends_every_run_truthfully(tracking_uri, raised, status):
    from cctk.core.errors import Terminated

    store = tracking.connect()
    with pytest.raises(type(raised)) if raised else _nothing(), store.run("measure", "a run", {"cctk.key": "x"}) as run:
        if raised:
            raise raised
    got = store.get(run.run_id)
    assert got.status == status and got.tags[tracking.KIND] == "measure"
    assert got.tags.get(tracking.ERROR) == ("RuntimeError: disk full" if status == "FAILED" else None)
    # SIGTERM, as cctk's CLI raises it, is a kill too
    with pytest.raises(Terminated), store.run("model", "terminated") as run:
        raise Terminated("stopped by signal 15")
    assert store.get(run.run_id).status == "KILLED"


def _nothing():
    import contextlib

    return contextlib.nullcontext()


def test_sigterm_raises_terminated_in_the_main_thread():
    import os
    import signal

    from cctk.core.errors import Terminated, stop_on_sigterm

    previous = signal.getsignal(signal.SIGTERM)
    try:
        stop_on_sigterm()
        with pytest.raises(Terminated):  # noqa: PT012 (the signal is delivered at the wait, not at the kill)
            os.kill(os.getpid(), signal.SIGTERM)
            signal.sigtimedwait([], 0.1) if hasattr(signal, "sigtimedwait") else None
    finally:
        signal.signal(signal.SIGTERM, previous)


RACER = """
import sys, time
from pathlib import Path
from cctk.store import tracking
go = Path(sys.argv[2])
while not go.exists():  # everything imported: all open the new store at the same moment
    time.sleep(0.01)
store = tracking.connect(sys.argv[1])
with store.run("pipeline", "racer") as run:
    run.metrics({"x": 1.0})
"""


def test_first_runs_racing_on_a_new_sqlite_store_all_finish(tmp_path):
    """Three processes open one new store at once: MLflow's table creation runs once (under the store
    folder's lock), the experiment and its tag are made once, and every run FINISHES."""
    import os
    import subprocess
    import sys
    import time

    uri, go = f"sqlite:///{tmp_path}/store/mlflow.db", tmp_path / "go"
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    procs = [
        subprocess.Popen([sys.executable, "-c", RACER, uri, str(go)], env=env, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    time.sleep(4)  # they import mlflow meanwhile
    go.touch()
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    store = tracking.connect(uri)
    runs = store.search([store.experiment()], "")
    assert [r.status for r in runs] == ["FINISHED"] * 3


def test_a_corrupted_store_is_refused_in_one_line_naming_its_file(tmp_path):
    path = tmp_path / "mlflow.db"
    path.write_bytes(b"this is no database\n" * 100)
    with pytest.raises(CctkError, match=f"the tracking store {path} cannot be opened as an MLflow SQLite store"):
        tracking.connect(f"sqlite:///{path}")


def test_a_store_locked_past_the_wait_is_said_to_be_locked_not_broken(tracking_uri, monkeypatch):
    """Before: a store another process held locked past the wait read "cannot be opened as an MLflow SQLite store
    ...; move it away", advice that would lose a sound store."""
    import sqlite3

    path = tracking.sqlite_path(tracking_uri)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_uri + "?timeout=0.2")  # the URI's own wait, kept
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        with pytest.raises(CctkError) as locked:
            tracking.connect().experiment_ids()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert str(locked.value).startswith(
        f"the tracking store {path} stayed locked by another process longer than the wait for it as cctk opened it"
    )
    assert str(locked.value).endswith("or wait longer with ?timeout=SECONDS on its URI")
    assert "move it away" not in str(locked.value)


def test_an_experiment_tag_set_by_a_racing_process_is_no_error(tracking_uri, monkeypatch):
    """On a new server, two first runs set the experiment's kind tag at once and one insert is refused
    (an IntegrityError): the tag is there, so cctk goes on."""
    store = tracking.connect()
    store.experiment()
    real = store.client.set_experiment_tag

    def refused(*args):
        real(*args)  # the other process's insert ...
        raise RuntimeError("(sqlite3.IntegrityError) UNIQUE constraint failed: experiment_tags.key")  # ... ours

    monkeypatch.setattr(store.client, "set_experiment_tag", refused)
    experiment_id = store.client.create_experiment("second")
    store._tag_kind(experiment_id)
    assert store.client.get_experiment(experiment_id).tags["mlflow.experimentKind"] == tracking.EXPERIMENT_KIND


def test_a_new_sqlite_store_is_opened_under_its_folders_lock(tmp_path):
    """While another process holds the store folder's lock (creating the tables), opening waits."""
    import fcntl
    import os
    import threading

    folder = tmp_path / "store"
    folder.mkdir()
    fd = os.open(folder, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    opened = threading.Event()
    thread = threading.Thread(target=lambda: (tracking.connect(f"sqlite:///{folder}/mlflow.db"), opened.set()))
    thread.start()
    assert not opened.wait(2)  # blocked on the lock
    os.close(fd)
    thread.join(60)
    assert opened.is_set()


def test_the_gpu_monitor_logs_memory_use_and_power_through_nvml(tracking_uri, monkeypatch):
    """A pipeline's system metrics on a GPU machine (``LiveRun.system_metrics``: MLflow's monitor, its GPU part
    through NVML), run here with a fake NVML of one GPU: its memory, use and power reach the run as metrics
    (the suite's pipelines pass ``--no-system-metrics``: no test ran this part before #46)."""
    import time
    from types import SimpleNamespace

    import mlflow
    from mlflow.system_metrics.metrics import gpu_monitor

    class NVMLError(Exception):
        pass

    fake = SimpleNamespace(
        NVMLError=NVMLError,
        nvmlInit=lambda: None,
        nvmlDeviceGetCount=lambda: 1,
        nvmlDeviceGetHandleByIndex=lambda index: f"gpu {index}",
        nvmlDeviceGetMemoryInfo=lambda handle: SimpleNamespace(used=6_000_000_000, total=16_000_000_000),
        nvmlDeviceGetUtilizationRates=lambda handle: SimpleNamespace(gpu=87),
        nvmlDeviceGetPowerUsage=lambda handle: 35_000,
        nvmlDeviceGetEnforcedPowerLimit=lambda handle: 70_000,
    )
    monkeypatch.setattr(gpu_monitor, "pynvml", fake, raising=False)
    store = tracking.connect()
    run = store.start(store.experiment(), "monitored", {})
    monitor = run.system_metrics(interval=0.1)
    assert monitor is not None
    metrics, deadline = {}, time.monotonic() + 60
    try:
        while "system/gpu_0_power_usage_watts" not in metrics and time.monotonic() < deadline:
            time.sleep(0.2)
            metrics = mlflow.MlflowClient(tracking_uri).get_run(run.run_id).data.metrics
    finally:
        monitor.finish()
        run.end()
    assert metrics["system/gpu_0_memory_usage_megabytes"] == 6000.0
    assert metrics["system/gpu_0_memory_usage_percentage"] == 37.5
    assert metrics["system/gpu_0_utilization_percentage"] == 87.0
    assert metrics["system/gpu_0_power_usage_watts"] == 35.0


def test_a_missing_run_is_no_run_and_other_failures_say_what_failed(tracking_uri):
    """Before: every MlflowException of get_run (a refusal, the network) became "no run"."""
    from mlflow.exceptions import MlflowException

    store = tracking.connect()
    with pytest.raises(tracking.NoRun, match="no run 'deadbeef' in the tracking store"):
        store.get("deadbeef")

    def broken(run_id):
        raise MlflowException("database is locked", error_code="INTERNAL_ERROR")

    store.client.get_run = broken
    with pytest.raises(CctkError, match="could not read run 'abc': database is locked") as raised:
        store.get("abc")
    assert not isinstance(raised.value, tracking.NoRun)


def test_a_tracking_uri_with_a_password_is_refused(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(
        CctkError, match=r"the tracking URI http://alice:\*\*\*@127.0.0.1:5000 carries an account or a secret"
    ):
        tracking.resolve("http://alice:secret@127.0.0.1:5000")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "https://alice:secret@lab.example")
    with pytest.raises(CctkError, match="MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD"):
        tracking.resolve(None)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "https://lab.example/?password=secret")
    with pytest.raises(CctkError, match=r"https://lab.example/\?password=\*\*\* carries an account or a secret"):
        tracking.resolve(None)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "https://ghp_S3cretTOKEN@lab.example")  # a token as the user
    with pytest.raises(CctkError, match=r"https://\*\*\*@lab.example carries an account or a secret") as refused:
        tracking.resolve(None)
    assert "S3cret" not in str(refused.value)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "postgresql://alice@db.lab/mlflow")  # a database's user: as it is
    assert tracking.resolve(None).tracking_uri == "postgresql://alice@db.lab/mlflow"


def test_a_database_url_its_client_cannot_read_is_one_line(monkeypatch):
    """A port that is not a number was a ValueError's traceback at the first connection."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(CctkError) as refused:
        tracking.resolve("postgresql+psycopg2://a:S3cret@127.0.0.1:abc/db")
    assert str(refused.value) == (
        "the tracking URI postgresql+psycopg2://a:***@127.0.0.1:abc/db is no database URL SQLAlchemy reads: "
        "dialect+driver://USER:PASSWORD@HOST:PORT/DATABASE, the port a number"
    )


def test_a_raw_at_in_a_database_password_is_refused_without_its_tail(monkeypatch):
    """Its driver read `S3c` as the password and `retPW@127.0.0.1` as the host, and printed the host."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(CctkError) as refused:
        tracking.resolve("postgresql+psycopg2://alice:S3c@retPW@127.0.0.1:1/mlflow")
    assert str(refused.value) == (
        "the tracking URI postgresql+psycopg2://alice:***@127.0.0.1:1/mlflow has an @ in its password as it is: "
        "write it percent-encoded (%40), or its driver reads the password to that @ and the rest as the host"
    )


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        (
            "postgresql+psycopg2://cctk:S3cr%2Fet@127.0.0.1:5432/cctk",
            "postgresql+psycopg2://cctk:***@127.0.0.1:5432/cctk",
        ),
        (
            "postgresql://cctk@h/db?sslmode=require&password=S3cret",
            "postgresql://cctk@h/db?sslmode=require&password=***",
        ),
        ("mysql+pymysql://u:p@ss@h/db?passwd=S3cret#x", "mysql+pymysql://u:***@h/db?passwd=***#x"),
        ("sqlite:///auth.db?password=S3cret", "sqlite:///auth.db?password=***"),
        ("postgresql://:S3cret@h/db", "postgresql://:***@h/db"),
        ("sqlite:///mlruns/mlflow.db?timeout=120", "sqlite:///mlruns/mlflow.db?timeout=120"),
        ("http://127.0.0.1:5000", "http://127.0.0.1:5000"),
        ("sqlite:///x.db?", "sqlite:///x.db?"),
        ("http://u:p@h:8000/v1?api_key=K3y&model=m", "http://u:***@h:8000/v1?api_key=***&model=m"),  # a teacher's
        ("https://g.example/v1?key=K3y&access_key=A", "https://g.example/v1?key=***&access_key=***"),
        (
            "postgresql://h/db?sslkey=/etc/client.key&sslmode=verify-full",
            "postgresql://h/db?sslkey=/etc/client.key&sslmode=verify-full",
        ),
        # a password with a raw / # ? [ or @ (SQLAlchemy takes it; urlsplit ended the host at the /, and the
        # password went out whole), a tab in it (urlsplit drops tabs), a token as the user of a web address
        ("postgresql+psycopg2://bob:S3c/ret#PW@127.0.0.1:1/x", "postgresql+psycopg2://bob:***@127.0.0.1:1/x"),
        ("postgresql://bob:S3c?r[et]@h/db?password=p", "postgresql://bob:***@h/db?password=***"),
        ("postgresql://alice:S3c@retPW@127.0.0.1:5432/m", "postgresql://alice:***@127.0.0.1:5432/m"),
        ("postgresql://a:S3c\tret@h/db", "postgresql://a:***@h/db"),
        ("https://ghp_S3cretTOKEN@api.example.com/v1", "https://***@api.example.com/v1"),
        ("postgresql://alice@h/db", "postgresql://alice@h/db"),  # a database's user alone is no secret
        ("sqlite:////tmp/a@b/mlflow.db", "sqlite:////tmp/a@b/mlflow.db"),
        ("databricks://profile:prefix", "databricks://profile:prefix"),
        (
            "https://h/v1?x-api-key=K&subscription-key=S&sig=Z&credential=C&n=1",
            "https://h/v1?x-api-key=***&subscription-key=***&sig=***&credential=***&n=1",
        ),
    ],
)
def test_a_uri_is_shown_with_every_password_in_it_redacted_and_the_rest_as_written(uri, shown):
    assert tracking.redact(uri) == shown
    assert tracking.has_password(uri) == (uri != shown)


def test_a_database_uri_with_its_password_reaches_its_client_alone(monkeypatch, tmp_path):
    """Before: `--tracking postgresql://user:SECRET@...` was recorded as it was (the tag cctk.tracking_uri,
    run_info.json, the reports, the last line). Its client needs the password; the store shows it redacted."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    uri = "postgresql+psycopg2://cctk:S3cret@127.0.0.1:9/cctk"
    config = tracking.resolve(uri)
    assert (
        config.tracking_uri == uri and config.name == config.shown == "postgresql+psycopg2://cctk:***@127.0.0.1:9/cctk"
    )
    opened = []
    monkeypatch.setattr(tracking.runs, "_open_client", lambda uri: opened.append(uri))
    store = tracking.Store(config)
    assert opened == [uri] and store.uri == config.shown  # what a run records (tag, run_info.json) and lines say
    # pasteable but for ***, and in the environment, not on the command line (ps shows that to every user)
    link = f"MLflow UI: MLFLOW_TRACKING_URI='{config.shown}' cctk ui abc (*** is the password)"
    assert tracking.run_link(store, "1", "abc") == link
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mlruns_config").mkdir()
    (tmp_path / "mlruns_config" / "db.toml").write_text(f'tracking_uri = "{uri}"\n')
    assert tracking.resolve("db").tracking_uri == uri and tracking.resolve("db").shown == config.shown
    assert (
        tracking.run_link(tracking.Store(tracking.resolve("db")), "1", "abc") == "MLflow UI: cctk ui abc --tracking db"
    )
    # under `mlflow run`, MLFLOW_TRACKING_URI is the one it handed its command, not the user's shell's
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    assert tracking.run_link(tracking.Store(tracking.resolve()), "1", "abc") == "MLflow UI: cctk ui abc"
    monkeypatch.setenv("MLFLOW_RUN_ID", "abc")
    assert tracking.run_link(tracking.Store(tracking.resolve()), "1", "abc") == link
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    plain = tracking.Store(tracking.resolve("mysql://u@h/db?ssl=1&charset=utf8"))  # `&` would end a shell command
    assert (
        tracking.run_link(plain, "1", "abc") == "MLflow UI: cctk ui abc --tracking 'mysql://u@h/db?ssl=1&charset=utf8'"
    )


def test_a_database_that_refuses_the_connection_is_one_line_before_any_work(monkeypatch):
    """Before: MLflow's client retried it for a minute, then a 230-line traceback."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(CctkError) as refused:  # nothing listens on port 9
        tracking.connect("postgresql+psycopg2://cctk:S3cret@127.0.0.1:9/cctk")
    line = str(refused.value)
    assert line.startswith("cannot reach the tracking store postgresql+psycopg2://cctk:***@127.0.0.1:9/cctk: connect")
    assert "Connection refused" in line and "S3cret" not in line and "\n" not in line
    assert tracking.is_database("mysql+pymysql://u@h/db") and not tracking.is_database("sqlite:///x.db")
    # a driver not installed: which package installs it (psycopg 3: the dev extra installs psycopg2 alone)
    monkeypatch.setitem(sys.modules, "psycopg", None)  # an import of it fails, installed or not
    with pytest.raises(CctkError) as missing:
        tracking.connect("postgresql+psycopg://cctk:S3cret@127.0.0.1:9/cctk")
    assert str(missing.value).startswith(
        "cannot reach the tracking store postgresql+psycopg://cctk:***@127.0.0.1:9/cctk: its driver is not installed "
        "(import of psycopg halted; None in sys.modules): pip install 'psycopg[binary]' into this environment"
    )


def test_a_tracking_configuration_that_cannot_be_read_is_one_line_naming_its_file(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mlruns_config").mkdir()
    file = tmp_path / "mlruns_config" / "bad.toml"
    for text, line in {
        'tracking_uri = "http://x"\nport = \n': "not valid TOML: Invalid value (at line 2, column 8)",
        "description = 'no uri'\n": "tracking_uri is missing",
        "tracking_uri = 5000\n": "tracking_uri = 5000 is not a string",
        'tracking_uri = "sqlite:///a.db"\nartifact_location = ["a"]\n': 'artifact_location = ["a"] is not a string',
    }.items():
        file.write_text(text)
        with pytest.raises(CctkError) as refused:
            tracking.resolve("bad")
        assert str(refused.value) == f"{file}: {line}"


def test_the_login_is_read_as_mlflow_reads_it_environment_first_then_its_credentials_file(tmp_path, monkeypatch):
    """Before: a login in ~/.mlflow/credentials (MLflow's own file) skipped cctk's write check (an empty session
    folder was made), refusals named `user None`, a wrong password there said to set MLFLOW_TRACKING_USERNAME,
    and a malformed file gave a 63-line configparser traceback."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for key in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.delenv(key, raising=False)
    assert tracking.login() == tracking.Login(None, None, "no password")
    (tmp_path / ".mlflow").mkdir()
    credentials = tmp_path / ".mlflow" / "credentials"
    credentials.write_text("[mlflow]\nmlflow_tracking_username = dave\nmlflow_tracking_password = daves-pw\n")
    assert tracking.login() == tracking.Login("dave", "daves-pw", "~/.mlflow/credentials") and tracking.user() == "dave"
    line = str(tracking.refusal(401, "http://s", "get_run", None))
    assert line == (
        "the tracking server at http://s does not accept user 'dave' (401): no such user, or the password in "
        "~/.mlflow/credentials is not hers"
    )
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "other")  # the environment wins, key by key, as in MLflow
    assert tracking.login() == tracking.Login("dave", "other", "MLFLOW_TRACKING_PASSWORD")
    assert "user 'dave' may not write to experiment 'x'" in str(tracking.refusal(403, "http://s", "log_batch", "x"))
    for text, why in [
        ("mlflow_tracking_password = S3cretPW\n", "line 1 comes before any section header"),  # no [mlflow]
        (
            "[mlflow]\nmlflow_tracking_username = dave\nmlflow_tracking_password S3cretPW\n",
            "line 3 is not name = value",
        ),
    ]:
        credentials.write_text(text)
        with pytest.raises(CctkError) as malformed:
            tracking.login()
        assert str(malformed.value).startswith(f"{credentials}: MLflow cannot read it as its credentials file ({why})")
        assert "\n" not in str(malformed.value) and "S3cret" not in str(malformed.value)  # configparser quoted it


def test_runs_go_to_the_experiment_mlflow_experiment_name_names(tracking_uri, monkeypatch):
    store = tracking.connect()
    assert store.client.get_experiment(store.experiment()).name == "cctk"
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "alice")
    assert store.client.get_experiment(store.experiment()).name == "alice"


def test_runs_go_to_the_experiment_mlflow_experiment_id_names(tracking_uri, monkeypatch):
    """MLflow's other variable, which `mlflow run` sets for its command (the experiment of the run it created:
    without --experiment-name, Default): a KR-Test study under `mlflow run -e krtest` put its arms in cctk's
    experiment and its parent, the run `mlflow run` made, in Default. MLFLOW_EXPERIMENT_NAME is read first, as
    MLflow reads it; an id that names no experiment (or a deleted one) is one line, and nothing is created."""
    from cctk.krtest.commands.jobs import open_track

    store = tracking.connect()
    own = store.client.create_experiment("own")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", "0")
    assert store.experiment() == "0" and open_track(None).experiment_id == "0"
    assert store.client.get_experiment("0").tags["mlflow.experimentKind"] == "custom_model_development"
    monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", own)
    assert store.experiment() == own and store.target().name == "own"
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "alice")
    assert store.client.get_experiment(store.experiment()).name == "alice"
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME")
    before = store.client.search_experiments()
    for given, what in [("12345", "no experiment"), ("x", "no experiment")]:
        monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", given)
        with pytest.raises(CctkError) as refused:
            store.experiment()
        assert str(refused.value) == (
            f"MLFLOW_EXPERIMENT_ID={given} names {what} of {tracking_uri}: give the id of one, or unset it (runs go "
            "to MLFLOW_EXPERIMENT_NAME's experiment, else cctk's, created where missing)"
        )
    store.client.delete_experiment(own)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", own)
    with pytest.raises(CctkError, match=f"^MLFLOW_EXPERIMENT_ID={own} names no live experiment of "):
        store.experiment()
    assert len(store.client.search_experiments()) == len(before) - 1  # nothing created, the deleted one hidden


def test_a_nested_run_goes_to_its_parents_experiment(tracking_uri, monkeypatch):
    """A sweep's cell on a machine whose environment names no experiment (a Ray worker on another node), a KR-Test
    study's arms under `mlflow run` (parent in Default, the arms in cctk): a nested run went to the experiment its
    own process names, not its parent's, and the UI shows no tree across experiments."""
    from cctk.krtest.commands.jobs import open_track

    store = tracking.connect()
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "alice")
    sweep = store.start(store.experiment(), "sweep", {})
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME")  # the worker's own environment
    with store.run("pipeline", "cell", parent=sweep.run_id) as cell:
        pass
    assert store.name_of(cell.experiment_id) == "alice" != store.name_of(store.experiment())
    with open_track(None).run("arm", {}, parent=sweep) as arm:
        pass
    assert arm.experiment_id == sweep.experiment_id
    with store.run("pipeline", "alone") as alone:
        pass
    assert store.name_of(alone.experiment_id) == "cctk"


def test_a_deleted_experiment_is_one_line_before_any_work(tiny_dir, tmp_path, tracking_uri, monkeypatch):
    """Runs sent to an experiment deleted in the UI: `cctk measure` measured, then MLflow's traceback when it logged
    (`The experiment 1 must be in the 'active' state`). Now a command that writes refuses it as it connects; one
    that reads does not ask; `cctk ui` opens on the list of experiments."""
    from click.testing import CliRunner

    from cctk.cli.main import cli
    from cctk.cli.server import _link

    store = tracking.connect()
    gone = store.client.create_experiment("gone")
    store.client.delete_experiment(gone)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "gone")
    line = (
        f"experiment 'gone' of {tracking_uri} is deleted: restore it (the MLflow UI, or `mlflow experiments restore "
        f"--experiment-id {gone}`) or name another (MLFLOW_EXPERIMENT_NAME=NAME)"
    )
    done = CliRunner().invoke(cli, ["measure", "--model", str(tiny_dir), "--out", str(tmp_path / "out")])
    assert done.exit_code == 1 and done.output == f"Error: {line}\n" and not (tmp_path / "out").exists()
    with pytest.raises(CctkError) as refused:
        tracking.connect()
    assert str(refused.value) == line
    tracking.connect(create=False, writes=False)  # a reader: no experiment asked for
    assert _link(tracking.resolve(), None, "http://127.0.0.1:5000") == (
        "http://127.0.0.1:5000/#/experiments?workflowType=machine_learning"
    )


def test_a_refusal_names_who_which_experiment_and_what_is_missing(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME", raising=False)
    assert "asks who you are (401): set MLFLOW_TRACKING_USERNAME" in str(tracking.refusal(401, "http://s", "x", None))
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "bob")
    assert "does not accept user 'bob' (401)" in str(tracking.refusal(401, "http://s", "get_run", None))
    line = str(tracking.refusal(403, "http://s", "log_batch", "alice"))
    assert line.startswith("user 'bob' may not write to experiment 'alice' on http://s (403): that needs EDIT there")
    assert "cctk server users grant bob alice EDIT" in line and "MLFLOW_EXPERIMENT_NAME=bob" in line
    assert "may not delete runs of experiment 'alice'" in str(tracking.refusal(403, "http://s", "delete_run", "alice"))
    assert tracking.needs("search_runs") == "READ" and tracking.needs("set_terminated") == "EDIT"


def test_a_server_that_does_not_answer_is_unreachable_in_one_line(monkeypatch):
    """A refused connection, past MLflow's retries (none here), is one line naming the server and the call."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    store = tracking.Store(tracking.TrackingConfig("x", "http://127.0.0.1:9"))
    with pytest.raises(tracking.Unreachable, match=r"^the tracking server at http://127.0.0.1:9 stopped answering"):
        store.client.get_experiment_by_name("cctk")


def test_the_retry_budget_is_mlflows_variables_and_one_it_refuses_is_one_line(monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "9")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "2")
    tracking.check_retry_budget()
    assert tracking.retry_budget().startswith("the client's 9 retries (484 s of back-off; MLFLOW_HTTP_REQUEST_MAX")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "12")  # before: a traceback at every request
    with pytest.raises(CctkError) as refused:
        tracking.check_retry_budget()
    assert str(refused.value) == (
        "MLflow's client takes no retry budget of MLFLOW_HTTP_REQUEST_MAX_RETRIES=12, "
        "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR=2: The configured max_retries value (12) is in excess of the maximum "
        "allowable retries (10)"
    )
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "many")
    with pytest.raises(CctkError, match=r"MLFLOW_HTTP_REQUEST_MAX_RETRIES=many, .*: not an integer"):
        tracking.check_retry_budget()


class _GoneRun:
    """A run whose server stopped answering: every call to end it fails as a real one would."""

    run_id = "r1"

    def failed(self, error):
        raise tracking.Unreachable("the tracking server at http://s stopped answering")

    end = failed


class _BackRun(_GoneRun):
    """A run whose server answers again by the time it is ended."""

    def failed(self, error):
        self.ended = ("FAILED", str(error))


def _a_parent_and_its_arm_gone() -> None:
    parent = _GoneRun()
    parent.run_id = "r0"
    with tracking.ending(parent), tracking.ending(_GoneRun()):
        raise tracking.Unreachable("gone")


def test_a_run_the_server_cannot_end_is_named_as_left_running_and_the_command_fails():
    with pytest.raises(tracking.Unreachable) as raised, tracking.ending(_GoneRun()):
        raise tracking.Unreachable("the tracking server at http://s stopped answering while cctk called log_batch")
    assert raised.value.left_running == ("r1",)
    assert str(raised.value).endswith("run r1 could not be ended there and stays RUNNING: resume once the server "
                                      "answers (cctk run --resume RUN_ID for a pipeline)")  # fmt: skip
    with pytest.raises(tracking.Unreachable) as outer:
        _a_parent_and_its_arm_gone()
    assert outer.value.left_running == ("r1", "r0") and "runs r1, r0 could not be ended" in str(outer.value)
    back = _BackRun()
    with pytest.raises(tracking.Unreachable) as again, tracking.ending(back):
        raise tracking.Unreachable("gone")
    assert back.ended == ("FAILED", "gone") and again.value.left_running == ()


class _BackForTheStop(_GoneRun):
    """A parent whose server answers again by the time it is ended."""

    run_id = "r0"

    def end(self, status="FINISHED"):
        self.ended = status


def test_a_stop_that_meets_an_outage_names_the_runs_left_running_and_stays_a_stop():
    """Ctrl-C while the server is gone: the arm's KILLED write fails, and the line naming the runs left RUNNING
    carries the stop (the command still exits 130, tests/cli/test_exit_codes.py); a parent the server answers
    again is ended KILLED, not FAILED."""
    parent = _GoneRun()
    parent.run_id = "r0"
    stop = KeyboardInterrupt()
    with pytest.raises(tracking.Unreachable) as gone, tracking.ending(parent), tracking.ending(_GoneRun()):
        raise stop
    assert gone.value.left_running == ("r1", "r0") and gone.value.leaving is stop
    back = _BackForTheStop()
    with pytest.raises(tracking.Unreachable) as again, tracking.ending(back), tracking.ending(_GoneRun()):
        raise stop
    assert back.ended == "KILLED" and again.value.left_running == ("r1",) and again.value.leaving is stop


def test_a_new_store_opens_without_mlflows_info_lines(tmp_path):
    """Before: every command's first use of a new store printed MLflow's "INFO mlflow.store.db.utils: Creating
    initial MLflow database tables..." and "Updating database tables" above cctk's own first line."""
    import subprocess
    import sys

    uri = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    code = f"from cctk.store import tracking; tracking.Store(tracking.resolve({uri!r})).experiment_ids()"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "mlruns" / "mlflow.db").is_file()
    assert "INFO" not in done.stderr and "database tables" not in done.stderr, done.stderr


def test_a_sqlite_stores_writer_waits_for_anothers_lock(tracking_uri, monkeypatch):
    """MLflow begins every session on SQLite with a 20 s busy timeout: a run's last status write, waiting on
    another writer under load (a sweep's cell, the system metrics' thread), could fail and leave the run
    RUNNING. Every SQLite client of cctk waits ``BUSY_TIMEOUT`` s in MLflow's own sessions (read in one); a
    URI's own timeout is kept."""
    import sqlalchemy

    store = tracking.connect(tracking_uri)
    assert store.client.tracking_uri == tracking_uri + "?timeout=120" and store.uri == tracking_uri
    sessions = store.client._tracking_client.store.ManagedSessionMaker  # MLflow's, as every call of it opens one
    with sessions() as session:
        assert session.execute(sqlalchemy.text("PRAGMA busy_timeout")).scalar() == 120_000
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_uri + "?timeout=0.5")  # wins over connect's argument
    with tracking.connect().client._tracking_client.store.ManagedSessionMaker() as own:
        assert own.execute(sqlalchemy.text("PRAGMA busy_timeout")).scalar() == 500
    assert tracking.waiting("sqlite:////tmp/x.db?timeout=9") == "sqlite:////tmp/x.db?timeout=9"
    assert tracking.waiting("sqlite:////tmp/x.db?mode=ro") == "sqlite:////tmp/x.db?mode=ro&timeout=120"
    assert tracking.waiting("http://127.0.0.1:5000") == "http://127.0.0.1:5000"


class _Refusing:
    """A store's client whose first ``refusals`` status writes fail as a locked database's do."""

    def __init__(self, client, refusals: int, error: Exception):
        self.client, self.refusals, self.error, self.tries = client, refusals, error, 0

    def set_terminated(self, run_id, status):
        self.tries += 1
        if self.tries <= self.refusals:
            raise self.error
        self.client.set_terminated(run_id, status=status)

    def set_tag(self, run_id, key, value):
        self.client.set_tag(run_id, key, value)


def test_a_refused_status_write_is_tried_again_once(tracking_uri, monkeypatch):
    from mlflow.exceptions import MlflowException

    monkeypatch.setattr(tracking.runs, "END_PAUSE", 0.0)
    store = tracking.connect(tracking_uri)
    locked = MlflowException("(sqlite3.OperationalError) database is locked")
    run = store.start(store.experiment(), "arm")
    client = _Refusing(store.client, 1, locked)
    with pytest.raises(KeyboardInterrupt), tracking.ending(tracking.LiveRun(run.run_id, client)):
        raise KeyboardInterrupt
    assert store.get(run.run_id).status == "KILLED" and client.tries == 2
    twice = store.start(store.experiment(), "arm")
    client = _Refusing(store.client, 2, locked)
    with pytest.raises(MlflowException, match="database is locked"):
        tracking.LiveRun(twice.run_id, client).end("FINISHED")
    assert store.get(twice.run_id).status == "RUNNING" and client.tries == 2  # once again, not forever
    left = store.start(store.experiment(), "arm")
    client = _Refusing(store.client, 2, locked)
    with (
        pytest.raises(tracking.NotEnded, match=f"run {left.run_id} could not be ended FAILED") as said,
        tracking.ending(tracking.LiveRun(left.run_id, client)),
    ):
        raise ValueError("the arm broke")
    assert store.get(left.run_id).status == "RUNNING"  # and the line says so, with what ended the block
    assert isinstance(said.value.leaving, ValueError) and said.value.status == "FAILED"
    refused = store.start(store.experiment(), "arm")
    client = _Refusing(store.client, 1, tracking.Refused("user 'bob' may not log to this experiment"))
    with pytest.raises(tracking.Refused):
        tracking.LiveRun(refused.run_id, client).end("FINISHED")
    assert client.tries == 1  # a refusal is one line at once


class _Stopped:
    """A store's client that is sent Ctrl-C (``stops`` times) while it writes a run's status."""

    def __init__(self, client, stops: int = 1):
        self.client, self.stops = client, stops

    def set_terminated(self, run_id, status):
        for _ in range(self.stops):
            os.kill(os.getpid(), signal.SIGINT)  # Python raises it at the next bytecode: inside the write
        self.client.set_terminated(run_id, status=status)


@pytest.fixture
def ctrl_c():
    """Ctrl-C raising KeyboardInterrupt in this process, as in a command (a pytest-xdist worker ignores it)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_stop_while_the_status_is_written_is_raised_once_it_is_written(tracking_uri, ctrl_c):
    """Ctrl-C as a finished run's status was being written left it RUNNING (seen on a smoke run stopped at its
    last line): the stop now waits for the write, then the command stops (exit 130 at the CLI). A run being
    ended KILLED is written too; a second Ctrl-C while the first waits is raised at once."""
    store = tracking.connect(tracking_uri)
    done = store.start(store.experiment(), "arm")
    with pytest.raises(KeyboardInterrupt), tracking.ending(tracking.LiveRun(done.run_id, _Stopped(store.client))):
        pass
    assert store.get(done.run_id).status == "FINISHED"
    killed = store.start(store.experiment(), "arm")
    with pytest.raises(KeyboardInterrupt), tracking.ending(tracking.LiveRun(killed.run_id, _Stopped(store.client))):
        raise KeyboardInterrupt
    assert store.get(killed.run_id).status == "KILLED"
    insisted = store.start(store.experiment(), "arm")
    with (
        pytest.raises(KeyboardInterrupt),
        tracking.ending(tracking.LiveRun(insisted.run_id, _Stopped(store.client, 2))),
    ):
        pass
    assert store.get(insisted.run_id).status == "RUNNING"  # the user's second Ctrl-C, at once
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler given back


def test_a_nested_run_the_store_would_not_end_ends_its_parent_as_the_command_leaves(tracking_uri, monkeypatch):
    """An arm's end refused twice as the command was stopped: its pipeline still ends KILLED (was FAILED, the
    arm's line its error), and the arm's line says what ends it later: its pipeline's resume (it named the
    arm's own id, which ``cctk run --resume`` refuses). Where the pipeline's end is refused too, one line names
    both runs, the arm's first; the command still leaves as it was stopped."""
    from mlflow.exceptions import MlflowException

    monkeypatch.setattr(tracking.runs, "END_PAUSE", 0.0)
    store = tracking.connect(tracking_uri)
    locked = MlflowException("(sqlite3.OperationalError) database is locked")
    parent = store.start(store.experiment(), "pipeline")
    arm = store.start(store.experiment(), "arm", parent=parent.run_id)
    with (
        pytest.raises(tracking.NotEnded) as said,
        tracking.ending(tracking.LiveRun(parent.run_id, store.client), "pipeline"),
        tracking.ending(tracking.LiveRun(arm.run_id, _Refusing(store.client, 2, locked)), "model", parent.run_id),
    ):
        raise KeyboardInterrupt
    assert store.get(parent.run_id).status == "KILLED" and store.get(arm.run_id).status == "RUNNING"
    assert said.value.run_id == arm.run_id and isinstance(said.value.leaving, KeyboardInterrupt)
    assert str(said.value) == (
        f"run {arm.run_id} could not be ended KILLED: the store refused the write twice (MlflowException: "
        "(sqlite3.OperationalError) database is locked); it shows RUNNING until its pipeline is resumed (cctk run "
        f"--resume {parent.run_id}, which ends it KILLED) or the store takes the write"
    )
    failing = store.start(store.experiment(), "pipeline")
    arm = store.start(store.experiment(), "arm", parent=failing.run_id)
    with (
        pytest.raises(tracking.NotEnded) as both,
        tracking.ending(tracking.LiveRun(failing.run_id, _Refusing(store.client, 2, locked)), "pipeline"),
        tracking.ending(tracking.LiveRun(arm.run_id, _Refusing(store.client, 2, locked)), "model", failing.run_id),
    ):
        raise ValueError("the arm broke")
    assert store.get(failing.run_id).status == "RUNNING" and store.get(arm.run_id).status == "RUNNING"
    line = str(both.value)
    assert line.startswith(f"run {arm.run_id} could not be ended FAILED: ") and line.count("could not be ended") == 2
    assert line.endswith(
        f"; run {failing.run_id} could not be ended FAILED: the store refused the write twice (MlflowException: "
        "(sqlite3.OperationalError) database is locked); it shows RUNNING until it is resumed (cctk run --resume "
        f"{failing.run_id}) or the store takes the write"
    )
    assert both.value.run_id == failing.run_id and both.value.inner is not None
    assert isinstance(both.value.leaving, ValueError)  # the CLI says the arm's error after the line
    finished = store.start(store.experiment(), "pipeline")
    arm = store.start(store.experiment(), "arm", parent=finished.run_id)
    with (
        pytest.raises(tracking.NotEnded) as done,
        tracking.ending(tracking.LiveRun(finished.run_id, store.client), "pipeline"),
        tracking.ending(tracking.LiveRun(arm.run_id, _Refusing(store.client, 2, locked)), "model", finished.run_id),
    ):
        pass  # the arm finished; the store would not end it: the pipeline did not finish
    ended = store.get(finished.run_id)
    assert ended.status == "FAILED" and ended.tags[tracking.ERROR] == f"NotEnded: {done.value}"
    assert tracking.NotEnded("r1", "FINISHED", locked, None).until == (
        "it is ended by hand (mlflow.MlflowClient().set_terminated('r1', 'FINISHED'))"
    )


def test_the_runs_an_outage_left_running_are_named_with_the_command_that_ends_them():
    """What ends them is said by the outermost run's kind (was `cctk run --resume RUN_ID for a pipeline` for
    every run): a pipeline's resume, also for its arm; a sweep's; a compare's run, MLflow's set_terminated."""
    parent = _GoneRun()
    parent.run_id = "r0"
    with (
        pytest.raises(tracking.Unreachable) as both,
        tracking.ending(parent, "pipeline"),
        tracking.ending(_GoneRun(), "model", "r0"),
    ):
        raise tracking.Unreachable("gone")
    assert str(both.value) == (
        "gone; runs r1, r0 could not be ended there and stay RUNNING: resume once the server answers (cctk run "
        "--resume r0)"
    )
    with pytest.raises(tracking.Unreachable) as arm, tracking.ending(_GoneRun(), "model", "r0"):
        raise tracking.Unreachable("gone")
    assert str(arm.value).endswith("stays RUNNING: resume once the server answers (cctk run --resume r0)")
    with pytest.raises(tracking.Unreachable) as sweep, tracking.ending(_GoneRun(), "sweep"):
        raise tracking.Unreachable("gone")
    assert str(sweep.value).endswith("stays RUNNING: resume once the server answers (cctk sweep --resume r1)")
    with pytest.raises(tracking.Unreachable) as compare, tracking.ending(_GoneRun(), "compare"):
        raise tracking.Unreachable("gone")
    assert str(compare.value).endswith(
        "stays RUNNING: end it by hand once the server answers (mlflow.MlflowClient().set_terminated('r1', 'FAILED'))"
    )


class _TagRefusing(_Refusing):
    """Its first tag write fails as a locked database's does."""

    def set_tag(self, run_id, key, value):
        self.tags = getattr(self, "tags", 0) + 1
        if self.tags == 1:
            raise self.error
        self.client.set_tag(run_id, key, value)


def test_a_failed_run_whose_error_tag_the_store_refused_still_ends_failed(tracking_uri):
    """A busy store that did not take tag cctk.error still gets the status: FAILED, then the tag once more; the
    block's own error goes on (not the store's)."""
    from mlflow.exceptions import MlflowException

    store = tracking.connect(tracking_uri)
    run = store.start(store.experiment(), "arm")
    client = _TagRefusing(store.client, 0, MlflowException("(sqlite3.OperationalError) database is locked"))
    with pytest.raises(ValueError, match="the arm broke"), tracking.ending(tracking.LiveRun(run.run_id, client)):
        raise ValueError("the arm broke")
    ended = store.get(run.run_id)
    assert ended.status == "FAILED" and ended.tags[tracking.ERROR] == "ValueError: the arm broke" and client.tags == 2


def test_a_store_locked_past_the_wait_mid_run_is_one_line_and_the_run_it_could_not_end_is_named(
    tracking_uri, monkeypatch
):
    """Held by another process (a real SQLite lock) past the wait: a write is ``Locked``, one line naming the
    store and the call (before: MLflow's traceback); the end is tried twice, then one line names the run left
    RUNNING; once the lock is let go, the store takes the end."""
    import sqlite3

    monkeypatch.setattr(tracking.runs, "END_PAUSE", 0.0)
    path = tracking.sqlite_path(tracking_uri)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_uri + "?timeout=0.2")  # the URI's own wait, kept
    store = tracking.connect()
    run = tracking.LiveRun(store.start(store.experiment(), "arm").run_id, store.client)
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        with pytest.raises(tracking.Locked) as write:
            run.tags({"cctk.note": "x"})
        with pytest.raises(tracking.NotEnded) as end, tracking.ending(run):
            raise KeyboardInterrupt
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert str(write.value) == (
        f"the tracking store {path} stayed locked by another process longer than the wait for it while cctk called "
        "set_tag; try again once that process is done, or wait longer with ?timeout=SECONDS on its URI"
    )
    assert isinstance(end.value.refused, tracking.Locked) and isinstance(end.value.leaving, KeyboardInterrupt)
    assert str(end.value).startswith(f"run {run.run_id} could not be ended KILLED: the store refused the write twice")
    assert store.get(run.run_id).status == "RUNNING"
    run.end("KILLED")
    assert store.get(run.run_id).status == "KILLED"


def test_the_users_own_active_run_gets_cctks_client(tracking_uri, monkeypatch):
    """KR-Test's callback logs to a user's own run (mlflow.start_run()): a lock past the wait there is the same
    one line (before: a plain MLflow client, its traceback inside the user's Trainer)."""
    import sqlite3

    import mlflow

    path = tracking.sqlite_path(tracking_uri)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_uri + "?timeout=0.2")  # MLflow's current URI
    with mlflow.start_run():
        run = tracking.active_run()
        run.tags({"cctk.note": "taken"})
        holder = sqlite3.connect(path, isolation_level=None)
        try:
            holder.execute("BEGIN EXCLUSIVE")
            with pytest.raises(tracking.Locked, match=f"the tracking store {path} stayed locked"):
                run.tags({"cctk.note": "refused"})
        finally:
            holder.execute("ROLLBACK")
            holder.close()


def test_a_commands_last_line_reads_nothing_of_an_embedded_store_and_outlives_a_servers_outage(monkeypatch, tmp_path):
    """`Store.link`, the line a command ends with once its run is FINISHED: an embedded store's `cctk ui ID` needs
    no read; a server's page names the run's experiment, read from the server, and a server that stopped answering
    at that moment gets the run named on it, not an error after the work is done."""
    from types import SimpleNamespace

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setattr(tracking.runs, "_open_client", lambda uri: None)
    monkeypatch.setattr(tracking.Store, "get", lambda self, run_id: (_ for _ in ()).throw(tracking.Unreachable("x")))
    uri = f"sqlite:///{tmp_path}/m.db"
    assert tracking.Store(tracking.resolve(uri)).link("abc") == f"MLflow UI: cctk ui abc --tracking {uri}"
    server = tracking.Store(tracking.resolve("http://127.0.0.1:9"))
    assert server.link("abc") == "MLflow UI: run abc on http://127.0.0.1:9"
    monkeypatch.setattr(tracking.Store, "get", lambda self, run_id: SimpleNamespace(experiment_id="4"))
    assert server.link("abc") == (
        "MLflow UI: http://127.0.0.1:9/#/experiments/4/runs/abc?workflowType=machine_learning"
    )


def test_a_filesystem_store_or_an_unknown_scheme_is_one_line_before_any_work(tmp_path, monkeypatch):
    """MLflow refuses a file: store with a sixty-line traceback (and ftp: with a KeyError): cctk says why in one
    line, from --tracking, MLFLOW_TRACKING_URI or a configuration, and lets MLflow's own opt-out through."""
    from click.testing import CliRunner

    from cctk.cli.main import cli
    from cctk.store.tracking.config import resolve

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    with pytest.raises(CctkError, match=r"^the tracking URI file:///tmp/runs is MLflow's filesystem store"):
        resolve("file:///tmp/runs")
    with pytest.raises(CctkError, match=r"^the tracking URI ftp://x is no store MLflow opens"):
        resolve("ftp://x")
    measure = ["measure", "--model", "smollm2-135m-bundled", "--out", "o", "--tracking", "file:./runs"]
    done = CliRunner().invoke(cli, measure)
    assert done.exit_code == 1 and len(done.output.strip().splitlines()) == 1, done.output
    assert "filesystem store" in done.output and not list(tmp_path.iterdir())
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "ftp://x")
    with pytest.raises(CctkError, match="no store MLflow opens"):
        resolve()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "./mlruns")  # a bare path is MLflow's file store as well
    with pytest.raises(CctkError, match="is MLflow's filesystem store"):
        resolve()


@pytest.mark.parametrize(
    "uri", ["sqlite://", "sqlite:///:memory:", "sqlite:///", "sqlite:///file:r?mode=memory&uri=true"]
)
def test_a_sqlite_store_in_memory_is_refused(uri, monkeypatch):
    """A database in memory took a whole run (exit 0) and lost it as the command ended (with ``sqlite://``, 67 lines
    of the system metrics' tracebacks too), its last line still naming the store to browse it in."""
    from cctk.store.tracking.config import resolve

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(CctkError, match=rf"^the tracking URI {re.escape(uri)} is a SQLite database in memory, gone"):
        resolve(uri)


def test_a_sqlite_url_sqlalchemy_does_not_read_is_one_line(monkeypatch, tmp_path):
    """``sqlite://mlflow.db`` (two slashes) was a traceback from SQLAlchemy at the first query."""
    from cctk.store.tracking.config import resolve

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(CctkError, match=r"^the tracking URI sqlite://mlflow.db is no SQLite URL: give sqlite:///"):
        resolve("sqlite://mlflow.db")
    assert resolve(f"sqlite:///{tmp_path}/m.db?timeout=5").tracking_uri.startswith(f"sqlite:///{tmp_path}/m.db")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "file:///tmp/runs")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    assert resolve().tracking_uri == "file:///tmp/runs"
    for uri in ("sqlite:///x.db", "postgresql+psycopg2://u@h/db", "mysql://u@h/db", "https://mlflow.example.org"):
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
        assert resolve().tracking_uri.startswith(uri.partition(":")[0])


@pytest.mark.parametrize(
    ("resume", "message"),
    [("", "--resume needs the RUN_ID of the run to continue, got an empty one"), ("nosuch", "no MLflow store at")],
)
def test_run_resume_of_nothing_creates_nothing(tmp_path, monkeypatch, resume, message):
    """`--resume ''` (an unset variable) started a new pipeline; `--resume ID` in a folder without a store
    created an empty one before saying the run is not there."""
    from click.testing import CliRunner

    from cctk.cli.main import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    done = CliRunner().invoke(cli, ["run", "--resume", resume])
    assert done.exit_code == 1 and message in done.output and not list(tmp_path.iterdir()), done.output


def test_the_run_mlflow_run_created_is_attached_its_experiment_tagged_and_a_stop_said(tracking_uri, monkeypatch):
    """`mlflow run` without --experiment-name creates its run in MLflow's Default experiment, which cctk never
    tagged as a model-training one; its own command ends the run again after this process is gone (FAILED on
    Ctrl-C), so the run says it was stopped. A measurement attaches as a pipeline does."""
    store = tracking.connect()
    created = store.client.create_run("0")  # what `mlflow run` makes: Default, a random name
    monkeypatch.setenv("MLFLOW_RUN_ID", created.info.run_id)
    with pytest.raises(KeyboardInterrupt), store.run("pipeline", "session", attach=True):
        raise KeyboardInterrupt
    run = store.client.get_run(created.info.run_id)
    assert run.info.status == "KILLED" and run.data.tags[tracking.ENDED].startswith("stopped by Ctrl-C or SIGTERM")
    assert store.client.get_experiment("0").tags["mlflow.experimentKind"] == "custom_model_development"
    assert run.data.tags["mlflow.runName"] == "session" and run.data.tags["cctk.kind"] == "pipeline"


def test_a_run_the_user_named_under_mlflow_run_keeps_its_name(tracking_uri, monkeypatch):
    """`mlflow run --run-name phi-lr3e-5` names its run; cctk renamed it after the session, as it renames the name
    MLflow makes up without one (``persistent-bird-941``), which it still does. The session stays in its tag."""
    store = tracking.connect()
    experiment = store.experiment()
    for given, kept in [("phi-lr3e-5", True), ("persistent-bird-941", False), (None, False), ("big-run-2", True)]:
        created = store.client.create_run(experiment, run_name=given)
        monkeypatch.setenv("MLFLOW_RUN_ID", created.info.run_id)
        with store.run(
            "pipeline", "20261207-101500_phi_1_5", {tracking.SESSION: "20261207-101500_phi_1_5"}, attach=True
        ):
            pass
        run = store.client.get_run(created.info.run_id)
        assert run.info.run_name == (given if kept else "20261207-101500_phi_1_5"), given
        assert run.data.tags[tracking.SESSION] == "20261207-101500_phi_1_5"
    assert tracking.runs.made_up(store.client.create_run(experiment).info.run_name)  # what MLflow makes up
    assert not tracking.runs.made_up("persistent-bird") and not tracking.runs.made_up("bird-persistent-941")


SERVER = "http://127.0.0.1:5000/get-artifact?path=targets.csv&run_id=abc"


@pytest.mark.parametrize(
    ("store_uri", "artifacts", "expected"),
    [
        # a tracking server: its /get-artifact serves the run's file from wherever it keeps artifacts
        ("http://127.0.0.1:5000", "mlflow-artifacts:/1/abc/artifacts", SERVER),
        # no credential goes into the run: the user part (a password, a token) and the query dropped
        (
            "https://***@mlflow.lab.org/mlflow/?token=s3cret",
            "s3://bucket/1/abc/artifacts",
            "https://mlflow.lab.org/mlflow/get-artifact?path=targets.csv&run_id=abc",
        ),
        # a store read directly: the artifact itself, where MLflow's dataset sources read it
        ("sqlite:////me/mlruns/mlflow.db", "/me/mlruns/1/abc/artifacts", "/me/mlruns/1/abc/artifacts/targets.csv"),
        ("postgresql://cctk:***@db/mlflow", "s3://bucket/1/abc/artifacts/", "s3://bucket/1/abc/artifacts/targets.csv"),
        # the server's own scheme without the server: nothing that reads it
        ("postgresql://cctk:***@db/mlflow", "mlflow-artifacts:/1/abc/artifacts", None),
    ],
)
def test_a_runs_artifact_has_the_address_anyone_who_reads_the_store_reads_it_at(store_uri, artifacts, expected):
    assert tracking.artifact_address(store_uri, artifacts, "abc", "targets.csv") == expected


def test_an_address_no_dataset_source_of_mlflows_reads_is_not_given_as_one():
    """A store whose artifacts MLflow's dataset sources cannot read (a scheme a plugin adds): the arm's dataset keeps
    its session path rather than fail the arm (MLflow's ``from_pandas`` refuses an unresolvable source)."""
    assert tracking.dataset_source_reads("http://127.0.0.1:5000/get-artifact?path=targets.csv&run_id=abc")
    assert tracking.dataset_source_reads("/me/mlruns/1/abc/artifacts/targets.csv")
    assert tracking.dataset_source_reads("s3://bucket/1/abc/artifacts/targets.csv")
    assert not tracking.dataset_source_reads("weird-store://bucket/1/abc/artifacts/targets.csv")
