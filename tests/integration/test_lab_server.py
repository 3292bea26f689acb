"""A lab's tracking server, for real on loopback: PostgreSQL that asks for a password, `cctk server` with MLflow's
basic-auth app, an admin who adds two researchers and a viewer, their permission matrix, a pipeline through a
faulty proxy (503s retried; a server gone: the run ends truthfully and resumes), a sweep on Ray writing as its
researcher, the viewer comparing both and writing nothing, and no password where another user or a run could
see it: command lines, the environments of the clients and Ray workers, every file, every MLflow field."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests
from servers import FaultyProxy, free_port, postgres_cluster

from cctk.core.errors import CctkError
from cctk.core.lm.compute import PINNED

pytestmark = [pytest.mark.integration, pytest.mark.slow]
BIN = Path(sys.executable).parent
PG_PASSWORD = "pg-Secret-4711-zq"  # the database's: the server's alone
ADMIN_PASSWORD = "admin-Secret-0815-zq"
PASSWORDS = {
    "admin": ADMIN_PASSWORD,
    "alice": "alice-Secret-1-zq",
    "bob": "bob-Secret-2-zq",
    "carol": "carol-Secret-3-zq",
}
SERVER_SECRETS = (PG_PASSWORD, ADMIN_PASSWORD)  # in no process but the server's, nowhere at all on disk or MLflow
SMOKE = ["--profile", "smoke", "--parts", "A", "--no-figures", "--no-system-metrics"]


@dataclass
class Lab:
    url: str
    folder: Path
    server: subprocess.Popen
    log: Path
    database: str  # the PostgreSQL cluster's URI, for the superuser postgres (no password in it)
    runs: dict[str, str] = field(default_factory=dict)  # what the tests made, for the tests after them
    environs: list[bytes] = field(default_factory=list)  # of client processes and Ray workers, as they ran

    def env(self, who: str | None = None, **extra: str) -> dict[str, str]:
        return clean_env(who, **extra)

    def cctk(self, *args: str, who: str | None = None, timeout: int = 900, **extra: str):
        return subprocess.run(
            [str(BIN / "cctk"), *args],
            cwd=self.folder,
            env=self.env(who, **extra),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def accounts(self, who: str):
        from cctk.store import tracking

        os.environ.update(MLFLOW_TRACKING_USERNAME=who, MLFLOW_TRACKING_PASSWORD=PASSWORDS[who])
        return tracking.Accounts(tracking.Store(tracking.TrackingConfig("lab", self.url)))

    def client(self, who: str = "admin"):
        """MLflow's own client as ``who``, for the checks (credentials in the environment, as MLflow reads them)."""
        import mlflow

        os.environ.update(MLFLOW_TRACKING_USERNAME=who, MLFLOW_TRACKING_PASSWORD=PASSWORDS[who])
        return mlflow.MlflowClient(self.url)


def clean_env(who: str | None = None, **extra: str) -> dict[str, str]:
    """An environment without this test process's MLflow or cctk variables (but the pinned GEMM peak, which only
    spares the runs their measurement), logged in as ``who``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "CCTK_")) or k == PINNED}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", OMP_NUM_THREADS="1")
    if who:
        env.update(MLFLOW_TRACKING_USERNAME=who, MLFLOW_TRACKING_PASSWORD=PASSWORDS[who])
    return {**env, **extra}


def _error(done: subprocess.CompletedProcess) -> str:
    """The command's one line on stderr (click's ``Error: ...``)."""
    lines = [line for line in done.stderr.splitlines() if line.startswith("Error: ")]
    assert done.returncode == 1 and len(lines) == 1, (done.returncode, done.stdout[-2000:], done.stderr[-3000:])
    return lines[0]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """PostgreSQL (with a password), `cctk server --config lab` on it (auth on, metrics on, a host name
    allowed), and the admin's set-up as docs/mlflow.md gives it: two researchers, each EDIT on her own
    experiment, and a viewer, who reads by the default permission."""
    folder = tmp_path_factory.mktemp("lab")
    with postgres_cluster(password=PG_PASSWORD) as database:
        port = free_port()
        (folder / "mlruns_config").mkdir()
        (folder / "mlruns_config" / "lab.toml").write_text(
            f'tracking_uri = "http://127.0.0.1:{port}"\n[server]\nport = {port}\n'
            f'backend_store_uri = "{database}"\npassword_env = "CCTK_PG_PASSWORD"\n'
            'artifacts_destination = "mlruns/lab-artifacts"\nmetrics = "mlruns/lab-metrics"\n'
            'allowed_hosts = ["mlflow.lab.example"]\n[server.auth]\nadmin_password_env = "CCTK_ADMIN_PASSWORD"\n'
            "cache_seconds = 60\n"  # as docs/mlflow.md gives it: a checked password trusted a minute
        )
        log = folder / "server.log"
        with log.open("w") as out:
            server = subprocess.Popen(
                [str(BIN / "cctk"), "server", "--config", "lab"],
                cwd=folder,
                env=clean_env(CCTK_PG_PASSWORD=PG_PASSWORD, CCTK_ADMIN_PASSWORD=ADMIN_PASSWORD),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        lab = Lab(f"http://127.0.0.1:{port}", folder, server, log, database)
        try:
            for _ in range(240):
                if "answers" in log.read_text() or server.poll() is not None:
                    break
                time.sleep(0.5)
            assert "answers" in log.read_text(), log.read_text()[-3000:]
            # Alice as the docs give it, by the command line; Bob and Carol by the same calls, in this process
            done = lab.cctk("server", "users", "add", "alice", "--password-env", "NEW", "--tracking", "lab",
                            who="admin", NEW=PASSWORDS["alice"])  # fmt: skip
            assert done.returncode == 0 and "user 'alice' added" in done.stdout, done.stderr[-2000:]
            done = lab.cctk("server", "users", "grant", "alice", "alice", "EDIT", "--tracking", "lab", who="admin")
            assert done.returncode == 0 and "'alice' has EDIT on experiment 'alice'" in done.stdout, done.stderr
            accounts = lab.accounts("admin")
            accounts.add("bob", PASSWORDS["bob"])
            accounts.add("carol", PASSWORDS["carol"])
            accounts.grant("bob", "bob", "EDIT")
            assert [(a.name, a.admin, a.grants) for a in accounts.list()][1:] == [
                ("alice", False, (("alice", "EDIT"),)),
                ("bob", False, (("bob", "EDIT"),)),
                ("carol", False, ()),
            ]
            yield lab
        finally:
            server.send_signal(signal.SIGTERM)  # cctk passes it to the server's whole process group
            server.wait(timeout=60)
            for key in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
                os.environ.pop(key, None)


def _tree(pid: int) -> list[int]:
    """``pid``'s descendants, all generations."""
    out, frontier = [], [pid]
    while frontier:
        below = [c for p in frontier for c in _children(p)]
        out += below
        frontier = below
    return out


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for t in Path(f"/proc/{pid}/task").iterdir() for c in (t / "children").read_text().split()]
    except OSError:
        return []


def test_no_password_on_any_command_line_while_the_server_runs(lab):
    listing = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert not [s for s in SERVER_SECRETS if s in listing]
    processes = _tree(lab.server.pid)
    commands = {pid: Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode() for pid in processes}
    assert any(" mlflow server " in c for c in commands.values()), commands
    assert any("uvicorn" in c and "mlflow.server.auth:create_app" in c for c in commands.values())
    assert not any("huey" in c for c in commands.values())  # MLflow's job runners: off, cctk runs no GenAI jobs
    for pid, command in commands.items():
        assert not [s for s in SERVER_SECRETS if s in command], (pid, command)
    # by design, the server's own processes carry the database's URI with its password in their environment
    (server,) = [pid for pid, c in commands.items() if " mlflow server " in c]
    environ = Path(f"/proc/{server}/environ").read_bytes()
    assert f"MLFLOW_BACKEND_STORE_URI=postgresql+psycopg2://postgres:{PG_PASSWORD}@".encode() in environ


def _matrix_row(lab: Lab, who: str | None, experiment_id: str, run_id: str, monkeypatch) -> dict[str, str]:
    """(HTTP status, cctk's line) of create run, log, read and delete run, as ``who`` on another's experiment."""
    from cctk.store import tracking

    for key in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.delenv(key, raising=False)
    if who:
        monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", who)
        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", PASSWORDS[who])
    auth = (who, PASSWORDS[who]) if who else None
    now = int(time.time() * 1000)
    rest = {
        "create run": ("post", "runs/create", {"experiment_id": experiment_id, "start_time": now}),
        "log": ("post", "runs/log-metric", {"run_id": run_id, "key": "m", "value": 1.0, "timestamp": now, "step": 0}),
        "read": ("get", "runs/get", {"run_id": run_id}),
        "delete other's run": ("post", "runs/delete", {"run_id": run_id}),
    }
    store = tracking.Store(tracking.TrackingConfig("lab", lab.url))
    calls = {
        "create run": lambda: store.start(experiment_id, "probe"),
        "log": lambda: tracking.LiveRun(run_id, store.client).metrics({"m": 1.0}),
        "read": lambda: store.get(run_id),
        "delete other's run": lambda: store.client.delete_run(run_id),
    }
    row = {}
    for action, (method, path, payload) in rest.items():
        url = f"{lab.url}/api/2.0/mlflow/{path}"
        answer = requests.request(
            method, url, auth=auth, **({"params": payload} if method == "get" else {"json": payload})
        )
        try:
            calls[action]()
            line = "ok"
        except tracking.Refused as refused:
            line = str(refused)
        row[action] = f"{answer.status_code}: {line}"
    return row


def test_the_permission_matrix(lab, monkeypatch):
    """Researcher A and B, the viewer and anonymous, each on another's experiment: create a run, log to a
    run, read it, delete it. Each cell: the HTTP status, and cctk's one line."""
    from cctk.store import tracking

    own = {}
    for name in ("alice", "bob"):
        monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", name)
        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", PASSWORDS[name])
        store = tracking.Store(tracking.TrackingConfig("lab", lab.url))
        experiment_id = store.experiment(name)
        own[name] = experiment_id, store.start(experiment_id, f"{name}'s run").run_id
    rows = {
        "researcher A (alice), on B's": _matrix_row(lab, "alice", *own["bob"], monkeypatch),
        "researcher B (bob), on A's": _matrix_row(lab, "bob", *own["alice"], monkeypatch),
        "viewer (carol), on A's": _matrix_row(lab, "carol", *own["alice"], monkeypatch),
        "anonymous, on A's": _matrix_row(lab, None, *own["alice"], monkeypatch),
    }
    print("\npermission matrix (HTTP status: cctk's line)")
    for who, row in rows.items():
        for action, cell in row.items():
            print(f"{who:30} {action:20} {cell}")
    for who, row in rows.items():
        if who.startswith("anonymous"):
            assert all(
                cell.startswith("401: the tracking server at") and "asks who you are" in cell for cell in row.values()
            )
            continue
        owner = "bob" if "alice" in who else "alice"
        assert row["read"] == "200: ok"
        for action in ("create run", "log"):
            assert row[action].startswith("403: user ") and f"may not write to experiment {owner!r}" in row[action]
            assert "that needs EDIT there" in row[action]
        assert f"may not delete runs of experiment {owner!r}" in row["delete other's run"]
        assert row["delete other's run"].startswith("403: ") and "that needs MANAGE there" in row["delete other's run"]
    assert lab.client("admin").get_run(own["alice"][1]).info.lifecycle_stage == "active"  # nothing was deleted


def test_refusals_come_before_any_work(lab, tiny_dir, monkeypatch, tmp_path):
    """A run that may not write fails in one line before any session folder or model: the viewer on A's
    experiment (403: READ only), her login in MLflow's credentials file, and a wrong password (401), by the
    command line; B on A's, no login at all, a wrong password in the file and a file MLflow cannot read, by the
    check every command makes as it connects."""
    from cctk.store import tracking

    in_file = tmp_path / "carol" / ".mlflow" / "credentials"  # out of the lab's folder, which holds no password
    in_file.parent.mkdir(parents=True)
    in_file.write_text(f"[mlflow]\nmlflow_tracking_username = carol\nmlflow_tracking_password = {PASSWORDS['carol']}\n")
    read_only = "user 'carol' has READ on experiment 'alice'"
    cases = {
        "carol": ("carol", {"MLFLOW_EXPERIMENT_NAME": "alice"}, read_only),
        "wrong": ("bob", {"MLFLOW_TRACKING_PASSWORD": "not-his"}, "does not accept user 'bob' (401)"),
        # before: MLflow's credentials file skipped the write check (an empty session folder was made)
        "carol's file": (None, {"MLFLOW_EXPERIMENT_NAME": "alice", "HOME": str(in_file.parents[1])}, read_only),
    }
    for case, (who, extra, expected) in cases.items():
        out = lab.folder / f"refused-{case}"
        done = lab.cctk(
            "run", "--model", str(tiny_dir), *SMOKE, "--tracking", lab.url, "--out", str(out), who=who, **extra
        )
        assert expected in _error(done), (case, done.stderr[-2000:])
        assert not out.exists()  # nothing made: no session folder, no run
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "alice")
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "bob")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", PASSWORDS["bob"])
    with pytest.raises(tracking.Refused, match="user 'bob' has READ on experiment 'alice' on http"):
        tracking.connect(lab.url)
    tracking.connect(lab.url, writes=False)  # a read is his to make
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME")
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD")
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(tracking.Refused, match=r"asks who you are \(401\)"):
        tracking.connect(lab.url, writes=False)
    (tmp_path / ".mlflow").mkdir()
    (tmp_path / ".mlflow" / "credentials").write_text("[mlflow]\nmlflow_tracking_username = bob\n"
                                                     "mlflow_tracking_password = not-his\n")  # fmt: skip
    # before: "set MLFLOW_TRACKING_USERNAME" (the login in the file was not seen)
    with pytest.raises(tracking.Refused, match=r"user 'bob' \(401\): no such user, or the password in ~/.mlflow/cred"):
        tracking.connect(lab.url, writes=False)
    (tmp_path / ".mlflow" / "credentials").write_text("mlflow_tracking_username = bob\n")  # before: a traceback
    with pytest.raises(CctkError, match=r"/.mlflow/credentials: MLflow cannot read it as its credentials file"):
        tracking.connect(lab.url, writes=False)
    (tmp_path / ".mlflow" / "credentials").unlink()  # MLflow's own client below reads it too
    client = lab.client()
    alice = client.get_experiment_by_name("alice").experiment_id
    assert not client.search_runs([alice], "tags.`cctk.kind` = 'pipeline'")


def test_a_pipeline_rides_out_503s_and_a_server_gone_leaves_it_resumable(lab, tiny_dir):
    """Alice's pipeline through a proxy: two 503s are retried as MLflow's client does and the run goes on;
    then the server is gone (connections dropped): the command ends in one line, naming the runs left
    RUNNING; with the server back, --resume finishes it."""
    proxy = FaultyProxy(lab.url)
    try:
        proxy.fail("runs/log-batch", 2)  # a server restarting: answered by the retries
        proxy.drop("runs/log-inputs")  # the first trained arm's corpus: from there on, the server is gone
        faults = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1"}
        command = [str(BIN / "cctk"), "run", "--model", str(tiny_dir), *SMOKE, "--seed", "5"]
        command += ["--tracking", proxy.url, "--out", str(lab.folder / "alice")]
        env = lab.env("alice", MLFLOW_EXPERIMENT_NAME="alice", **faults)
        child = subprocess.Popen(
            command, cwd=lab.folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        lab.environs.append(Path(f"/proc/{child.pid}/environ").read_bytes())
        out, err = child.communicate(timeout=900)
        done = subprocess.CompletedProcess(command, child.returncode, out, err)
        line = _error(done)
        assert proxy.served["503"] == 2 and proxy.served["dropped"] >= 1
        assert line.startswith(
            f"Error: the tracking server at {proxy.url} stopped answering while cctk called log_inputs"
        )
        left = re.search(r"runs? ([0-9a-f, ]+) could not be ended there and stays? RUNNING", line).group(1).split(", ")
        client = lab.client()
        (parent,) = client.search_runs(
            [client.get_experiment_by_name("alice").experiment_id], "tags.`cctk.kind` = 'pipeline'"
        )
        assert parent.info.run_id == left[-1] and parent.info.status == "RUNNING"
        proxy.heal()
        resume = ["run", "--resume", parent.info.run_id, "--no-figures", "--tracking", proxy.url]
        resumed = lab.cctk(*resume, "--out", str(lab.folder / "alice"), who="alice", MLFLOW_EXPERIMENT_NAME="alice")
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert client.get_run(parent.info.run_id).info.status == "FINISHED"
        lab.runs["alice"] = parent.info.run_id
    finally:
        proxy.close()


def test_a_sweep_on_ray_writes_as_its_researcher(lab, tiny_dir):
    """Bob's sweep of one cell on a local Ray cluster (the cell runs in a Ray worker, as every cell of a larger
    sweep would): the worker writes to his experiment with the login it takes from its environment, none of it
    in an argument, a parameter or a tag."""
    pytest.importorskip("ray")
    seen: dict[int, bytes] = {}
    command = [str(BIN / "cctk"), "sweep", "--executor", "ray", "--models", str(tiny_dir), "--seeds", "1"]
    command += ["--profile", "smoke", "--parts", "A", "--no-figures", "--tracking", lab.url]
    command += ["--out", str(lab.folder / "bob")]
    env = lab.env("bob", MLFLOW_EXPERIMENT_NAME="bob")
    sweep = subprocess.Popen(
        command, cwd=lab.folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )

    def watch():  # the sweep's own Ray workers, as they run: their command lines and environments
        while sweep.poll() is None:
            for pid in _tree(sweep.pid):
                try:
                    text = Path(f"/proc/{pid}/cmdline").read_bytes()
                    if b"default_worker.py" in text or text.startswith(b"ray::"):
                        seen[pid] = text + b"\n" + Path(f"/proc/{pid}/environ").read_bytes()
                except OSError:
                    pass
            time.sleep(0.5)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    out, err = sweep.communicate(timeout=1800)
    watcher.join()
    done = subprocess.CompletedProcess(command, sweep.returncode, out, err)
    assert done.returncode == 0, done.stderr[-3000:]
    assert seen, "no Ray worker was seen"
    for text in seen.values():
        assert PASSWORDS["bob"].encode() not in text.split(b"\n", 1)[0]  # not on a worker's command line
    # (a worker's environ as /proc shows it may be overwritten: Ray retitles its workers over that memory)
    lab.environs += [t.split(b"\n", 1)[1] for t in seen.values()]
    client = lab.client()
    experiment = client.get_experiment_by_name("bob").experiment_id
    cells = client.search_runs([experiment], "tags.`cctk.kind` = 'pipeline'")
    # only bob (EDIT) and the admin may write there, and no worker had the admin's login: they wrote as bob
    assert len(cells) == 1 and all(c.info.status == "FINISHED" for c in cells)
    arms = client.search_runs([experiment], "tags.`cctk.kind` != 'pipeline' and tags.`cctk.kind` != 'sweep'")
    assert arms and all(a.info.status == "FINISHED" for a in arms)
    lab.runs["bob"] = cells[0].info.run_id


def test_the_viewer_compares_both_and_writes_nothing(lab):
    if not {"alice", "bob"} <= set(lab.runs):
        pytest.skip("the pipelines before did not finish")
    client = lab.client()
    before = sum(len(client.search_runs([e.experiment_id])) for e in client.search_experiments())
    names = {e.name for e in client.search_experiments()}
    out = lab.folder / "compared"
    done = lab.cctk("compare", "--runs", f"{lab.runs['alice']},{lab.runs['bob']}", "--out", str(out),
                    "--tracking", lab.url, "--no-log", who="carol")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "no MLflow run (--no-log)" in done.stdout and (out / "compare.html").is_file()
    assert sum(len(client.search_runs([e.experiment_id])) for e in client.search_experiments()) == before
    assert {e.name for e in client.search_experiments()} == names


def test_a_database_uri_with_its_password_is_shown_nowhere(lab, tiny_dir):
    """Before: a pipeline given `--tracking postgresql+psycopg2://user:SECRET@host/db` recorded the password in the tag
    cctk.tracking_uri, run_info.json and report.html (artifacts too) and its last line; `cctk ui` put it on `mlflow
    ui`'s command line; `cctk server status` repeated it. The URI, with the database's password, given as --tracking,
    as MLFLOW_TRACKING_URI and in a configuration: no output, file, MLflow field (the module's last test reads
    them all) or command line holds it."""
    direct = lab.database.replace("postgres@", f"postgres:{PG_PASSWORD}@")
    (lab.folder / "mlruns_config" / "direct.toml").write_text(f'tracking_uri = "{direct}"\n')
    shown = lab.database.replace("postgres@", "postgres:***@")
    out, said = lab.folder / "direct", []
    done = lab.cctk("run", "--model", str(tiny_dir), *SMOKE, "--seed", "2", "--tracking", direct, "--out", str(out),
                    MLFLOW_EXPERIMENT_NAME="direct")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    run_id = re.search(r"MLflow run ([0-9a-f]{32})", done.stdout).group(1)
    assert (
        done.stdout.splitlines()[-1]
        == f"MLflow UI: MLFLOW_TRACKING_URI='{shown}' cctk ui {run_id} (*** is the password)"
    )
    said += [done.stdout, done.stderr]
    tags = lab.client().get_run(run_id).data.tags
    assert tags["cctk.tracking_uri"] == shown and (lab.folder / "direct").is_dir()
    # before: a local Ray sweep put the URI in its runtime environment, which Ray writes into
    # <its temporary folder>/session_*/logs/runtime_env_agent.log, a file anyone on the machine may read
    ray_folder = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # short: Ray's socket paths have a limit
    swept = lab.cctk("sweep", "--executor", "ray", "--models", str(tiny_dir), "--seeds", "3", "--profile", "smoke",
                     "--parts", "A", "--no-figures", "--tracking", "direct", "--out", str(lab.folder / "direct-sweep"),
                     MLFLOW_EXPERIMENT_NAME="direct", RAY_TMPDIR=str(ray_folder))  # fmt: skip
    assert swept.returncode == 0, swept.stderr[-3000:]
    said += [swept.stdout, swept.stderr]
    logs = [p for p in ray_folder.rglob("*") if p.is_file()]
    assert any(p.name == "runtime_env_agent.log" for p in logs)
    assert not [p for p in logs if PG_PASSWORD.encode() in p.read_bytes()]
    shutil.rmtree(ray_folder, ignore_errors=True)
    report = lab.cctk("report", run_id, "--tracking", "direct", "--out", str(lab.folder / "direct-report"))
    assert report.returncode == 0, report.stderr[-3000:]
    status = lab.cctk("server", "status", MLFLOW_TRACKING_URI=direct)
    assert f"is no server ({shown})" in _error(status)
    port = free_port()
    ui = subprocess.Popen([str(BIN / "cctk"), "ui", run_id, "--port", str(port)], cwd=lab.folder,
                          env=lab.env(MLFLOW_TRACKING_URI=direct), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)  # fmt: skip
    try:
        lines = []
        while not any("answers" in line for line in lines):
            line = ui.stdout.readline()
            assert line, "".join(lines)[-3000:]
            lines.append(line)
        assert f"starting the MLflow UI on {shown}" in lines[0]
        commands = {pid: Path(f"/proc/{pid}/cmdline").read_bytes() for pid in [ui.pid, *_tree(ui.pid)]}
        assert any(b"mlflow" in c and b"ui" in c for c in commands.values()), commands
        listing = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
        assert PG_PASSWORD not in listing and not [c for c in commands.values() if PG_PASSWORD.encode() in c]
    finally:
        ui.send_signal(signal.SIGTERM)
        out_text, _ = ui.communicate(timeout=60)
    said += [report.stdout, report.stderr, status.stdout, status.stderr, "".join(lines), out_text]
    assert not [text for text in said if PG_PASSWORD in text]
    (lab.folder / "mlruns_config" / "direct.toml").unlink()  # the one file that holds it: the admin's own


def _as(lab: Lab, monkeypatch, who: str | None, password: str | None = None, **extra: str):
    """``cctk ARGS`` in this process (click's runner), in the lab's folder, logged in as ``who``."""
    from click.testing import CliRunner

    from cctk.cli.main import cli

    monkeypatch.chdir(lab.folder)
    login = {"MLFLOW_TRACKING_USERNAME": who, "MLFLOW_TRACKING_PASSWORD": password or PASSWORDS.get(who or "")}
    env = {**login, "HOME": str(lab.folder), **extra}
    return lambda *args: CliRunner().invoke(cli, list(args), env=env)


def test_a_grant_on_an_experiment_another_user_made_is_refused_naming_its_owner(lab, monkeypatch):
    """Before: Bob made the experiment "dave" first; the admin's grant to Dave said EDIT and reused it, Bob kept
    MANAGE and deleted Dave's runs. Now the grant names Bob and is refused, unless --shared says it knowingly."""
    from cctk.store import tracking

    lab.accounts("admin").add("dave", "dave-Secret-4-zq")
    os.environ.update(MLFLOW_TRACKING_USERNAME="bob", MLFLOW_TRACKING_PASSWORD=PASSWORDS["bob"])
    squatted = tracking.Store(tracking.TrackingConfig("lab", lab.url)).experiment("dave")  # Bob's: MANAGE
    cctk = _as(lab, monkeypatch, "admin")
    refused = cctk("server", "users", "grant", "dave", "dave", "EDIT", "--tracking", "lab")
    assert refused.exit_code == 1 and refused.output.count("\n") == 1, refused.output
    assert f"Error: experiment 'dave' on {lab.url} exists and user 'bob' holds MANAGE on it" in refused.output
    assert "cctk server users revoke bob dave" in refused.output and "--shared" in refused.output
    assert [g for a in lab.accounts("admin").list() if a.name == "dave" for g in a.grants] == []
    shared = cctk("server", "users", "grant", "dave", "dave", "EDIT", "--shared", "--tracking", "lab")
    assert shared.exit_code == 0, shared.output
    assert f"'dave' has EDIT on experiment 'dave' (id {squatted})" in shared.output
    assert "also granted there: bob (MANAGE)" in shared.output
    fresh = cctk("server", "users", "grant", "dave", "daves-own", "EDIT", "--tracking", "lab")
    assert fresh.exit_code == 0 and "also granted" not in fresh.output, fresh.output


def test_an_admin_removes_users_revokes_grants_and_sets_passwords(lab, monkeypatch):
    """`cctk server users remove | revoke | password`, as the admin, and a user changing her own password."""

    def answers(who: str, password: str) -> int:
        return requests.get(f"{lab.url}/api/2.0/mlflow/experiments/search", params={"max_results": 1},
                            auth=(who, password), timeout=30).status_code  # fmt: skip

    admin = lab.accounts("admin")
    admin.add("erin", "erin-Secret-5-zq")
    admin.grant("erin", "erin", "EDIT")
    cctk = _as(lab, monkeypatch, "admin", NEW="erin-Secret-6-zq")
    revoked = cctk("server", "users", "revoke", "erin", "erin", "--tracking", "lab")
    assert revoked.exit_code == 0 and "'erin' has no grant on experiment 'erin'" in revoked.output, revoked.output
    assert [a.grants for a in lab.accounts("admin").list() if a.name == "erin"] == [()]
    changed = cctk("server", "users", "password", "erin", "--password-env", "NEW", "--tracking", "lab")
    assert changed.exit_code == 0 and "password of user 'erin'" in changed.output, changed.output
    assert answers("erin", "erin-Secret-5-zq") == 401 and answers("erin", "erin-Secret-6-zq") == 200
    own = _as(lab, monkeypatch, "erin", "erin-Secret-6-zq", NEW="erin-Secret-7-zq")
    done = own("server", "users", "password", "erin", "--password-env", "NEW", "--tracking", "lab")
    assert done.exit_code == 0, done.output  # her current password (her login's) given, as the app asks
    assert answers("erin", "erin-Secret-7-zq") == 200
    removed = cctk("server", "users", "remove", "erin", "--tracking", "lab")
    assert removed.exit_code == 0 and "user 'erin' removed" in removed.output, removed.output
    assert answers("erin", "erin-Secret-7-zq") == 401
    assert "erin" not in [a.name for a in lab.accounts("admin").list()]


def test_a_server_that_cannot_start_says_why_in_one_line_before_it_starts(lab, monkeypatch):
    """Before: the database's password variable unset or wrong made the server retry for minutes (48 lines in
    90 s, never exiting); no admin password on a first start made the tables, then a 35-line traceback."""
    config = (lab.folder / "mlruns_config" / "lab.toml").read_text().replace("lab-artifacts", "never-made")
    (lab.folder / "mlruns_config" / "fresh.toml").write_text(
        config + 'database_uri = "sqlite:///mlruns/fresh-auth.db"\n'  # a new auth database: a first start
    )
    (lab.folder / "mlruns_config" / "again.toml").write_text(config)
    cases = {
        "unset": ("again", {}, "[server] password_env names CCTK_PG_PASSWORD, which is not set"),
        "wrong": ("again", {"CCTK_PG_PASSWORD": "not-it"}, 'password authentication failed for user "postgres"'),
        "no admin": ("fresh", {"CCTK_PG_PASSWORD": PG_PASSWORD}, "admin_password_env: CCTK_ADMIN_PASSWORD is not set"),
    }
    launched = []
    monkeypatch.setattr("cctk.cli.server.launch_process", lambda *a, **k: launched.append(a) or 0)
    for case, (name, extra, expected) in cases.items():
        unset = {"CCTK_PG_PASSWORD": None, "CCTK_ADMIN_PASSWORD": None}
        done = _as(lab, monkeypatch, None, **{**unset, **extra})("server", "--config", name)
        assert done.exit_code == 1 and done.output.count("\n") == 1, (case, done.output)
        assert expected in done.output and f"{lab.folder}/mlruns_config/{name}.toml: [server" in done.output, case
    assert not launched and not (lab.folder / "mlruns" / "never-made").exists()
    assert not (lab.folder / "mlruns/fresh-auth.db").exists()


def test_the_servers_files_are_its_users_alone_and_its_workers_sign_with_one_key(lab):
    """Before: the artifact store was made 0755 with files 0644 (every user of the host read every run's files),
    and Flask's secret key was new at each start."""
    artifacts = lab.folder / "mlruns" / "lab-artifacts"
    modes = {str(p): oct(p.stat().st_mode & 0o777) for p in artifacts.rglob("*") if p.is_file()}
    assert modes and set(modes.values()) == {"0o600"}, modes
    assert all(p.stat().st_mode & 0o777 == 0o700 for p in [artifacts, *artifacts.rglob("*")] if p.is_dir())
    key = (lab.folder / "mlruns" / "lab-secret_key").read_text().strip()
    assert (lab.folder / "mlruns" / "lab-secret_key").stat().st_mode & 0o777 == 0o600
    environs = [Path(f"/proc/{pid}/environ").read_bytes() for pid in _tree(lab.server.pid)]
    keys = {e.split(b"MLFLOW_FLASK_SERVER_SECRET_KEY=")[1].split(b"\0")[0] for e in environs if b"SECRET_KEY=" in e}
    assert keys == {key.encode()}


def test_no_password_in_any_file_or_mlflow_field(lab):
    """Every file the lab's commands wrote (session folders, reports, run_info.json, the artifact store, the
    server's log and its auth configuration), every MLflow field, and the environments of the clients and
    Ray workers: none holds the database's or the admin's password, and no file a researcher's."""
    secrets = [s.encode() for s in SERVER_SECRETS]
    users = [PASSWORDS[u].encode() for u in ("alice", "bob", "carol")]
    files = [p for p in lab.folder.rglob("*") if p.is_file()]
    assert any(p.name == "run_info.json" for p in files) and any(p.name == "report.html" for p in files)
    for path in files:
        data = path.read_bytes()
        assert not [s for s in secrets + users if s in data], path
    for environ in lab.environs:
        assert not [s for s in secrets if s in environ]
    client = lab.client()
    for experiment in client.search_experiments():
        fields_ = [str(experiment.tags)]
        for run in client.search_runs([experiment.experiment_id]):
            fields_ += [str(run.data.params), str(run.data.tags), str(run.info)]
        text = " ".join(fields_)
        assert not [s for s in SERVER_SECRETS + tuple(PASSWORDS.values()) if s in text], experiment.name
