"""``cctk server`` and ``cctk ui``: MLflow's own server and UI on a configured store, on loopback.

A password for the backend store is read from the environment variable the configuration names
(``password_env``) and put into the URI handed to the server process only: it is never written to
a file, printed, or logged as a parameter or tag.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from ..core.errors import CctkError
from ..store.tracking import DEFAULT_CONFIG, read_config

LOOPBACK = "127.0.0.1"


def server_command(config_name: str = "server", host: str | None = None, port: int | None = None) -> list[str]:
    """The ``mlflow server`` command line of a named configuration (with its [server] table)."""
    raw = read_config(config_name)
    server = raw.get("server")
    if server is None:
        raise CctkError(
            f"tracking configuration {config_name!r} has no [server] table; use `cctk ui` for the embedded store"
        )
    backend = with_password(server["backend_store_uri"], server.get("password_env"))
    _ensure_sqlite_folder(backend)
    artifacts = Path(server["artifacts_destination"]).resolve()
    artifacts.mkdir(parents=True, exist_ok=True)
    return [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--host",
        host or server.get("host", LOOPBACK),
        "--port",
        str(port or server.get("port", 5000)),
        "--backend-store-uri",
        backend,
        "--serve-artifacts",
        "--artifacts-destination",
        artifacts.as_uri(),
        "--workers",
        "1",
    ]


def ui_command(config_name: str = DEFAULT_CONFIG, host: str = LOOPBACK, port: int = 5000) -> list[str]:
    """``mlflow ui`` on the embedded store (or any configuration with a tracking URI of its own)."""
    raw = read_config(config_name)
    uri = os.environ.get("MLFLOW_TRACKING_URI") or raw["tracking_uri"]
    if uri.startswith("http"):
        raise CctkError(
            f"{config_name!r} is a server ({uri}): open it in a browser, or start it with "
            f"`cctk server --config {config_name}`"
        )
    _ensure_sqlite_folder(uri)
    command = [sys.executable, "-m", "mlflow", "ui", "--host", host, "--port", str(port), "--backend-store-uri", uri]
    if raw.get("artifact_location"):
        command += ["--default-artifact-root", Path(raw["artifact_location"]).resolve().as_uri()]
    return command


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


def redact(command: list[str]) -> list[str]:
    """The command as it may be printed: any password in a URI replaced by ***."""
    out = []
    for part in command:
        parts = urlsplit(part) if "://" in part else None
        if parts is not None and parts.password:
            part = part.replace(f":{parts.password}@", ":***@")
        out.append(part)
    return out


def launch(command: list[str], echo=print, grace: float = 10.0) -> int:
    """Run ``command`` in a process group of its own until it exits; Ctrl-C or SIGTERM to cctk goes to the
    whole group (MLflow's server, uvicorn and their workers) and cctk waits for it, so nothing it
    started outlives it (what is still there after ``grace`` seconds is killed)."""
    echo("starting: " + " ".join(redact(command)))
    child = subprocess.Popen(command, start_new_session=True)

    def forward(signum, frame):
        return _signal_group(child.pid, signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _stop_group(child, grace)


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signum)


def _stop_group(child: subprocess.Popen, grace: float) -> None:
    """The leader has exited or cctk is leaving: end what is left of its group, SIGTERM then SIGKILL."""
    _signal_group(child.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _group_alive(child.pid):
        if child.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=0.2)
        else:
            time.sleep(0.2)
    _signal_group(child.pid, signal.SIGKILL)
    child.wait()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def _ensure_sqlite_folder(uri: str) -> None:
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
