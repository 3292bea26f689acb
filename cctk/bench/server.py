"""``python -m cctk.bench server``: a bounded load check of a tracking server.

``clients`` processes each open a run and log one metric value per request (``LiveRun.metrics``: one
``log-batch`` call, as a pipeline logs its loss) as fast as the server answers, for ``seconds``. Then every
value is read back from the server: a write it acknowledged and does not hold is a lost write. The figures:
clients, writes, lost writes, failed requests, requests a second, and the latency of a request (p50, p99).

Without ``--tracking`` it starts its own server, as ``cctk server`` would (``cctk.store.server``), on a
store of its own in a temporary folder: SQLite, or ``--backend-store-uri`` (a PostgreSQL database, its
password from PGPASSWORD); with authentication on or off.
"""

from __future__ import annotations

import multiprocessing
import os
import secrets
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..cli.server import running
from ..store import tracking
from ..store.server import AuthSettings, ServerSettings, launch


@dataclass(frozen=True)
class Client:
    """What one client did: its run, the writes the server acknowledged, the requests that failed, and the
    seconds each acknowledged write took."""

    run_id: str
    writes: int
    failed: int
    latencies: list[float]


def load(url: str, clients: int, seconds: float, experiment: str) -> dict[str, int | float | None]:
    """``clients`` processes logging to ``url`` for ``seconds``; their figures, the lost writes counted."""
    store = tracking.Store(tracking.TrackingConfig("bench", url))
    experiment_id = store.experiment(experiment)
    jobs = [(url, experiment_id, i, seconds) for i in range(clients)]
    with multiprocessing.get_context("spawn").Pool(clients) as pool:
        done = pool.starmap(_client, jobs)  # each logs for ``seconds`` from the moment its run is open
    writes = sum(c.writes for c in done)
    held = sum(len(store.client.get_metric_history(c.run_id, "value")) for c in done)
    latencies = np.array([x for c in done for x in c.latencies]) * 1000
    return {
        "clients": clients,
        "seconds": seconds,
        "writes": writes,
        "lost writes": writes - held,
        "failed requests": sum(c.failed for c in done),
        "requests a second": round(writes / seconds, 1),
        "p50 latency ms": round(float(np.percentile(latencies, 50)), 1) if len(latencies) else None,
        "p99 latency ms": round(float(np.percentile(latencies, 99)), 1) if len(latencies) else None,
    }


def _client(url: str, experiment_id: str, index: int, seconds: float) -> Client:
    """One client: a run of its own, one value per request until ``seconds`` have passed."""
    store = tracking.Store(tracking.TrackingConfig("bench", url))
    run = store.start(experiment_id, f"load client {index}")
    latencies, failed, step = [], 0, 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.perf_counter()
        try:
            run.metrics({"value": float(step)}, step=step)
        except Exception:  # counted, not hidden: a request the server did not acknowledge
            failed += 1
            continue
        latencies.append(time.perf_counter() - started)
        step += 1
    run.end()
    return Client(run.run_id, step, failed, latencies)


def run(
    clients: int, seconds: float, url: str | None, auth: bool, backend: str | None, workers: int, cache: int = 0
) -> dict[str, str | int | float | None]:
    """The load check against ``url``, or against a server of its own (see the module docstring)."""
    if url:  # read as every --tracking is: an account or a secret in it refused, the address shown redacted
        given = tracking.resolve(url)
        return {"server": given.shown, **load(given.tracking_uri, clients, seconds, "cctk-bench")}
    with tempfile.TemporaryDirectory(prefix="cctk-bench-server-") as folder:
        root = Path(folder)
        settings = ServerSettings(
            config="bench",
            host="127.0.0.1",
            port=_free_port(),
            backend_store_uri=backend or f"sqlite:///{root / 'mlflow.db'}",
            artifacts_destination=root / "artifacts",
            auth=AuthSettings(
                f"sqlite:///{root / 'auth.db'}", admin_password_env="CCTK_BENCH_ADMIN", cache_seconds=cache
            )
            if auth
            else None,
            workers=workers,
        )
        password = secrets.token_urlsafe(16)
        os.environ.update(CCTK_BENCH_ADMIN=password)
        started = launch(settings)
        if auth:  # the clients log in as the admin the server creates on its first start
            os.environ.update(MLFLOW_TRACKING_USERNAME="admin", MLFLOW_TRACKING_PASSWORD=password)
        with running(started.command, started.env, started.url, root / "server.log"):
            store = "PostgreSQL" if settings.backend_store_uri.startswith("postgresql") else "SQLite"
            login = f"on, passwords cached {cache} s" if auth else "off"
            server = f"its own, {store}, {workers} worker(s), auth {login}"
            return {"server": server, **load(started.url, clients, seconds, "cctk-bench")}


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # (host, port): the port the system chose
