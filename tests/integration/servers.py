"""Processes of the integration tests: a real ``mlflow server`` on loopback, stopped with everything it started,
a private PostgreSQL cluster, and a child that takes Ctrl-C as it would from a terminal."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager, suppress
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
def mlflow_server(backend_uri: str, folder: Path, workers: int = 1, env: dict | None = None, port: int | None = None):
    """``mlflow server`` on 127.0.0.1 (``port``, else a free one) with ``backend_uri`` and artifacts under
    ``folder``; yields its URL once /health answers; its log is ``folder/server.log`` (appended to: a server
    started again on the same folder keeps the first one's); its whole process group is stopped at the end."""
    port, log = port or free_port(), open(folder / "server.log", "a")  # noqa: SIM115 (written until the end)
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
        # no job runner: MLflow's server jobs start two task consumers and a scheduler that no test uses
        env={**(os.environ if env is None else env), "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
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
        stop_group(server)
        log.close()


def stop_group(process: subprocess.Popen, grace: float = 1.0) -> None:
    """Stop ``process`` (started with ``start_new_session=True``) and every process of its group: SIGTERM, then
    after ``grace`` seconds SIGKILL to whatever of the group is left (MLflow 3's server, uvicorn under it, takes
    half a minute to answer SIGTERM; a test's server holds nothing worth a graceful end), and wait until the
    group is gone, so that nothing it started outlives the test."""
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with suppress(subprocess.TimeoutExpired):
        process.wait(timeout=grace)
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # the leader may be gone while its workers are not
    process.wait(timeout=30)
    deadline = time.monotonic() + 30
    while group_alive(process.pid):
        assert time.monotonic() < deadline, f"process group {process.pid} outlived SIGKILL"
        time.sleep(0.05)


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is left (a zombie, dead but not yet reaped by init, counts as gone)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _initdb() -> str | None:
    found = shutil.which("initdb") or next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))), None)
    return str(found) if found else None


@contextmanager
def postgres_cluster(password: str | None = None):
    """A private PostgreSQL cluster on a loopback port with a database ``cctk``, started and stopped here;
    yields its URI for the superuser ``postgres`` (no password in it). With ``password``, the cluster asks
    for it (scram-sha-256) on every connection; without, it trusts loopback."""
    initdb = _initdb()
    if initdb is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL is missing: .ci/run installs it")
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql)")
    # PostgreSQL refuses to run as root: as root, the cluster belongs to the postgres user, in a
    # folder of its own (pytest's tmp_path sits under a folder only root may enter).
    bindir, port = Path(initdb).parent, free_port()
    home = Path(tempfile.mkdtemp(prefix="cctk-pg-"))
    data = home / "data"
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    method = ["-A", "trust"]
    if password is not None:
        (home / "pw").write_text(password + "\n")
        method = ["-A", "scram-sha-256", f"--pwfile={home / 'pw'}"]
    if as_user:
        shutil.chown(home, "postgres")
        if password is not None:
            shutil.chown(home / "pw", "postgres")
    subprocess.run([*as_user, initdb, "-D", str(data), *method, "-U", "postgres"], check=True, capture_output=True)
    (home / "pw").unlink(missing_ok=True)
    start = [*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(data / "log"), "-w", "start"]
    start += ["-o", f"-p {port} -k {data} -c listen_addresses=127.0.0.1"]
    subprocess.run(start, check=True, capture_output=True)
    _PG_CTL[port] = ([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "stop"], start)
    try:
        createdb = str(bindir / "createdb") if (bindir / "createdb").exists() else "createdb"
        env = {**os.environ, **({"PGPASSWORD": password} if password is not None else {})}
        subprocess.run(
            [createdb, "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "cctk"],
            check=True,
            capture_output=True,
            env=env,
        )
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/cctk"  # the driver in [dev]
    finally:
        subprocess.run(_PG_CTL.pop(port)[0], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


_PG_CTL: dict[int, tuple[list[str], list[str]]] = {}  # port -> pg_ctl's stop and start commands of its cluster


def postgres_down(uri: str) -> None:
    """Stop the cluster of ``postgres_cluster``'s ``uri`` (fast: its connections are cut)."""
    subprocess.run(_pg_ctl(uri)[0], check=True, capture_output=True)


def postgres_up(uri: str) -> None:
    """Start the cluster of ``uri`` again, on its port, with its data."""
    subprocess.run(_pg_ctl(uri)[1], check=True, capture_output=True)


def _pg_ctl(uri: str) -> tuple[list[str], list[str]]:
    return _PG_CTL[int(uri.rsplit(":", 1)[1].split("/")[0])]


class FaultyProxy:
    """A proxy on loopback in front of a tracking server, faulty as told: ``fail(path, n)`` answers the next
    ``n`` requests whose path holds ``path`` with 503 (a server restarting); ``drop(path)`` drops every
    connection, unanswered, from the first such request on (a server gone) until ``heal()``. ``served``
    counts what it did: {"503": n, "dropped": n, "passed": n}."""

    def __init__(self, upstream: str):
        import http.server
        import threading
        from urllib.parse import urlsplit

        self.upstream = urlsplit(upstream)
        self.failing: dict[str, int] = {}
        self.dropping: str | None = None
        self.down = False
        self.served = {"503": 0, "dropped": 0, "passed": 0}
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def handle_one(self):
                proxy.relay(self)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = handle_one

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def fail(self, path: str, times: int) -> None:
        self.failing[path] = times

    def drop(self, path: str) -> None:
        self.dropping = path

    def heal(self) -> None:
        self.failing, self.dropping, self.down = {}, None, False

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def relay(self, handler) -> None:
        import http.client

        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        path = handler.path
        if self.down or (self.dropping and self.dropping in path):
            self.down = True  # from the first such request on, every request
            self.served["dropped"] += 1
            handler.close_connection = True
            return
        for part, left in self.failing.items():
            if left > 0 and part in path:
                self.failing[part] = left - 1
                self.served["503"] += 1
                handler.send_response(503)
                handler.send_header("Content-Length", "0")
                handler.end_headers()
                return
        upstream = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=120)
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in ("connection", "keep-alive")}
        upstream.request(handler.command, path, body=body or None, headers=headers)
        reply = upstream.getresponse()
        data = reply.read()
        handler.send_response(reply.status)
        for key, value in reply.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
        upstream.close()
        self.served["passed"] += 1


# A process that has imported what every `cctk` command imports (torch, Transformers, MLflow, the CLI and the
# pipeline: about 4 s of CPU a start) and forks a `cctk` process per request: the child is a real process that
# runs the real CLI (`cctk.cli.main.main`, as `python -m cctk` does) with its own arguments, environment, output
# file and Ctrl-C as from a terminal, and that dies of the signals it is sent; only the imports were paid once.
# Each request may hold one step (module:attribute) at its start, touching a file when it is reached (the stage
# walks' HOLD) and going on once the test deletes that file (after 600 s at most). A child's exit code comes back
# as Popen's returncode would: the code, or -N for signal N.
FORK_SERVER = r"""
import importlib, json, os, pathlib, signal, sys, threading, time
import cctk.pipeline.stages, cctk.core.lm.models, cctk.outputs.render, mlflow, transformers
from cctk.cli.main import main
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM
import sqlalchemy.dialects.sqlite
assert threading.active_count() == 1, threading.enumerate()  # forking a process with threads is unsafe

def held(module, name, reached):
    module = importlib.import_module(module)
    real = getattr(module, name)
    def hold(*args, **kwargs):
        reached_file = pathlib.Path(reached)
        reached_file.touch()
        deadline = time.monotonic() + 600
        while reached_file.exists() and time.monotonic() < deadline:  # the test deletes it to let it go on
            time.sleep(0.05)
        return real(*args, **kwargs)
    setattr(module, name, hold)

for line in sys.stdin:
    request = json.loads(line)
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:  # the cctk process: never back in this loop (main() ends in SystemExit, or dies of a signal)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C as from a terminal
        os.environ.clear()
        os.environ.update(request["env"])
        if request.get("cwd"):
            os.chdir(request["cwd"])
        out = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(out, 1)
        os.dup2(out, 2)
        sys.stdout.reconfigure(line_buffering=True)  # each line in the file as it is printed, as on a terminal
        sys.stderr.reconfigure(line_buffering=True)
        if request["hold"]:
            held(*request["hold"].split(":"), request["reached"])
        sys.argv = ["cctk", *request["args"]]
        main()
        sys.exit(0)
    print(json.dumps({"pid": pid}), flush=True)
    print(json.dumps({"code": os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])}), flush=True)
"""


class ForkedCctk:
    """One ``cctk`` process forked by a ``CctkForks`` server: its pid (for signals), its exit code, its output."""

    def __init__(self, server: CctkForks, pid: int, log: Path) -> None:
        self.server, self.pid, self.log, self.returncode = server, pid, log, None

    def poll(self) -> int | None:
        return self.wait(0, kill=False)

    def wait(self, timeout: float, kill: bool = True) -> int | None:
        """The exit code, once the process has ended within ``timeout`` seconds; else SIGKILL to it and
        TimeoutExpired (``kill``) or None."""
        if self.returncode is None:
            line = self.server.line(timeout)
            if line is None:
                if not kill:
                    return None
                os.kill(self.pid, signal.SIGKILL)
                raise subprocess.TimeoutExpired(f"cctk (pid {self.pid})", timeout)
            self.returncode = json.loads(line)["code"]
        return self.returncode

    def send_signal(self, signum: int) -> None:
        os.kill(self.pid, signum)

    def output(self) -> str:
        return self.log.read_text()


class CctkForks:
    """``FORK_SERVER`` in a child of this process, started with ``env`` (its imports read it); one cctk process at a
    time: ``start(args, env, log, hold=..., reached=...)`` forks it, ``close()`` ends the server."""

    def __init__(self, env: dict) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", FORK_SERVER], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self.buffer = b""

    def start(
        self,
        args: list[str],
        env: dict,
        log: Path,
        hold: str = "",
        reached: Path | None = None,
        cwd: Path | None = None,
    ) -> ForkedCctk:
        request = {"args": args, "env": env, "log": str(log), "hold": hold, "reached": str(reached or "")}
        request["cwd"] = str(cwd or "")
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        self.process.stdin.flush()
        return ForkedCctk(self, json.loads(self.line(300))["pid"], log)

    def run(self, args: list[str], env: dict, log: Path, cwd: Path | None = None, timeout: float = 1500):
        """``cctk args`` to its end, as ``subprocess.run`` would give it (stdout and stderr both the log's text)."""
        proc = self.start(args, env, log, cwd=cwd)
        code = proc.wait(timeout)
        output = proc.output()
        return subprocess.CompletedProcess(["cctk", *args], code, output, output)

    def line(self, timeout: float) -> str | None:
        """The server's next line, or None if none came within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            if not select.select([self.process.stdout], [], [], max(0.0, deadline - time.monotonic()))[0]:
                return None
            chunk = os.read(self.process.stdout.fileno(), 4096)
            assert chunk, f"the fork server ended with {self.process.wait()}"
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()

    def close(self) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
