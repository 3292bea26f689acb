"""The ``[server]`` table of a tracking configuration: what ``cctk server`` starts, and how.

``mlflow server`` does the serving: its basic-auth app (users, per-experiment permissions, an admin), its
security middleware (``--allowed-hosts``, ``--cors-allowed-origins``) and its Prometheus exporter
(``--expose-prometheus``). This module turns the table into that command and its environment, every value
checked first and what the server would find only once started checked before it starts (``check_before_start``):
each fault one line naming the file and the key. Off loopback, a server needs authentication or ``--no-auth``.

Secrets reach the server through its environment only, never its command line (which ``ps`` shows every
user of the host), a file or a log: the backend store's URI with its password as
``MLFLOW_BACKEND_STORE_URI`` (``mlflow server`` reads it as ``--backend-store-uri``), the auth database's
password on PostgreSQL as ``PGPASSWORD`` (libpq reads it), the admin's first password as
``MLFLOW_AUTH_ADMIN_PASSWORD``. The auth app's configuration file (``basic_auth.ini``) holds no secret; it
and Flask's key (one for every worker and restart) are 0600, and what the server writes is its user's alone.
"""

from __future__ import annotations

import configparser
import io
import ipaddress
import os
import secrets
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from ..core.errors import CctkError
from ..core.redaction import variable_name
from .tracking import (
    config_file,
    config_names_list,
    config_value,
    database_error,
    database_problem,
    has_password,
    password_problem,
    read_config,
    redact,
    sqlite_path,
)

LOOPBACK = "127.0.0.1"
# MLflow's basic-auth levels a user may hold on an experiment, weakest first (DENY and USE left out: cctk's
# lab needs readers, writers and owners).
PERMISSIONS = ("NO_PERMISSIONS", "READ", "EDIT", "MANAGE")
SERVER_KEYS = {
    "host",
    "port",
    "backend_store_uri",
    "password_env",
    "artifacts_destination",
    "allowed_hosts",
    "cors_allowed_origins",
    "metrics",
    "workers",
    "auth",
}
AUTH_KEYS = {"database_uri", "admin", "admin_password_env", "default_permission", "cache_seconds"}


@dataclass(frozen=True)
class AuthSettings:
    """``[server.auth]``: MLflow's basic-auth app. Its users and permissions live in ``database_uri`` (by
    default the backend store's own database: its tables are apart from the runs'), the admin is created
    on the first start with the password in ``admin_password_env``, and a user with no grant on an
    experiment holds ``default_permission`` there (READ: the lab reads everything, writes what it owns).
    ``cache_seconds``: how long a worker trusts a checked password (MLflow's ``auth_cache_ttl_seconds``; 0,
    MLflow's default, checks the slow hash on every request: docs/mlflow.md has the load check's figures)."""

    database_uri: str
    admin: str = "admin"
    admin_password_env: str = "CCTK_ADMIN_PASSWORD"
    default_permission: str = "READ"
    cache_seconds: int = 0


@dataclass(frozen=True)
class ServerSettings:
    """``[server]`` of configuration ``config``: where the server listens and keeps its runs."""

    config: str
    host: str
    port: int
    backend_store_uri: str  # as written: no password in it (``password_env`` names where that is)
    artifacts_destination: Path
    password_env: str | None = None
    auth: AuthSettings | None = None
    allowed_hosts: tuple[str, ...] = ()  # the names clients reach it by, off loopback
    cors_allowed_origins: tuple[str, ...] = ()
    metrics: Path | None = None  # Prometheus' folder: /metrics served (to the admin, under auth)
    workers: int = 1
    tracking_uri: str | None = None  # the configuration's: the address its clients use
    file: str = ""  # the configuration's file, for the lines that name a key of it


@dataclass(frozen=True)
class Launch:
    """``mlflow server`` as it is started: its command line (no secret in it), what its environment adds
    (the secrets among it) and the address it answers on."""

    command: list[str]
    env: dict[str, str]
    url: str  # where this machine reaches it (loopback where it is bound to every address)
    settings: ServerSettings
    clients: str = ""  # where clients reach it (the configuration's tracking_uri, or this machine's name)
    notes: tuple[str, ...] = ()  # what the admin must read before it opens (plain HTTP off loopback)
    umask: int = 0o077  # every file the server writes (artifacts, metrics, a SQLite store) is its user's alone


def read_settings(config_name: str) -> ServerSettings:
    """The ``[server]`` table of a configuration, checked before anything starts: a missing key, a value of
    the wrong kind, an unknown key or a password in a URI is one line naming the key and the file."""
    raw = read_config(config_name)
    table = raw.get("server")
    if table is None:
        raise CctkError(
            f"tracking configuration {config_name!r} has no [server] table; use `cctk ui` for the embedded store"
        )
    where = f"{config_file(config_name)}: [server]"
    _known(table, SERVER_KEYS, where)
    metrics = config_value(table, "metrics", str, where, "")
    clients = raw.get("tracking_uri")
    if isinstance(clients, str) and has_password(clients):  # printed to every client as the address to use
        raise CctkError(
            f"{config_file(config_name)}: tracking_uri {redact(clients)} carries an account or a secret: give the "
            "server's address alone; clients give theirs in MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD"
        )
    return ServerSettings(
        config=config_name,
        host=config_value(table, "host", str, where, LOOPBACK),
        port=_bounded(table, "port", where, 5000, 1, 65535),
        backend_store_uri=_database(table, "backend_store_uri", where, None),
        artifacts_destination=Path(config_value(table, "artifacts_destination", str, where)).resolve(),
        password_env=_variable(table, "password_env", where, ""),
        auth=_auth(table, where),
        allowed_hosts=config_names_list(table, "allowed_hosts", where),
        cors_allowed_origins=config_names_list(table, "cors_allowed_origins", where),
        metrics=Path(metrics).resolve() if metrics else None,
        workers=_bounded(table, "workers", where, 1, 1, 64),
        tracking_uri=clients if isinstance(clients, str) else None,
        file=str(config_file(config_name)),
    )


def _known(table: Any, keys: set[str], where: str) -> None:
    """``table`` is a TOML table of ``keys`` only."""
    if not isinstance(table, dict):
        raise CctkError(f"{where} is not a table")
    unknown = sorted(set(table) - keys)
    if unknown:
        raise CctkError(f"{where} unknown key {unknown[0]!r}; known: {', '.join(sorted(keys))}")


def _bounded(table: dict[str, Any], key: str, where: str, default: int, least: int, most: int) -> int:
    """An integer key of the table, between ``least`` and ``most``."""
    value = config_value(table, key, int, where, default)
    if not least <= value <= most:
        raise CctkError(f"{where} {key} = {value} is out of range: {least} to {most}")
    return value


def _variable(table: dict[str, Any], key: str, where: str, default: str) -> str | None:
    """The name of the environment variable that holds a secret (None: left empty), checked to be a name."""
    name = config_value(table, key, str, where, default)
    return variable_name(name, f"{where} {key}") if name else None


def _database(table: dict[str, Any], key: str, where: str, default: str | None) -> str:
    """A database's URI: no password in it (the environment holds that: [server] password_env)."""
    uri = config_value(table, key, str, where, default)
    if has_password(uri):
        raise CctkError(
            f"{where} {key} holds a password ({redact(uri)}): leave it out and name the variable that holds it "
            "in [server] password_env"
        )
    return uri


def _auth(server: dict[str, Any], where_server: str) -> AuthSettings | None:
    table = server.get("auth")
    if table is None:
        return None
    where = f"{where_server.removesuffix('[server]')}[server.auth]"
    _known(table, AUTH_KEYS, where)
    default = config_value(table, "default_permission", str, where, "READ")
    if default not in PERMISSIONS:
        raise CctkError(f'{where} default_permission = "{default}"; choose one of: {", ".join(PERMISSIONS)}')
    database = _database(table, "database_uri", where, server["backend_store_uri"])
    if server.get("password_env") and not database.startswith(("postgresql", "sqlite")):
        raise CctkError(
            f"{where} database_uri: the auth database gets its password through PGPASSWORD: keep it on "
            "PostgreSQL or SQLite"
        )
    return AuthSettings(
        database_uri=database,
        admin=config_value(table, "admin", str, where, "admin"),
        admin_password_env=_variable(table, "admin_password_env", where, "CCTK_ADMIN_PASSWORD") or "",
        default_permission=default,
        cache_seconds=_bounded(table, "cache_seconds", where, 0, 0, 86400),
    )


def launch(settings: ServerSettings, host: str | None = None, port: int | None = None, no_auth: bool = False) -> Launch:
    """The server of ``settings`` (``host``/``port`` overriding its own): its command line and environment.
    Off loopback it needs authentication, or ``no_auth`` said out loud."""
    host, port = host or settings.host, port or settings.port
    auth = None if no_auth else settings.auth
    if not is_loopback(host) and auth is None and not no_auth:
        raise CctkError(
            f"cctk server --host {host} opens the server beyond this machine, and {settings.config!r} has no "
            "[server.auth]: anyone who reaches the port could read, write and delete every run. Turn "
            "authentication on there, or pass --no-auth to open it without"
        )
    backend = with_password(settings.backend_store_uri, settings.password_env)
    _ensure_sqlite_folder(backend)
    private_folder(settings.artifacts_destination)  # the runs' files: the server's user's alone
    command = [sys.executable, "-m", "mlflow", "server", "--host", host, "--port", str(port)]
    command += ["--serve-artifacts", "--artifacts-destination", settings.artifacts_destination.as_uri()]
    command += ["--workers", str(settings.workers)]
    env = {
        **store_environment(backend),
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",  # GenAI jobs: seven worker processes cctk never uses
        **quiet_server(),
    }
    command += _middleware(settings, host)
    if settings.metrics is not None:
        private_folder(settings.metrics)
        command += ["--expose-prometheus", str(settings.metrics)]
    if auth is not None:
        command += ["--app-name", "basic-auth"]
        env.update(_auth_environment(settings, auth))
    clients = clients_address(settings, host, port)
    here = LOOPBACK if host in ("0.0.0.0", "::") else host  # where a client on this machine reaches it
    return Launch(command, env, f"http://{here}:{port}", settings, clients, _notes(host, auth, clients))


def check_before_start(settings: ServerSettings, auth: AuthSettings | None) -> None:
    """What ``mlflow server`` finds out only after it has started, said in one line before it does: the
    database's password variable unset, a database that refuses the connection (MLflow would retry for
    minutes, a traceback every few seconds), and on the first start (no admin yet) no admin password."""
    where = f"{settings.file}: [server]"
    variable = settings.password_env
    if variable and not os.environ.get(variable):
        raise CctkError(
            f"{where} password_env names {variable}, which is not set: the server reads the database's password "
            f"there (read -s {variable} && export {variable})"
        )
    backend = with_password(settings.backend_store_uri, variable)
    if sqlite_path(backend) is None:
        problem = database_problem(backend)
        if problem:
            held = f"the password in {variable}" if variable else "no password (password_env names none)"
            raise CctkError(f"{where} backend_store_uri {redact(backend)}: {problem} (with {held})")
    if auth is not None:
        _check_admin(settings, auth)


def _check_admin(settings: ServerSettings, auth: AuthSettings) -> None:
    """On a first start (the auth database has no admin yet), the admin's password is set and one MLflow takes."""
    variable, where = auth.admin_password_env, f"{settings.file}: [server.auth]"
    password = os.environ.get(variable, "")
    problem = password_problem(password) if password else f"{variable} is not set"  # MLflow's words end in "."
    if problem is None or _admin_exists(settings, auth, where):
        return
    raise CctkError(
        f"{where} admin_password_env: {problem.rstrip('.')}; the first start makes the admin {auth.admin!r} with "
        f"that password (MLflow ships none): read -s {variable} && export {variable}"
    )


def _admin_exists(settings: ServerSettings, auth: AuthSettings, where: str) -> bool:
    """Whether the auth database already holds the admin (its ``users`` table, as MLflow's auth app makes it);
    a database not made yet holds none, and is not made here."""
    import sqlalchemy

    database = _absolute_sqlite(auth.database_uri)
    path = sqlite_path(database)
    if path is not None and not path.is_file():
        return False
    uri = with_password(database, settings.password_env) if database.startswith("postgresql") else database
    timeout = {"connect_timeout": 10} if uri.startswith(("postgresql", "mysql")) else {}  # as database_problem
    engine = sqlalchemy.create_engine(uri, connect_args=timeout, poolclass=sqlalchemy.pool.NullPool)
    try:
        with engine.connect() as connection:
            if not sqlalchemy.inspect(connection).has_table("users"):
                return False
            query = sqlalchemy.text("SELECT 1 FROM users WHERE username = :name")
            return connection.execute(query, {"name": auth.admin}).first() is not None
    except sqlalchemy.exc.SQLAlchemyError as error:
        raise CctkError(f"{where} database_uri {redact(database)}: {database_error(error)}") from None
    finally:
        engine.dispose()


def _middleware(settings: ServerSettings, host: str) -> list[str]:
    """MLflow's security middleware: the host names it answers (DNS rebinding) and the origins it lets in."""
    options = []
    hosts = allowed_hosts(settings.allowed_hosts, host)
    if hosts:
        options += ["--allowed-hosts", ",".join(hosts)]
    if settings.cors_allowed_origins:
        options += ["--cors-allowed-origins", ",".join(settings.cors_allowed_origins)]
    return options


def clients_address(settings: ServerSettings, host: str, port: int) -> str:
    """Where clients reach the server: the configuration's ``tracking_uri`` where it names another machine than
    this one's loopback (a name behind a proxy, an https:// address), else this machine's name on the port
    (bound to every address) or the address it is bound to."""
    named = settings.tracking_uri or ""
    if named.startswith(("http://", "https://")) and not is_loopback(urlsplit(named).hostname or LOOPBACK):
        return named.rstrip("/")
    if host in ("0.0.0.0", "::"):
        return f"http://{this_machine()}:{port}"
    return f"http://{host if ':' not in host else f'[{host}]'}:{port}"


def this_machine() -> str:
    """This machine's name as other machines may know it: its fully qualified name, unless that is loopback's
    (``localhost``, as hosts files often make it), then its host name."""
    for name in (socket.getfqdn(), socket.gethostname()):
        if name and not is_loopback(name) and not name.startswith("localhost"):
            return name
    return socket.gethostname()


def _notes(host: str, auth: AuthSettings | None, clients: str) -> tuple[str, ...]:
    """What an admin must hear before a server opens off loopback with basic-auth over plain HTTP."""
    if is_loopback(host) or auth is None or clients.startswith("https://"):
        return ()
    clear = (
        f"WARNING: {clients} is plain HTTP: basic-auth sends every user's password with every request, in clear "
        "to anyone on the network path. Put the server behind a reverse proxy that terminates TLS (HTTPS) and "
        "set tracking_uri to its https:// address (docs/mlflow.md, step 8)"
    )
    return (clear,)


def private_folder(path: Path) -> None:
    """``path`` made, where missing, for this user alone (0700): what the server keeps there (runs' files,
    Prometheus' counters) is no other user's to read; one that exists is left as its owner set it."""
    if not path.is_dir():
        path.mkdir(parents=True, mode=0o700)
        path.chmod(0o700)  # mkdir's mode passes through the umask


def write_private(path: Path, text: str) -> None:
    """``text`` into ``path``, readable and writable by this user alone (0600), however the file was before."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        os.fchmod(fd, 0o600)
        file.write(text)


def _auth_environment(settings: ServerSettings, auth: AuthSettings) -> dict[str, str]:
    """The basic-auth app's configuration file (no secret in it) and the secrets it needs, as environment."""
    _ensure_sqlite_folder(auth.database_uri)
    database = _absolute_sqlite(auth.database_uri)
    ini = settings.artifacts_destination.parent / f"{settings.config}-basic_auth.ini"
    parser = configparser.ConfigParser()
    parser["mlflow"] = {
        "default_permission": auth.default_permission,
        "database_uri": database,
        "admin_username": auth.admin,
        "authorization_function": "mlflow.server.auth:authenticate_request_basic_auth",
        "auth_cache_ttl_seconds": str(auth.cache_seconds),
    }
    text = io.StringIO()
    parser.write(text)
    write_private(ini, "# Written by cctk server from the [server.auth] table; it holds no secret.\n" + text.getvalue())
    env = {"MLFLOW_AUTH_CONFIG_PATH": str(ini), "MLFLOW_FLASK_SERVER_SECRET_KEY": secret_key(settings)}
    if os.environ.get(auth.admin_password_env):  # read on the first start only, when the admin is created
        env["MLFLOW_AUTH_ADMIN_PASSWORD"] = os.environ[auth.admin_password_env]
    if database.startswith("postgresql") and settings.password_env and os.environ.get(settings.password_env):
        env["PGPASSWORD"] = os.environ[settings.password_env]  # libpq's: the auth database's URI holds none
    return env


def secret_key(settings: ServerSettings) -> str:
    """The key Flask signs the auth app's sessions and CSRF tokens with: the admin's own
    ``MLFLOW_FLASK_SERVER_SECRET_KEY``, else the server's own, made on its first start and kept in
    ``<config>-secret_key`` (0600) beside its auth configuration, so that every worker and every restart
    signs with the same one (a key new at each start voids every form and session a browser holds)."""
    own = os.environ.get("MLFLOW_FLASK_SERVER_SECRET_KEY")
    if own:
        return own
    path = settings.artifacts_destination.parent / f"{settings.config}-secret_key"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # made once: a racing start reads it
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as file:
        file.write(secrets.token_hex(32))
    return path.read_text().strip()


def allowed_hosts(names: tuple[str, ...], host: str) -> list[str]:
    """``--allowed-hosts``: the configured names (or, off loopback with none, this machine's), the bound
    address, and loopback (the admin's own ``cctk server status``), each with any port. Empty on loopback
    with none configured: MLflow's default (loopback and private addresses) holds there."""
    if not names and is_loopback(host):
        return []
    named = list(names) or sorted({socket.gethostname(), socket.getfqdn()})
    if host not in ("0.0.0.0", "::"):
        named.append(host)
    named += ["localhost", "127.0.0.1", "[::1]"]
    return [p for name in dict.fromkeys(named) for p in (name, f"{name.replace('[', '[[]', 1)}:*")]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: whatever it resolves to, it is not loopback by name
        return False


def with_password(uri: str, password_env: str | None) -> str:
    """Insert the password from ``password_env`` (if set) into a database URI."""
    if not password_env or not os.environ.get(password_env):
        return uri
    parts = urlsplit(uri)
    if parts.username is None:
        raise CctkError(f"{password_env} is set but the backend store URI names no user")
    netloc = f"{parts.username}:{quote(os.environ[password_env], safe='')}@{parts.hostname}"
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def _absolute_sqlite(uri: str) -> str:
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        return "sqlite:///" + str(Path(uri.removeprefix("sqlite:///")).resolve())
    return uri


def _ensure_sqlite_folder(uri: str) -> None:
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)


# MLflow's server imports Starlette's WSGI middleware, which warns of its own deprecation at every start, in the
# server's log and console: no concern of a cctk user's (cctk's own process hides it too: ``tracking.auth_client``).
STARLETTE_WSGI = "ignore:starlette.middleware.wsgi is deprecated"


def store_environment(uri: str) -> dict[str, str]:
    """The store of a tracking server or UI, in its environment (``mlflow server`` and ``mlflow ui`` read these as
    ``--backend-store-uri`` and ``--registry-store-uri``): a database's URI may hold its password, and ``ps``
    shows every command line to every user of the host. The registry in the same store, said (without it MLflow
    prints ``Registry store URI not provided`` at every start)."""
    return {"MLFLOW_BACKEND_STORE_URI": uri, "MLFLOW_REGISTRY_STORE_URI": uri}


def quiet_server() -> dict[str, str]:
    """What a tracking server's or UI's environment adds to keep that warning out: ``PYTHONWARNINGS``, after
    the user's own filters (the last one given wins for what it matches)."""
    given = os.environ.get("PYTHONWARNINGS")
    return {"PYTHONWARNINGS": f"{given},{STARLETTE_WSGI}" if given else STARLETTE_WSGI}
