import configparser
import socket
import sqlite3
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from cctk.cli.main import cli
from cctk.core.errors import CctkError
from cctk.store.server import (
    AuthSettings,
    allowed_hosts,
    check_before_start,
    is_loopback,
    launch,
    read_settings,
    this_machine,
    with_password,
)

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
    assert started.env["MLFLOW_REGISTRY_STORE_URI"] == "sqlite:///mlruns/server.db"  # said: MLflow prints nothing of it
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
    assert started.env["MLFLOW_REGISTRY_STORE_URI"] == started.env["MLFLOW_BACKEND_STORE_URI"]
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


# Each bad configuration (the lab's, one thing changed) and the end of its one line; docs/mlflow.md lists them.
BAD = {
    "TOML syntax": (LAB.replace("[server]", "[server"), "not valid TOML: Expected ']' at the end of a table"),
    "no backend store": (
        LAB.replace("backend_store_uri", "# backend_store_uri"),
        "[server] backend_store_uri is missing",
    ),
    "no artifact store": (
        LAB.replace("artifacts_destination", "# artifacts_destination"),
        "[server] artifacts_destination is missing",
    ),
    "port not a number": (LAB.replace("port = 5001", 'port = "abc"'), '[server] port = "abc" is not an integer'),
    "port out of range": (LAB.replace("port = 5001", "port = 70000"), "[server] port = 70000 is out of range"),
    "workers zero": (LAB + "", "[server] workers = 0 is out of range: 1 to 64"),
    "cache not a number": (
        LAB + 'cache_seconds = "x"\n',
        '[server.auth] cache_seconds = "x" is not an integer',
    ),
    "hosts a string": (
        LAB.replace('allowed_hosts = ["mlflow.lab.example"]', 'allowed_hosts = "mlflow.lab.example"'),
        '[server] allowed_hosts = "mlflow.lab.example" is not a list',
    ),
    "origins not strings": (
        LAB.replace("[server.auth]", "cors_allowed_origins = [1]\n[server.auth]"),
        "[server] cors_allowed_origins = [1] is not a list of strings",
    ),
    "unknown key": (LAB.replace("port = 5001", "prot = 5001"), "[server] unknown key 'prot'; known: allowed_hosts"),
    "password in the URI": (
        LAB.replace("cctk@127", "cctk:pw@127"),
        "[server] backend_store_uri holds a password (postgresql+psycopg2://cctk:***@127.0.0.1:5432/cctk)",
    ),
    "password in the query": (
        LAB.replace("5432/cctk", "5432/cctk?password=pw"),
        "backend_store_uri holds a password (postgresql+psycopg2://cctk@127.0.0.1:5432/cctk?password=***)",
    ),
    "auth database password": (
        LAB + 'database_uri = "sqlite:///auth.db?password=pw"\n',
        "[server.auth] database_uri holds a password (sqlite:///auth.db?password=***)",
    ),
    "unknown permission": (LAB + 'default_permission = "ALL"\n', 'default_permission = "ALL"; choose one of:'),
    "auth not a table": (LAB.replace("[server.auth]\n", "auth = 1\n[x]\n"), "[server.auth] is not a table"),
    "no tracking_uri": (LAB.replace('tracking_uri = "http://127.0.0.1:5001"', ""), "tracking_uri is missing"),
    # a secret where it does not belong: refused without being shown (the test checks no S3cret in the line)
    "password with a / in the URI": (
        LAB.replace("cctk@127", "cctk:S3c/ret#PW@127"),
        "[server] backend_store_uri holds a password (postgresql+psycopg2://cctk:***@127.0.0.1:5432/cctk)",
    ),
    "a password as password_env": (
        LAB.replace('password_env = "CCTK_PG_PASSWORD"', 'password_env = "S3cret!PW"'),
        "[server] password_env takes the name of an environment variable (letters, digits and _), and what it",
    ),
    "a password as admin_password_env": (
        LAB.replace('admin_password_env = "CCTK_ADMIN_PASSWORD"', 'admin_password_env = "Adm1nS3cret!x"'),
        "[server.auth] admin_password_env takes the name of an environment variable",
    ),
    "an account in the clients' address": (
        LAB.replace("http://127.0.0.1:5001", "https://admin:S3cretPW@lab.example.org"),
        "tracking_uri https://admin:***@lab.example.org carries an account or a secret: give the server's address",
    ),
    "a URI as a list": (
        LAB.replace(
            'backend_store_uri = "postgresql+psycopg2://cctk@', 'backend_store_uri = ["postgresql://a:S3cret@'
        ).replace('5432/cctk"', '5432/cctk"]'),
        '[server] backend_store_uri = ["postgresql://a:***@127.0.0.1:5432/cctk"] is not a string',
    ),
}
BAD["workers zero"] = (LAB.replace("port = 5001", "port = 5001\nworkers = 0"), BAD["workers zero"][1])


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_configuration_is_one_line_naming_its_file_and_key_before_anything_starts(folder, monkeypatch, case):
    """Before: tracebacks (a TOML syntax error, KeyError, ValueError), or allowed_hosts split into letters."""
    text, line = BAD[case]
    (folder / "mlruns_config" / "bad.toml").write_text(text)
    launched = []
    monkeypatch.setattr("cctk.cli.server.launch_process", lambda *a, **k: launched.append(a) or 0)
    monkeypatch.setenv("CCTK_PG_PASSWORD", "pw")
    command = ["server", "status", "--tracking", "bad"] if case == "no tracking_uri" else ["server", "--config", "bad"]
    done = CliRunner().invoke(cli, command)
    assert done.exit_code == 1 and done.output.count("\n") == 1, done.output
    assert done.output.startswith(f"Error: {folder}/mlruns_config/bad.toml:") and line in done.output, done.output
    assert "S3cret" not in done.output
    assert not launched and not (folder / "mlruns").exists()  # nothing started, nothing made


def test_a_toml_syntax_error_is_one_line_for_every_command_that_reads_the_configuration(folder):
    """Before: a 45-line traceback from `cctk server status` and `cctk compare --tracking`, as from the server."""
    (folder / "mlruns_config" / "bad.toml").write_text(BAD["TOML syntax"][0])
    for command in (
        ["server", "status", "--tracking", "bad"],
        ["compare", "--runs", "a,b", "--tracking", "bad", "--out", str(folder / "cmp"), "--no-log"],
    ):
        done = CliRunner().invoke(cli, command)
        assert done.exit_code == 1 and done.output.count("\n") == 1, (command, done.output)
        assert done.output.startswith(f"Error: {folder}/mlruns_config/bad.toml: not valid TOML: "), done.output


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


def test_a_folder_holding_mlflows_own_default_store_says_how_to_read_it(tmp_path, monkeypatch):
    """`mlflow run .` without MLFLOW_TRACKING_URI logs to MLflow 3's default, ./mlflow.db, not cctk's ./mlruns/
    mlflow.db: `cctk ui` there said only that no store was found; now it names the one that is."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / "mlflow.db").write_bytes(b"")
    done = CliRunner().invoke(cli, ["ui"])
    assert done.exit_code == 1 and done.output == (
        f"Error: there is no MLflow store at {tmp_path}/mlruns/mlflow.db (./mlflow.db here is MLflow's own default "
        "store, which `mlflow run` logs to without MLFLOW_TRACKING_URI: --tracking sqlite:///mlflow.db reads it): "
        "`cctk ui` opens a store runs were written to and creates none; run it in the folder that holds mlruns/, "
        "or give --tracking NAME|URI\n"
    )
    done = CliRunner().invoke(cli, ["ui", "--tracking", "server"])  # a store named: no word of ./mlflow.db
    assert "./mlflow.db" not in done.output


def test_ui_on_cctks_store_beside_mlflows_own_says_the_other_is_there(tmp_path, monkeypatch, new_store):
    """A folder where `cctk run` and `mlflow run .` both ran holds two stores: `cctk ui` opens cctk's, where the
    runs of `mlflow run` are not; it says which store holds them."""
    import cctk.cli.server as server

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    new_store(tmp_path / "mlruns")  # cctk's ./mlruns/mlflow.db
    monkeypatch.setattr(server, "launch_process", lambda *args: 0)
    assert "mlflow.db here" not in CliRunner().invoke(cli, ["ui"]).output
    (tmp_path / "mlflow.db").write_bytes(b"")
    done = CliRunner().invoke(cli, ["ui"])
    assert done.exit_code == 0 and done.output.splitlines()[1] == (
        "(./mlflow.db here is MLflow's own default store, which `mlflow run` logs to without MLFLOW_TRACKING_URI: "
        "--tracking sqlite:///mlflow.db reads it)"
    )


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
    assert env == {
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        "MLFLOW_BACKEND_STORE_URI": tracking_uri,
        "MLFLOW_REGISTRY_STORE_URI": tracking_uri,  # else MLflow prints `Registry store URI not provided`
        "PYTHONWARNINGS": "ignore:starlette.middleware.wsgi is deprecated",
    }
    assert "--backend-store-uri" not in command  # the store's URI is in its environment: ps shows command lines


def test_a_servers_environment_keeps_starlettes_deprecation_out_and_the_users_filters(monkeypatch):
    """`cctk ui` and `cctk server` printed Starlette's `starlette.middleware.wsgi is deprecated` (MLflow's import)
    at every start: the filter their environment adds silences it in a real interpreter, after the user's own."""
    import os
    import subprocess
    import sys

    from cctk.store.server import quiet_server

    monkeypatch.setenv("PYTHONWARNINGS", "error::ResourceWarning")
    assert quiet_server() == {"PYTHONWARNINGS": "error::ResourceWarning,ignore:starlette.middleware.wsgi is deprecated"}
    code = "import starlette.middleware.wsgi"  # a UserWarning: shown by default
    for env, said in ((quiet_server(), False), ({"PYTHONWARNINGS": "error::ResourceWarning"}, True)):
        done = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True)
        assert ("starlette.middleware.wsgi is deprecated" in done.stderr) is said, done.stderr


def test_ui_on_a_database_whose_uri_holds_a_password_shows_it_nowhere(monkeypatch):
    """Before: `MLFLOW_TRACKING_URI=postgresql://u:SECRET@... cctk ui` put the password on mlflow ui's command line
    (visible in ps) and printed it; `cctk server status` repeated it."""
    import cctk.cli.server as server

    uri = "postgresql+psycopg2://cctk:S3cret-pw@127.0.0.1:9/cctk"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setattr(server, "_link", lambda *a: "http://127.0.0.1:5000/#/experiments")
    monkeypatch.setattr("cctk.store.tracking.missing_store", lambda config: None)  # no database on port 9
    launched = []
    monkeypatch.setattr(server, "launch_process", lambda command, env, *rest, **k: launched.append((command, env)) or 0)
    done = CliRunner().invoke(cli, ["ui"])
    assert done.exit_code == 0, done.output
    ((command, env),) = launched
    assert env["MLFLOW_BACKEND_STORE_URI"] == uri and "S3cret" not in " ".join(command) + done.output
    assert "starting the MLflow UI on postgresql+psycopg2://cctk:***@127.0.0.1:9/cctk" in done.output
    status = CliRunner().invoke(cli, ["server", "status"])
    assert status.exit_code == 1 and "S3cret" not in status.output and "cctk:***@127.0.0.1:9" in status.output


def test_off_loopback_with_auth_the_admin_hears_of_clear_text_and_clients_get_the_configured_address(folder):
    lab = launch(read_settings("lab"), host="0.0.0.0")
    assert lab.url == "http://127.0.0.1:5001"  # where this machine asks whether it answers
    assert lab.clients == f"http://{this_machine()}:5001"  # the configuration names loopback: this machine's name
    assert this_machine() in (socket.getfqdn(), socket.gethostname())
    (note,) = lab.notes
    assert note.startswith(f"WARNING: http://{this_machine()}:5001 is plain HTTP: basic-auth sends every user")
    assert "reverse proxy that terminates TLS" in note
    (folder / "mlruns_config" / "lab.toml").write_text(LAB.replace("http://127.0.0.1:5001", "http://mlflow.lab:5001"))
    named = launch(read_settings("lab"), host="10.1.2.3")
    assert named.clients == "http://mlflow.lab:5001" and named.notes[0].startswith("WARNING: http://mlflow.lab:5001")
    (folder / "mlruns_config" / "lab.toml").write_text(LAB.replace("http://127.0.0.1:5001", "https://mlflow.lab"))
    assert launch(read_settings("lab"), host="0.0.0.0").notes == ()  # behind a proxy that speaks TLS
    assert launch(read_settings("lab")).notes == () and launch(read_settings("solo"), no_auth=True).notes == ()


def test_the_server_keeps_its_files_to_its_user_and_signs_with_one_key_across_starts(folder, monkeypatch):
    """Before: the artifact store was made 0755 (files 0644), the auth configuration 0644, and Flask's secret key
    was new at each start."""
    monkeypatch.delenv("MLFLOW_FLASK_SERVER_SECRET_KEY", raising=False)
    first = launch(read_settings("lab"))
    assert (folder / "mlruns/lab-artifacts").stat().st_mode & 0o777 == 0o700
    assert (folder / "mlruns/lab-metrics").stat().st_mode & 0o777 == 0o700
    assert first.umask == 0o077  # what the server writes there (artifacts, a SQLite store) is 0600
    for name in ("lab-basic_auth.ini", "lab-secret_key"):
        assert (folder / "mlruns" / name).stat().st_mode & 0o777 == 0o600, name
    key = first.env["MLFLOW_FLASK_SERVER_SECRET_KEY"]
    assert len(key) == 64 and launch(read_settings("lab")).env["MLFLOW_FLASK_SERVER_SECRET_KEY"] == key
    monkeypatch.setenv("MLFLOW_FLASK_SERVER_SECRET_KEY", "the-admins-own")
    assert launch(read_settings("lab")).env["MLFLOW_FLASK_SERVER_SECRET_KEY"] == "the-admins-own"


def test_the_launched_server_writes_its_files_under_its_umask(tmp_path):
    """``launch_process`` gives the child the umask asked for: a file it makes is its user's alone."""
    from cctk.cli.server import launch_process

    made = tmp_path / "made"
    assert launch_process([sys.executable, "-c", f"open({str(made)!r}, 'w')"], {}, umask=0o077) == 0
    assert made.stat().st_mode & 0o777 == 0o600


def test_what_the_server_would_find_only_once_started_is_one_line_before(folder, monkeypatch):
    """Before: an unset database password variable, a database that refuses the connection (the server retried
    for minutes, 48 lines in 90 s), and no admin password on a first start (tables made, then a traceback)."""
    settings = read_settings("lab")
    monkeypatch.delenv("CCTK_PG_PASSWORD", raising=False)
    with pytest.raises(CctkError, match=r"lab.toml: \[server\] password_env names CCTK_PG_PASSWORD, which is not set"):
        check_before_start(settings, settings.auth)
    monkeypatch.setenv("CCTK_PG_PASSWORD", "not-the-one")
    with pytest.raises(CctkError) as refused:  # nothing listens on 127.0.0.1:9
        check_before_start(replace(settings, backend_store_uri="postgresql+psycopg2://cctk@127.0.0.1:9/x"), None)
    line = str(refused.value)
    assert line.startswith(
        f"{folder}/mlruns_config/lab.toml: [server] backend_store_uri postgresql+psycopg2://cctk:***@"
    )
    assert "Connection refused" in line and "(with the password in CCTK_PG_PASSWORD)" in line and "not-the" not in line
    solo = read_settings("solo")
    auth = AuthSettings(f"sqlite:///{folder}/auth.db", admin_password_env="CCTK_ADMIN_PASSWORD")
    monkeypatch.delenv("CCTK_ADMIN_PASSWORD", raising=False)
    with pytest.raises(CctkError, match=r"solo.toml: \[server.auth\] admin_password_env: CCTK_ADMIN_PASSWORD is not "):
        check_before_start(solo, auth)
    monkeypatch.setenv("CCTK_ADMIN_PASSWORD", "short")
    with pytest.raises(CctkError, match="Password must be at least 12 characters; the first start makes the admin"):
        check_before_start(solo, auth)
    assert not (folder / "auth.db").exists()  # looked for, not made
    monkeypatch.setenv("CCTK_ADMIN_PASSWORD", "long-enough-admin-pw")
    check_before_start(solo, auth)
    monkeypatch.delenv("CCTK_ADMIN_PASSWORD")  # a later start: the admin exists, her first password is not asked
    with sqlite3.connect(folder / "auth.db") as made:
        made.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, username TEXT, password_hash TEXT)")
        made.execute("INSERT INTO users (username) VALUES ('admin')")
    check_before_start(solo, auth)


@pytest.mark.parametrize("command", [["ui"], ["server"]])
@pytest.mark.parametrize("port", ["99999", "0", "-1"])
def test_a_port_out_of_range_is_refused_before_anything_starts(tmp_path, monkeypatch, command, port):
    """uvicorn failed on such a port with a traceback and exit 0, `cctk server` after creating its database."""
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(cli, [*command, "--port", port])
    assert done.exit_code == 2 and "is not in the range 1<=x<=65535" in done.output, done.output
    assert not list(tmp_path.iterdir())


def test_a_secret_typed_where_its_variable_belongs_is_refused_unshown(tmp_path, monkeypatch):
    """`--password-env 'S3c ret!'` said `--password-env S3c ret!: the variable is not set`."""
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(cli, ["server", "users", "add", "carol", "--password-env", "S3c ret!", "--tracking",
                                    "http://127.0.0.1:9"])  # fmt: skip
    assert done.exit_code == 1 and "S3c" not in done.output, done.output
    assert done.output.startswith("Error: --password-env takes the name of an environment variable")


def test_a_refused_account_change_shows_the_databases_words_without_its_sql():
    """A second `users add carol` on a SQLite auth database printed SQLAlchemy's parameters: the new password's
    salted scrypt hash, enough to test guesses offline."""
    from cctk.store.tracking.admin import _message

    class Refused(Exception):
        message = (
            "(sqlite3.IntegrityError) UNIQUE constraint failed: users.username\n[SQL: INSERT INTO users (username, "
            "password_hash, is_admin) VALUES (?, ?, ?)]\n[parameters: ('carol', 'scrypt:32768:8:1$RVm96DcZ$6327')]"
        )

    assert _message(Refused()) == "(sqlite3.IntegrityError) UNIQUE constraint failed: users.username"
