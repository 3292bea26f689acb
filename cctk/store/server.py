"""The ``[server]`` table of a tracking configuration: what ``cctk server`` starts, and how.

``mlflow server`` does the serving: its basic-auth app (users, per-experiment permissions, an admin), its
security middleware (``--allowed-hosts``, ``--cors-allowed-origins``) and its Prometheus exporter
(``--expose-prometheus``). This module turns the table into that command and its environment:

- Secrets reach the server through its environment only, never its command line (which ``ps`` shows every
  user of the host), a file or a log: the backend store's URI with its password as
  ``MLFLOW_BACKEND_STORE_URI`` (``mlflow server`` reads it as ``--backend-store-uri``), the auth database's
  password on PostgreSQL as ``PGPASSWORD`` (libpq reads it), the admin's first password as
  ``MLFLOW_AUTH_ADMIN_PASSWORD``. The auth app's configuration file (``basic_auth.ini``) holds no secret.
- Off loopback, a server without authentication is refused unless asked for (``--no-auth``), and the host
  names clients may use are set (``--allowed-hosts``: DNS rebinding protection).
"""

from __future__ import annotations

import configparser
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
from .tracking import read_config

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


@dataclass(frozen=True)
class Launch:
    """``mlflow server`` as it is started: its command line (no secret in it), what its environment adds
    (the secrets among it) and the address it answers on."""

    command: list[str]
    env: dict[str, str]
    url: str
    settings: ServerSettings


def read_settings(config_name: str) -> ServerSettings:
    """The ``[server]`` table of a configuration, checked: an unknown key or a bad value is one line."""
    raw = read_config(config_name)
    table = raw.get("server")
    if table is None:
        raise CctkError(
            f"tracking configuration {config_name!r} has no [server] table; use `cctk ui` for the embedded store"
        )
    _known(table, SERVER_KEYS, f"[server] of {config_name!r}")
    if urlsplit(table["backend_store_uri"]).password:
        raise CctkError(f"[server] of {config_name!r}: backend_store_uri holds a password; name it in password_env")
    auth = _auth(table.get("auth"), table, config_name)
    metrics = table.get("metrics")
    return ServerSettings(
        config=config_name,
        host=table.get("host", LOOPBACK),
        port=int(table.get("port", 5000)),
        backend_store_uri=table["backend_store_uri"],
        artifacts_destination=Path(table["artifacts_destination"]).resolve(),
        password_env=table.get("password_env"),
        auth=auth,
        allowed_hosts=tuple(table.get("allowed_hosts", ())),
        cors_allowed_origins=tuple(table.get("cors_allowed_origins", ())),
        metrics=Path(metrics).resolve() if metrics else None,
        workers=int(table.get("workers", 1)),
    )


def _known(table: dict[str, Any], keys: set[str], where: str) -> None:
    unknown = sorted(set(table) - keys)
    if unknown:
        raise CctkError(f"{where}: unknown key {unknown[0]!r}; known: {', '.join(sorted(keys))}")


def _auth(table: dict[str, Any] | None, server: dict[str, Any], config_name: str) -> AuthSettings | None:
    if table is None:
        return None
    where = f"[server.auth] of {config_name!r}"
    _known(table, AUTH_KEYS, where)
    default = table.get("default_permission", "READ")
    if default not in PERMISSIONS:
        raise CctkError(f"{where}: default_permission {default!r}; choose one of: {', '.join(PERMISSIONS)}")
    database: str = table.get("database_uri", server["backend_store_uri"])  # a TOML string
    if urlsplit(database).password:
        raise CctkError(f"{where}: database_uri holds a password; the server takes it from [server] password_env")
    if server.get("password_env") and not database.startswith(("postgresql", "sqlite")):
        raise CctkError(
            f"{where}: the auth database gets its password through PGPASSWORD: keep it on PostgreSQL or SQLite"
        )
    return AuthSettings(
        database_uri=database,
        admin=table.get("admin", "admin"),
        admin_password_env=table.get("admin_password_env", "CCTK_ADMIN_PASSWORD"),
        default_permission=default,
        cache_seconds=int(table.get("cache_seconds", 0)),
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
    settings.artifacts_destination.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "mlflow", "server", "--host", host, "--port", str(port)]
    command += ["--serve-artifacts", "--artifacts-destination", settings.artifacts_destination.as_uri()]
    command += ["--workers", str(settings.workers)]
    env = {
        "MLFLOW_BACKEND_STORE_URI": backend,  # read by `mlflow server` as --backend-store-uri
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",  # GenAI jobs: seven worker processes cctk never uses
    }
    hosts = allowed_hosts(settings.allowed_hosts, host)
    if hosts:
        command += ["--allowed-hosts", ",".join(hosts)]
    if settings.cors_allowed_origins:
        command += ["--cors-allowed-origins", ",".join(settings.cors_allowed_origins)]
    if settings.metrics is not None:
        settings.metrics.mkdir(parents=True, exist_ok=True)
        command += ["--expose-prometheus", str(settings.metrics)]
    if auth is not None:
        command += ["--app-name", "basic-auth"]
        env.update(_auth_environment(settings, auth))
    return Launch(command, env, f"http://{_reachable(host)}:{port}", settings)


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
    with ini.open("w") as file:
        file.write("# Written by cctk server from the [server.auth] table; it holds no secret.\n")
        parser.write(file)
    env = {
        "MLFLOW_AUTH_CONFIG_PATH": str(ini),
        # CSRF protection of the sign-up page: the admin's own, else one for this start
        "MLFLOW_FLASK_SERVER_SECRET_KEY": os.environ.get("MLFLOW_FLASK_SERVER_SECRET_KEY") or secrets.token_hex(32),
    }
    if os.environ.get(auth.admin_password_env):  # read on the first start only, when the admin is created
        env["MLFLOW_AUTH_ADMIN_PASSWORD"] = os.environ[auth.admin_password_env]
    if database.startswith("postgresql") and settings.password_env and os.environ.get(settings.password_env):
        env["PGPASSWORD"] = os.environ[settings.password_env]  # libpq's: the auth database's URI holds none
    return env


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


def _reachable(host: str) -> str:
    """Where a client on this machine reaches a server bound to ``host``."""
    return LOOPBACK if host in ("0.0.0.0", "::") else host


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
