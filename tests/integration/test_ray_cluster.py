"""Sweeps on a real two-node Ray cluster on loopback (`ray start --head`, then `ray start --address`, one CPU
each, each node its own ports, Ray temporary folder and disk: TMPDIR) with a real MLflow tracking server
(SQLite backend, proxied artifacts): a two-cell sweep of the tiny model (--profile smoke, --parts A,
--no-figures) loses its second node (its raylet and workers killed with SIGKILL while both cells'
pipelines are RUNNING, some of their arms finished) and still ends with one FINISHED pipeline run per
cell, nothing RUNNING, the retried cell's tables those of an uninterrupted run of its seed; a second
sweep loses its driver (SIGKILL) and `cctk sweep --resume` on the same --address finishes it the same
way. The uninterrupted runs: the cell that ran through, and a `cctk run` of the lost cell's seed."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import mlflow
import pandas as pd
import psutil
import pytest
from servers import free_port, mlflow_server

from cctk import results

pytest.importorskip("ray")  # the optional extra
SEEDS = "11,12"
RAY = Path(sys.executable).with_name("ray")
# Node death is noticed within seconds, not the default ~30 s (GCS health checks of the raylets).
HEALTH = {"RAY_health_check_period_ms": "500", "RAY_health_check_failure_threshold": "3"}
pytestmark = pytest.mark.slow

# Each node's Python imports this (its folder first on PYTHONPATH): while the file CCTK_TEST_HOLD_ARMED names
# exists (hold-armed on the second node, hold-armed-head on the head), a cell's fabricated-answers arm that starts
# training on that node touches CCTK_TEST_HOLD_REACHED (hold-reached, hold-reached-head) and waits, so a node or the
# driver is lost in that arm every time, found by polling, whatever the machine's speed (the arm itself trains in
# under a second on the tiny model).
HOLD_HOOK = """
import importlib.abc, importlib.util, os, pathlib, sys, time

class _HoldFabricatedAnswers(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "cctk.pipeline.stages":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            real = module.fine_tune

            def fine_tune(*args, **kwargs):
                armed = pathlib.Path(os.environ["CCTK_TEST_HOLD_ARMED"])
                if armed.exists() and "m_random" in (args[5:6] or [kwargs.get("name", "")])[0]:
                    pathlib.Path(os.environ["CCTK_TEST_HOLD_REACHED"]).touch()
                    time.sleep(600)
                return real(*args, **kwargs)

            module.fine_tune = fine_tune

        spec.loader.exec_module = exec_module
        return spec

if os.environ.get("CCTK_TEST_HOLD_ARMED"):
    sys.meta_path.insert(0, _HoldFabricatedAnswers())
"""


@dataclass
class Node:
    process: subprocess.Popen  # `ray start --block`: the node's processes are its children
    temp: Path  # Ray's own folder (sockets, logs)
    disk: Path  # the node's disk, as its workers see it (TMPDIR): where cells write their session folders
    log: IO[str]  # what `ray start` prints


@dataclass
class Cluster:
    root: Path
    env: dict
    port: int = field(default_factory=free_port)
    nodes: list[Node] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def hold(self, suffix: str) -> dict[str, str]:
        """The environment that puts ``HOLD_HOOK`` in a node's Python, armed by ``hold-armed{suffix}``."""
        hooks = self.root / "hooks"
        hooks.mkdir(exist_ok=True)
        (hooks / "sitecustomize.py").write_text(HOLD_HOOK)
        return {
            "PYTHONPATH": os.pathsep.join(filter(None, [str(hooks), self.env.get("PYTHONPATH")])),
            "CCTK_TEST_HOLD_ARMED": str(self.root / f"hold-armed{suffix}"),
            "CCTK_TEST_HOLD_REACHED": str(self.root / f"hold-reached{suffix}"),
        }

    def start(self, name: str, *args: str, env: dict | None = None) -> Node:
        temp = Path(tempfile.mkdtemp(prefix=f"r{name}", dir="/tmp"))  # short: Ray's socket paths have a limit
        disk = self.root / f"disk-{name}"
        disk.mkdir()
        ports = ("--node-manager-port", "--object-manager-port", "--runtime-env-agent-port", "--metrics-export-port")
        ports += ("--dashboard-agent-listen-port", "--dashboard-agent-grpc-port")
        command = [str(RAY), "start", "--block", "--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--num-gpus", "0"]
        command += ["--temp-dir", str(temp), "--object-store-memory", str(80 * 2**20), "--disable-usage-stats"]
        command += [part for port in ports for part in (port, str(free_port()))]
        log = open(self.root / f"{name}.log", "w")  # noqa: SIM115 (the node writes it until the end)
        process = subprocess.Popen(
            [*command, *args],
            env={**self.env, "TMPDIR": str(disk), **HEALTH, **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.nodes.append(Node(process, temp, disk, log))
        return self.nodes[-1]

    def start_head(self) -> None:
        head = (
            "--head",
            "--port",
            str(self.port),
            "--include-dashboard",
            "false",
            "--dashboard-port",
            str(free_port()),
        )
        self.start("head", *head, env=self.hold("-head"))
        for _ in range(300):
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            time.sleep(0.2)
        pytest.fail("the Ray head did not start: " + (self.root / "head.log").read_text()[-2000:])

    def second_node(self) -> Node:
        """The second node, started (again, after a test killed it) where it is not running, with ``HOLD_HOOK``."""
        if len(self.nodes) > 1 and self.nodes[-1].process.poll() is None:
            return self.nodes[-1]
        name = f"node{len(self.nodes)}"
        node = self.start(name, "--address", self.address, env=self.hold(""))
        # `ray start` says so once the node has registered with the head: until then a sweep's second cell waits
        # for a CPU, and on two loaded cores the first cell could end before the second began
        deadline = time.monotonic() + 120
        while "Ray runtime started." not in (self.root / f"{name}.log").read_text():
            if node.process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the second node did not join: {(self.root / f'{name}.log').read_text()[-2000:]}")
            time.sleep(0.2)
        return node

    def lose(self, node: Node) -> list[str]:
        """The node's raylet and every process it started (its workers), killed with SIGKILL."""
        raylet = next(p for p in psutil.Process(node.process.pid).children() if p.name() == "raylet")
        victims = [raylet, *raylet.children(recursive=True)]
        names = [victim.name() for victim in victims]
        for victim in victims:
            with contextlib.suppress(psutil.NoSuchProcess):
                victim.send_signal(signal.SIGKILL)
        return names

    def stop(self) -> None:
        """Every node's processes, by process id, with SIGKILL (nothing of a test cluster is worth a graceful
        stop), then the group each node's `ray start` leads (workers it started since), and their folders."""
        for node in self.nodes:
            with contextlib.suppress(psutil.NoSuchProcess):
                for process in [*psutil.Process(node.process.pid).children(recursive=True), node.process]:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(process.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.process.pid, signal.SIGKILL)
            node.process.wait(timeout=30)
            node.log.close()
            shutil.rmtree(node.temp, ignore_errors=True)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("cluster")


@pytest.fixture(scope="module")
def env(root):
    environ = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "CCTK_CACHE": str(root / "cache")}
    environ.pop("MLFLOW_TRACKING_URI", None)
    # Ray's token authentication, as a secured cluster has it: every node and the driver take the token from
    # their own environment (cctk hands none on). Set here, it also keeps a ~/.ray/auth_token that another
    # local Ray left from switching the nodes' authentication on behind the driver's back.
    environ.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)})
    return environ


@pytest.fixture(scope="module")
def server(root, env, new_store):
    folder = root / "server"
    with mlflow_server(new_store(folder, "server.db"), folder, env=env) as url:
        yield url


@pytest.fixture(scope="module")
def cluster(root, env):
    cluster = Cluster(root, env)
    try:
        cluster.start_head()
        cluster.second_node()
        yield cluster
    finally:
        cluster.stop()


def sweep_command(tiny_dir, cluster: Cluster, server: str) -> list[str]:
    return [
        sys.executable,
        *("-m", "cctk", "sweep", "--models", str(tiny_dir), "--seeds", SEEDS, "--profile", "smoke", "--parts", "A"),
        *("--no-figures", "--executor", "ray", "--address", cluster.address, "--tracking", server),
    ]


@dataclass
class References:
    """The tables of uninterrupted runs, by seed: a cluster cell that ran through, or a `cctk run` of the seed
    on this machine (started where none is at hand)."""

    root: Path
    env: dict
    tiny_dir: Path
    server: str
    tables: dict[int, dict[str, pd.DataFrame]] = field(default_factory=dict)
    running: dict[int, subprocess.Popen] = field(default_factory=dict)

    def start(self, seed: int) -> None:
        if seed in self.tables or seed in self.running:
            return
        command = [sys.executable, "-m", "cctk", "run", "--model", str(self.tiny_dir), "--seed", str(seed)]
        command += ["--profile", "smoke", "--parts", "A", "--no-figures", "--no-system-metrics"]
        command += ["--tracking", self.server, "--out", str(self.root / "references")]
        self.running[seed] = subprocess.Popen(
            command, env=self.env, cwd=self.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def get(self, seed: int) -> dict[str, pd.DataFrame]:
        if seed not in self.tables:
            self.start(seed)
            out, err = self.running[seed].communicate(timeout=900)
            assert self.running.pop(seed).returncode == 0, err[-3000:]
            run_id = re.findall(r"MLflow run (\w+)", out)[-1]
            self.tables[seed] = results.load(run_id, tracking_name=self.server, cache=self.root / "cache").tables
        return self.tables[seed]

    def stop(self) -> None:
        for process in self.running.values():
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def references(root, env, tiny_dir, server):
    known = References(root, env, tiny_dir, server)
    try:
        yield known
    finally:
        known.stop()


def cells(client, sweep_id: str) -> list:
    experiment = client.get_run(sweep_id).info.experiment_id
    return client.search_runs([experiment], f"tags.`cctk.sweep` = '{sweep_id}' and tags.`cctk.kind` = 'pipeline'")


def arms(client, run) -> list:
    return client.search_runs([run.info.experiment_id], f"tags.`mlflow.parentRunId` = '{run.info.run_id}'")


def run_table(client, sweep_id: str) -> str:
    """Every run of the sweep, as the report shows it: pipeline runs by cell, each with its arms."""
    lines = [f"sweep {sweep_id[:8]} {client.get_run(sweep_id).info.status}"]
    for run in sorted(cells(client, sweep_id), key=lambda r: (r.data.tags["cctk.cell"], r.info.start_time)):
        attempt = run.data.tags.get("cctk.attempt", "1")
        lines.append(
            f"  pipeline {run.info.run_id[:8]} {run.data.tags['cctk.cell']} {run.info.status} attempt {attempt}"
        )
        for arm in sorted(arms(client, run), key=lambda a: a.info.start_time):
            said = arm.data.tags.get("cctk.ended") or arm.data.tags.get("cctk.trained_again") or ""
            lines.append(f"    model {arm.info.run_id[:8]} {arm.data.tags['cctk.key']:<9} {arm.info.status} {said}")
    return "\n".join(lines)


def wait_for(client, sweep_id: str, ready, what: str, deadline: float = 600) -> None:
    """Until ``ready(cells)`` holds of the sweep's pipeline runs (polled from the server)."""
    start = time.monotonic()
    while time.monotonic() - start < deadline:
        if ready(cells(client, sweep_id)):
            return
        if client.get_run(sweep_id).info.status != "RUNNING":  # ended before the moment waited for: say so now
            break
        time.sleep(0.2)
    pytest.fail(f"the cells never {what}:\n{run_table(client, sweep_id)}")


def finished_arms(client, run) -> set[str]:
    return {a.data.tags["cctk.key"] for a in arms(client, run) if a.info.status == "FINISHED"}


def both_running(runs: list) -> bool:
    return len(runs) == 2 and all(r.info.status == "RUNNING" for r in runs)


def tables_by_seed(client, sweep_id: str, server: str, cache: Path) -> dict[int, dict[str, pd.DataFrame]]:
    """Each FINISHED cell's tables, read back from MLflow alone (nothing on the workers' disks)."""
    out = {}
    for run in cells(client, sweep_id):
        if run.info.status == "FINISHED":
            back = results.load(run.info.run_id, tracking_name=server, cache=cache)
            out[back.info.config.seed] = back.tables
    return out


def check_truthful(client, sweep_id: str) -> None:
    """One pipeline run per cell, FINISHED; no run of the sweep's (its own, its cells', their arms') RUNNING."""
    table = run_table(client, sweep_id)
    print(table)  # the run table of the report
    pipelines = cells(client, sweep_id)
    assert sorted(r.data.tags["cctk.cell"].split("|")[1] for r in pipelines) == ["seed=11", "seed=12"], table
    assert all(r.info.status == "FINISHED" for r in pipelines), table
    every = [client.get_run(sweep_id), *pipelines, *(a for r in pipelines for a in arms(client, r))]
    assert not [r for r in every if r.info.status == "RUNNING"], table
    assert client.get_run(sweep_id).info.status == "FINISHED"


def check_tables(resumed: dict, straight: dict, seeds: list[int]) -> None:
    for seed in seeds:
        assert set(resumed[seed]) == set(straight[seed]) == {"table01", "table09", "table11"}
        for name, table in straight[seed].items():
            other = resumed[seed][name]
            if name == "table11":  # times differ; the rest may not
                columns = ["model", "examples", "steps", "loss_first_epoch", "loss_last_epoch"]
                table, other = table[columns], other[columns]
            pd.testing.assert_frame_equal(other, table)


def test_a_sweep_that_loses_a_node_resumes_the_lost_cell_in_its_own_run(
    root, env, tiny_dir, cluster, server, references
):
    client = mlflow.MlflowClient(server)
    node = cluster.second_node()
    armed, reached = root / "hold-armed", root / "hold-reached"
    armed.touch()  # the second node's cell holds at the start of its fabricated-answers arm (HOLD_HOOK)
    driver = subprocess.Popen(
        sweep_command(tiny_dir, cluster, server),
        env=env,
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = driver.stdout.readline()
    if not first:
        pytest.fail(driver.communicate()[1][-3000:])
    sweep_id = first.split()[1].rstrip(":")

    def lost_cell_half_done(runs: list) -> bool:
        """The cell on the second node (its session folder on that node's disk) RUNNING, held at the start of its
        fabricated-answers arm (its correct-sums arm finished: that arm trains from its checkpoint there). The
        head's cell may have ended by then."""
        if not reached.exists():
            return False
        there = {p.name for p in node.disk.glob(f"cctk-sweeps/{sweep_id}/*/*")}  # <cell>/<session>
        lost[:] = [r for r in runs if r.data.tags.get("cctk.session") in there and r.info.status == "RUNNING"]
        return len(runs) == 2 and len(lost) == 1 and "m_correct" in finished_arms(client, lost[0])

    lost: list = []
    try:
        wait_for(client, sweep_id, lost_cell_half_done, "held the second node's cell in its fabricated-answers arm")
    finally:
        armed.unlink()  # the retry, wherever it runs, trains through
    killed = cluster.lose(node)
    seed = int(lost[0].data.params["seed"])
    references.start(seed)  # an uninterrupted run of the lost cell's seed, beside its retry
    assert "raylet" in killed and any(name.startswith("ray::") for name in killed)
    out, err = driver.communicate(timeout=900)
    assert driver.returncode == 0, err[-3000:]
    check_truthful(client, sweep_id)
    assert sum(line.startswith("cell ") and ": finished, run " in line for line in out.splitlines()) == 2, out
    assert f"2 cells (ray cluster at {cluster.address}), results in MLflow experiment cctk (id " in first
    assert first.rstrip().endswith(f"at {server}")
    retried = [r for r in cells(client, sweep_id) if r.data.tags.get("cctk.attempt") == "2"]
    assert [r.info.run_id for r in retried] == [lost[0].info.run_id]  # the lost node's cell, resumed once
    models = arms(client, retried[0])
    assert [a.data.tags["cctk.key"] for a in models if a.info.status == "KILLED"] == ["m_random"]
    assert {a.data.tags["cctk.key"] for a in models if a.info.status == "FINISHED"} == {"base", "m_correct", "m_random"}
    assert len(models) == 4  # base and correct sums kept from the lost attempt: not measured again
    again = [a for a in models if "cctk.trained_again" in a.data.tags]
    assert [a.data.tags["cctk.key"] for a in again] == ["m_correct"]  # its checkpoint was on the lost disk
    # the lost attempt's files stayed on the lost node's disk; the head's keeps nothing: MLflow has it all
    assert [p.name for p in node.disk.glob("cctk-sweeps/*/*/*/checkpoints/*")] == ["correct_sums.pt"]
    assert not list(cluster.nodes[0].disk.glob("cctk-sweeps/*/*"))
    swept = tables_by_seed(client, sweep_id, server, root / "cache")
    references.tables.update({s: tables for s, tables in swept.items() if s != seed})  # the cell that ran through
    check_tables(swept, {seed: references.get(seed)}, [seed])
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cctk",
            "compare",
            "--sweep",
            sweep_id,
            "--tracking",
            server,
            "--out",
            str(root / "cmp"),
        ],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    cross = pd.read_csv(root / "cmp" / "tables" / "cross_seed" / "cross_seed.csv")
    assert (cross["runs"] == 2).all() and len(cross) == 3


def test_a_sweep_that_loses_its_driver_is_resumed_on_the_same_cluster(root, env, tiny_dir, cluster, server, references):
    client = mlflow.MlflowClient(server)
    cluster.second_node()
    armed, reached = (
        [root / "hold-armed", root / "hold-armed-head"],
        [root / "hold-reached", root / "hold-reached-head"],
    )
    for path in reached:
        path.unlink(missing_ok=True)  # the lost node's test reached its hold
    for path in armed:
        path.touch()  # each node's cell holds at the start of its fabricated-answers arm: both RUNNING when lost
    driver = subprocess.Popen(
        sweep_command(tiny_dir, cluster, server),
        env=env,
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    sweep_id = driver.stdout.readline().split()[1].rstrip(":")

    def both_held(runs: list) -> bool:
        started = both_running(runs) and all("m_correct" in finished_arms(client, r) for r in runs)
        return started and all(path.exists() for path in reached)

    try:
        wait_for(client, sweep_id, both_held, "both held in their fabricated-answers arm")
    finally:
        for path in armed:
            path.unlink(missing_ok=True)  # the resumed cells train through
    driver.send_signal(signal.SIGKILL)
    driver.wait(timeout=60)
    print(run_table(client, sweep_id))  # as the driver's death left it
    assert client.get_run(sweep_id).info.status == "RUNNING"
    command = [sys.executable, "-m", "cctk", "sweep", "--resume", sweep_id, "--address", cluster.address]
    done = subprocess.run(
        [*command, "--tracking", server], env=env, cwd=root, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr[-3000:]
    print(done.stdout)  # the resumed sweep's lines
    assert sum("finished, run" in line for line in done.stdout.splitlines()) == 2, done.stdout
    check_truthful(client, sweep_id)
    assert all(r.data.tags.get("cctk.attempt") == "2" for r in cells(client, sweep_id))
    check_tables(
        tables_by_seed(client, sweep_id, server, root / "cache"), {s: references.get(s) for s in (11, 12)}, [11, 12]
    )
