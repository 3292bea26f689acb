import configparser
from pathlib import Path

import pytest
from click.testing import CliRunner

from cctk.cli.main import cli
from cctk.core.errors import CctkError
from cctk.store.server import allowed_hosts, is_loopback, launch, read_settings, with_password

LAB = """tracking_uri = "http://127.0.0.1:5001"
[server]
port = 5001
backend_store_uri = "postgresql+psycopg2://cctk@127.0.0.1:5432/cctk"
password_env = "CCTK_PG_PASSWORD"
artifacts_destination = "mlruns/lab-artifacts"
metrics = "mlruns/lab-metrics"
allowed_hosts = ["mlflow.lab.example"]
[server.auth]
admin_password_env = "CCTK_ADMIN_PASSWORD"
"""


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A working folder with its own configurations: ``lab`` (PostgreSQL, auth) and ``solo`` (SQLite, none)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / "mlruns_config").mkdir()
    (tmp_path / "mlruns_config" / "lab.toml").write_text(LAB)
    (tmp_path / "mlruns_config" / "solo.toml").write_text(
        'tracking_uri = "http://127.0.0.1:5000"\n[server]\nport = 5000\n'
        'backend_store_uri = "sqlite:///mlruns/server.db"\nartifacts_destination = "mlruns/a"\n'
    )
    return tmp_path


def test_a_server_binds_loopback_with_proxied_artifacts(folder):
    started = launch(read_settings("solo"))
    command = started.command
    assert command[command.index("--host") + 1] == "127.0.0.1" and "--serve-artifacts" in command
    assert (
        "--backend-store-uri" not in command and started.env["MLFLOW_BACKEND_STORE_URI"] == "sqlite:///mlruns/server.db"
    )
    assert "--app-name" not in command and "--allowed-hosts" not in command  # loopback: MLflow's defaults
    assert started.env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    assert (folder / "mlruns").is_dir() and started.url == "http://127.0.0.1:5000"


def test_the_passwords_reach_the_server_through_its_environment_only(folder, monkeypatch):
    """Before: the backend URI with its password was an argument of `mlflow server` (`ps` showed it)."""
    monkeypatch.setenv("CCTK_PG_PASSWORD", "s3cr/et")
    monkeypatch.setenv("CCTK_ADMIN_PASSWORD", "admin-pass-123456")
    started = launch(read_settings("lab"))
    assert not [part for part in started.command if "s3cr" in part or "admin-pass" in part]
    assert started.env["MLFLOW_BACKEND_STORE_URI"] == "postgresql+psycopg2://cctk:s3cr%2Fet@127.0.0.1:5432/cctk"
    assert started.env["PGPASSWORD"] == "s3cr/et"  # the auth database's, which libpq reads
    assert started.env["MLFLOW_AUTH_ADMIN_PASSWORD"] == "admin-pass-123456"
    assert started.command[-2:] == ["--app-name", "basic-auth"]
    assert started.command[started.command.index("--expose-prometheus") + 1] == str(folder / "mlruns/lab-metrics")
    ini = started.env["MLFLOW_AUTH_CONFIG_PATH"]
    written = Path(ini).read_text()
    assert "s3cr" not in written and "admin-pass" not in written
    parsed = configparser.ConfigParser()
    parsed.read(ini)
    assert dict(parsed["mlflow"]) == {
        "default_permission": "READ",
        "database_uri": "postgresql+psycopg2://cctk@127.0.0.1:5432/cctk",  # the backend's database, no password
        "admin_username": "admin",
        "authorization_function": "mlflow.server.auth:authenticate_request_basic_auth",
        "auth_cache_ttl_seconds": "0",  # MLflow's default: no cache_seconds in the table
    }


def test_off_loopback_a_server_needs_authentication_or_no_auth_said(folder):
    with pytest.raises(CctkError, match=r"--host 0.0.0.0 opens the server beyond this machine, and 'solo' has no"):
        launch(read_settings("solo"), host="0.0.0.0")
    opened = launch(read_settings("solo"), host="0.0.0.0", no_auth=True)
    hosts = opened.command[opened.command.index("--allowed-hosts") + 1].split(",")
    assert "127.0.0.1:*" in hosts and "localhost" in hosts and "0.0.0.0" not in hosts
    lab = launch(read_settings("lab"), host="10.1.2.3")
    hosts = lab.command[lab.command.index("--allowed-hosts") + 1].split(",")
    assert hosts[:4] == ["mlflow.lab.example", "mlflow.lab.example:*", "10.1.2.3", "10.1.2.3:*"]
    assert allowed_hosts((), "127.0.0.1") == [] and allowed_hosts(("a",), "::1")[:2] == ["a", "a:*"]
    assert is_loopback("localhost") and is_loopback("::1") and not is_loopback("mlflow.lab.example")


def test_a_bad_server_table_is_one_line(folder):
    (folder / "mlruns_config" / "bad.toml").write_text(
        'tracking_uri = "http://x"\n[server]\nbackend_store_uri = "sqlite:///a.db"\nartifacts_destination = "a"\n'
        "prot = 1\n"
    )
    with pytest.raises(CctkError, match=r"\[server\] of 'bad': unknown key 'prot'; known: "):
        read_settings("bad")
    (folder / "mlruns_config" / "bad.toml").write_text(
        'tracking_uri = "http://x"\n[server]\nbackend_store_uri = "postgresql://u:pw@h/d"\n'
        'artifacts_destination = "a"\n'
    )
    with pytest.raises(CctkError, match="backend_store_uri holds a password; name it in password_env"):
        read_settings("bad")
    (folder / "mlruns_config" / "bad.toml").write_text(
        LAB.replace("[server.auth]", '[server.auth]\ndefault_permission = "ALL"')
    )
    with pytest.raises(CctkError, match="default_permission 'ALL'; choose one of: NO_PERMISSIONS, READ, EDIT, MANAGE"):
        read_settings("bad")
    with pytest.raises(CctkError, match="has no \\[server\\] table"):
        read_settings("embedded")


def test_with_password_keeps_uri_without_env(monkeypatch):
    monkeypatch.delenv("CCTK_PG_PASSWORD", raising=False)
    assert with_password("postgresql://u@h:1/d", "CCTK_PG_PASSWORD") == "postgresql://u@h:1/d"


def test_ui_in_a_folder_without_a_store_says_so_and_creates_none(tmp_path, monkeypatch):
    """Before: `cctk ui` from another folder silently created an empty store and served it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    done = CliRunner().invoke(cli, ["ui"])
    assert done.exit_code == 1
    assert done.output.startswith(f"Error: there is no MLflow store at {tmp_path}/mlruns/mlflow.db: `cctk ui` opens")
    assert "give --tracking NAME|URI" in done.output and not (tmp_path / "mlruns").exists()


def test_ui_links_to_a_run_in_the_model_training_view(tracking_uri, monkeypatch):
    from cctk.cli.server import _link
    from cctk.store import tracking

    store = tracking.connect()
    run = store.start(store.experiment(), "a run")
    config = tracking.resolve(None)
    link = _link(config, run.run_id, "http://127.0.0.1:5000")
    experiment = store.experiment()
    assert link == f"http://127.0.0.1:5000/#/experiments/{experiment}/runs/{run.run_id}?workflowType=machine_learning"
    assert _link(config, None, "http://h").endswith(f"/#/experiments/{experiment}/runs?workflowType=machine_learning")
    with pytest.raises(tracking.NoRun, match="no run 'deadbeef'"):
        _link(config, "deadbeef", "http://h")


def test_ui_starts_one_worker_and_no_job_runner(tracking_uri, monkeypatch):
    """`cctk ui` is read by one person: MLflow's UI with one worker (its default is four) and no server jobs
    (two task consumers and a scheduler); what it would launch, caught before it starts."""
    import cctk.cli.server as server

    launched = []
    monkeypatch.setattr(server, "launch_process", lambda command, env, *rest: launched.append((command, env)) or 0)
    done = CliRunner().invoke(cli, ["ui", "--port", "5077"])
    assert done.exit_code == 0, done.output
    ((command, env),) = launched
    assert command[command.index("--workers") + 1] == "1" and command[command.index("--port") + 1] == "5077"
    assert env == {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
