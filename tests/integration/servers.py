"""Processes of the integration tests: a real ``mlflow server`` on loopback, stopped with everything it started,
and a child that takes Ctrl-C as it would from a terminal."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest


def as_from_a_terminal() -> None:
    """``preexec_fn`` of a child that is sent SIGINT: Ctrl-C's default disposition, so its Python raises
    KeyboardInterrupt even when this suite runs as a background job of a non-interactive shell (which starts
    every child with SIGINT ignored, and such a child never sees the signal)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def mlflow_server(backend_uri: str, folder: Path, workers: int = 1, env: dict | None = None):
    """``mlflow server`` on 127.0.0.1 with ``backend_uri`` and artifacts under ``folder``; yields its URL once
    /health answers; its log is ``folder/server.log``; its whole process group is stopped at the end."""
    port, log = free_port(), open(folder / "server.log", "w")  # noqa: SIM115 (the server writes it until the end)
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--backend-store-uri",
            backend_uri,
            "--serve-artifacts",
            "--artifacts-destination",
            (folder / "artifacts").as_uri(),
            "--workers",
            str(workers),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(180):
            try:
                if urllib.request.urlopen(f"{url}/health", timeout=2).status == 200:
                    break
            except OSError:
                time.sleep(1)
        else:
            pytest.fail("the tracking server did not start: " + (folder / "server.log").read_text()[-2000:])
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
        log.close()
