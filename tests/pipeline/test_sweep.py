"""cctk sweep: the grid, its parameters, the store URI every worker uses, and one-line errors."""

from __future__ import annotations

import contextlib
import json
import re
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from cctk.cli.main import cli
from cctk.core.errors import CctkError, Terminated
from cctk.manuals import configure
from cctk.pipeline import sweep
from cctk.store import tracking


def test_grid_cells_are_the_product_in_a_stable_order():
    grid = sweep.parse_grid("smollm2-135m-bundled", "3,5", ("learning_rate=1e-4,3e-4",), "quick")
    assert grid.seeds == (3, 5) and grid.sets == (("learning_rate", (1e-4, 3e-4)),)
    assert [c.key for c in grid.cells()] == [
        "smollm2-135m-bundled|seed=3|learning_rate=0.0001",
        "smollm2-135m-bundled|seed=5|learning_rate=0.0001",
        "smollm2-135m-bundled|seed=3|learning_rate=0.0003",
        "smollm2-135m-bundled|seed=5|learning_rate=0.0003",
    ]
    again = sweep.Grid.from_params({k: str(v) for k, v in grid.as_params().items()})
    assert again == grid and json.loads(grid.as_params()["set"]) == {"learning_rate": [1e-4, 3e-4]}


def test_a_count_of_seeds_draws_fresh_distinct_ones():
    grid = sweep.parse_grid("smollm2-135m-bundled", "3")
    assert len(grid.seeds) == 3 and len(set(grid.seeds)) == 3


def test_a_finished_sweep_names_its_store_in_the_commands_it_prints(new_store, tmp_path, monkeypatch):
    """Before: a local sweep on a store given by --tracking printed `cctk compare --sweep ID --out DIR`, which
    looks in ./mlruns/ and finds no such sweep; and no line named where to see the sweep's run."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    uri = new_store(tmp_path / "elsewhere")
    store = tracking.connect(uri)
    plan = sweep.open_sweep(store, sweep.parse_grid("smollm2-135m-bundled", "3", (), "smoke"), tmp_path, "local", None)
    said: list[str] = []
    sweep.execute(store, plan, lambda cell, *_: f"run-{cell.seed}", echo=said.append)
    (run,) = store.search([store.experiment()], f"tags.`{tracking.KIND}` = 'sweep'")
    assert said[-2:] == [
        f"sweep {run.run_id} finished; compare it with: cctk compare --sweep {run.run_id} --out DIR --tracking {uri}",
        f"MLflow UI: cctk ui {run.run_id} --tracking {uri}",
    ]


@pytest.mark.parametrize(
    ("models", "seeds", "sets", "message"),
    [
        ("nope", "1,2", (), "unknown model 'nope'"),
        ("smollm2-135m-bundled", "1,1", (), "repeats a seed"),
        ("smollm2-135m-bundled, smollm2-135m-bundled", "1,2", (), "repeats a model: smollm2-135m-bundled, smol"),
        ("smollm2-135m-bundled", "0", (), "N >= 1"),
        ("smollm2-135m-bundled", "x", (), "count N or seeds"),
        ("smollm2-135m-bundled", "1,2", ("lr=1e-4",), "NAME a recipe value"),
        ("smollm2-135m-bundled", "1,2", ("epochs=two",), "cannot read 'two' as int"),
        ("smollm2-135m-bundled", "1,2", ("epochs=0,3",), "epochs=0 is out of range"),
    ],
)
def test_bad_grids_fail_in_one_line(models, seeds, sets, message):
    with pytest.raises(CctkError, match=message):
        sweep.parse_grid(models, seeds, sets)


def test_the_store_uri_is_absolute_and_waits_for_a_busy_sqlite(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    store = tracking.Store(tracking.TrackingConfig("x", "sqlite:///mlruns/mlflow.db"))
    assert sweep.absolute_store(store) == f"sqlite:///{tmp_path}/mlruns/mlflow.db?timeout=120"
    server = tracking.Store.__new__(tracking.Store)
    server.config = tracking.TrackingConfig("x", "http://127.0.0.1:5000")
    assert sweep.absolute_store(server) == "http://127.0.0.1:5000"
    database = tracking.Store.__new__(tracking.Store)  # its cells connect with its password; lines show it redacted
    database.config = tracking.TrackingConfig("x", "postgresql://cctk:S3cret@h/db")
    assert sweep.absolute_store(database) == "postgresql://cctk:S3cret@h/db"
    with pytest.raises(CctkError, match=r"cannot reach the local store postgresql://cctk:\*\*\*@h/db: use a tracking"):
        sweep.check_cluster_store(database.config.tracking_uri)


def test_cli_errors_before_any_store_is_touched(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    for args, message in (
        (["--models", "nope", "--seeds", "2"], "unknown model"),
        (["--seeds", "2"], "needs --models and --seeds"),
        (["--models", "smollm2-135m-bundled", "--seeds", "1,2", "--address", "x:1"], "--address is for --executor ray"),
    ):
        result = CliRunner().invoke(cli, ["sweep", *args])
        assert result.exit_code != 0 and message in result.output.strip().splitlines()[-1]
    assert not (tmp_path / "mlruns").exists()


def test_ray_missing_fails_in_one_line(monkeypatch):
    import builtins

    real = builtins.__import__
    monkeypatch.setattr(
        builtins,
        "__import__",
        lambda name, *a, **k: (_ for _ in ()).throw(ImportError()) if name == "ray" else real(name, *a, **k),
    )
    with pytest.raises(CctkError, match=r"pip install -e '.\[ray\]'"):
        sweep.check_executor("ray", None)


def new_sweep(tmp_path, seeds: str = "3,5") -> tuple[tracking.Store, sweep.Sweep]:
    store = tracking.connect()
    grid = sweep.parse_grid("smollm2-135m-bundled", seeds, (), "smoke")
    return store, sweep.open_sweep(store, grid, tmp_path, "local", None)


def pipelines(store: tracking.Store) -> list[tracking.TrackedRun]:
    return store.search([store.experiment()], f"tags.`{tracking.KIND}` = 'pipeline'")


def test_a_sweep_ends_finished_or_killed_as_its_cells_end(tracking_uri, tmp_path):
    """FINISHED when every cell finished; KILLED when a cell is stopped by SIGTERM (which cctk's CLI raises as
    ``Terminated``): the stop goes on at once, no other cell starts."""
    store, plan = new_sweep(tmp_path)
    assert sweep.execute(store, plan, lambda cell, *_: f"run-{cell.seed}", echo=lambda *_: None) == {
        "smollm2-135m-bundled|seed=3": "run-3",
        "smollm2-135m-bundled|seed=5": "run-5",
    }
    called = []

    def stopped(cell, *_):
        called.append(cell.seed)
        raise Terminated("stopped by signal 15")

    with pytest.raises(Terminated):
        sweep.execute(store, plan, stopped, echo=lambda *_: None)
    assert called == [3]
    runs = store.search([store.experiment()], f"tags.`{tracking.KIND}` = 'sweep'")
    assert sorted(r.status for r in runs) == ["FINISHED", "KILLED"]


@pytest.mark.parametrize(
    ("leave", "status", "why"),
    [
        (Terminated("stopped by signal 15"), "KILLED", "the sweep stopped (Terminated: stopped by signal 15)"),
        (
            RuntimeError("cell broke"),
            "FAILED",
            "the sweep failed (2 of 2 cells failed: cell smollm2-135m-bundled|seed=3",
        ),
        (None, "FINISHED", "the sweep finished"),
    ],
)
def test_a_sweep_whose_end_the_store_refused_is_ended_as_it_left(
    tracking_uri, tmp_path, monkeypatch, leave, status, why
):
    """The once-seen SIGTERM that left the sweep's own run RUNNING (its cell and arm KILLED): where the store
    refuses the sweep's end (both tries), the end is tried once more after the cells, as the sweep left (KILLED
    when it was stopped, FAILED when a cell failed, else FINISHED), its tag saying why and what the store said;
    what leaves is what ended the sweep. Where the store refuses that too, one line names the run left RUNNING."""
    store, plan = new_sweep(tmp_path)
    end, refused = tracking.LiveRun.end, []

    def refusing(self, status="FINISHED"):
        if not refused and store.get(self.run_id).tags.get(tracking.KIND) == "sweep":
            refused.append(self.run_id)  # both of LiveRun.end's tries, as one
            raise RuntimeError("(sqlite3.OperationalError) database is locked")
        end(self, status)

    def run_cell(cell, *_):
        if leave is not None:
            raise leave
        return f"run-{cell.seed}"

    monkeypatch.setattr(tracking.LiveRun, "end", refusing)
    if leave is None:
        sweep.execute(store, plan, run_cell, echo=lambda *_: None)
    else:
        with pytest.raises(CctkError if isinstance(leave, RuntimeError) else type(leave)):
            sweep.execute(store, plan, run_cell, echo=lambda *_: None)
    (ended,) = store.search([store.experiment()], f"tags.`{tracking.KIND}` = 'sweep'")
    said = ended.tags[tracking.ERROR if status == "FAILED" else tracking.ENDED]
    assert ended.status == status and said.startswith(why), said
    assert said.endswith(
        "and its end was written on a later try (the store refused it twice: "
        "RuntimeError: (sqlite3.OperationalError) database is locked)"
    )
    assert refused == [ended.run_id]


def test_a_sweep_whose_end_the_store_refuses_for_good_says_it_is_left_running(tracking_uri, tmp_path, monkeypatch):
    store, plan = new_sweep(tmp_path)
    end = tracking.LiveRun.end

    def refusing(self, status="FINISHED"):
        if store.get(self.run_id).tags.get(tracking.KIND) == "sweep":
            raise RuntimeError("(sqlite3.OperationalError) database is locked")
        end(self, status)

    def stopped(cell, *_):
        raise Terminated("stopped by signal 15")

    monkeypatch.setattr(tracking.LiveRun, "end", refusing)
    with pytest.raises(tracking.NotEnded) as left:
        sweep.execute(store, plan, stopped, echo=lambda *_: None)
    (sweep_run,) = store.search([store.experiment()], f"tags.`{tracking.KIND}` = 'sweep'")
    assert sweep_run.status == "RUNNING" and isinstance(left.value.leaving, Terminated)
    assert str(left.value) == (
        f"run {sweep_run.run_id} could not be ended KILLED: the store refused the write twice (RuntimeError: "
        f"(sqlite3.OperationalError) database is locked); it shows RUNNING until it is resumed (cctk sweep --resume "
        f"{sweep_run.run_id}) or the store takes the write"
    )


def test_a_failed_cell_stops_no_other_and_fails_the_sweep_naming_it(tracking_uri, tmp_path):
    store, plan = new_sweep(tmp_path)
    said, called = [], []

    def run_cell(cell, *_):
        called.append(cell.seed)
        if cell.seed == 3:
            raise RuntimeError("cell\nbroke")
        return f"run-{cell.seed}"

    with pytest.raises(CctkError) as failed:
        sweep.execute(store, plan, run_cell, echo=said.append)
    line = "1 of 2 cells failed: cell smollm2-135m-bundled|seed=3: RuntimeError: cell broke"
    assert str(failed.value) == line and called == [3, 5]
    failed_line = next(line for line in said if "seed=3" in line)
    finished_line = next(line for line in said if "seed=5" in line)
    assert re.fullmatch(
        r"cell smollm2-135m-bundled\|seed=3: FAILED: RuntimeError: cell broke "
        r"\(1 of 2 cells ended in \d+\.\d min; the other 1 about \d+\.\d min at this pace\)",
        failed_line,
    ), failed_line
    assert re.fullmatch(
        r"cell smollm2-135m-bundled\|seed=5: finished, run run-5 \(2 of 2 cells ended in \d+\.\d min\)",
        finished_line,
    ), finished_line
    (ended,) = store.search([store.experiment()], f"tags.`{tracking.KIND}` = 'sweep'")
    assert ended.status == "FAILED" and ended.tags[tracking.ERROR] == f"CctkError: {line}"


def open_cell_run(store: tracking.Store, plan: sweep.Sweep, seed: int, params: bool = True) -> str:
    """A cell's pipeline run as an attempt leaves it when its process is lost: RUNNING, with a RUNNING arm."""
    from cctk.manuals.configure import make_config
    from cctk.manuals.registry import default

    cell = sweep.Cell("smollm2-135m-bundled", seed)
    tags = {tracking.KIND: "pipeline", tracking.SWEEP: plan.run_id, tracking.CELL: cell.key}
    run = store.start(store.experiment(), "cell", tags, parent=plan.run_id)
    if params:
        run.params(configure.params(default(), make_config(cell.model, "smoke", (seed,))))
    store.start(store.experiment(), "arm", {tracking.KIND: "model", tracking.KEY: "m_correct"}, parent=run)
    return run.run_id


def test_an_attempt_at_a_cell_resumes_the_run_its_lost_attempt_left(tracking_uri, tmp_path):
    """Ray tries a cell again where its node was lost; the new attempt finds the cell's RUNNING run and
    resumes it (the next attempt's number as tag ``cctk.attempt``); one that finished is not run again; one
    lost before it logged its configuration is ended KILLED, saying why, and the cell starts afresh."""
    store, plan = new_sweep(tmp_path)
    with store.run("sweep", "sweep") as opened:
        plan = replace(plan, run_id=opened.run_id)
        lost, early = open_cell_run(store, plan, 3), open_cell_run(store, plan, 5, params=False)
        asked = {}

        def run_cell(cell, profile, out, uri, sweep_id, resume_id, figures, protocol, options):
            asked[cell.seed] = (resume_id, out)
            return resume_id or f"new-{cell.seed}"

        jobs = {seed: sweep._job(plan, sweep.Cell("smollm2-135m-bundled", seed)) for seed in (3, 5)}
        assert sweep.run_attempt(run_cell, jobs[3]) == lost
        assert asked[3] == (lost, str(tmp_path)) and store.get(lost).tags[tracking.ATTEMPT] == "2"
        assert sweep.run_attempt(run_cell, jobs[5]) == "new-5" and asked[5][0] is None
        killed = store.get(early)
        assert killed.status == "KILLED" and killed.tags[tracking.ENDED].startswith("not resumable: its attempt")
        assert [c.status for c in store.children(killed)] == ["KILLED"]
        store.client.set_terminated(lost, "FINISHED")
        asked.clear()
        assert sweep.run_attempt(run_cell, jobs[3]) == lost and not asked


def test_cluster_cells_resumed_on_each_others_nodes_never_take_each_others_files(tracking_uri, tmp_path, monkeypatch):
    """Two cells of one model start their sessions in the same second on two nodes (one name on two disks), both
    are lost (the sweep's driver died) and each is resumed on the other's node: neither may find a folder of its
    session's name there (the other cell's measurements and checkpoints, another seed's, taken for its own), and,
    once finished, they leave nothing on either disk."""
    store, plan = new_sweep(tmp_path)
    nodes = {name: tmp_path / name for name in ("a", "b")}
    with store.run("sweep", "sweep") as opened:
        plan = replace(plan, run_id=opened.run_id, out=None)  # a cluster: each cell writes in its worker's TMPDIR
        jobs = {seed: sweep._job(plan, sweep.Cell("smollm2-135m-bundled", seed)) for seed in (3, 5)}
        found = {}

        def run_cell(cell, profile, out, uri, sweep_id, resume_id, figures, protocol, options):
            session = Path(out) / "20261207-000625_smollm2-135m-bundled"  # session_name: one second, one model
            found[cell.seed] = sorted(p.name for p in session.glob("checkpoints/*"))
            (session / "checkpoints").mkdir(parents=True, exist_ok=True)
            (session / "checkpoints" / f"m_correct-seed{cell.seed}.pt").touch()
            if resume_id is None:
                raise RuntimeError("the driver was lost")
            return resume_id

        for name, seed in (("a", 3), ("b", 5)):
            monkeypatch.setattr(tempfile, "tempdir", str(nodes[name]))
            with pytest.raises(RuntimeError):
                sweep.run_attempt(run_cell, jobs[seed])
            open_cell_run(store, plan, seed)  # the cell's run, as its lost attempt left it
        for name, seed in (("b", 3), ("a", 5)):
            monkeypatch.setattr(tempfile, "tempdir", str(nodes[name]))
            sweep.run_attempt(run_cell, jobs[seed])
    assert found == {3: [], 5: []}  # each found the other's m_correct checkpoint, as its own, before
    # what a finished cell kept is gone; each lost attempt's files stay on the disk it was lost with
    left = {(p.parents[5].name, p.name) for p in tmp_path.glob("[ab]/cctk-sweeps/*/*/*/checkpoints/*")}
    assert left == {("a", "m_correct-seed3.pt"), ("b", "m_correct-seed5.pt")}


def test_settle_ends_what_no_process_runs_failed_or_killed(tracking_uri, tmp_path):
    """When a sweep's cells have all ended, a cell run still RUNNING is ended: FAILED with its cell's error
    (Ray lost it on every attempt), else KILLED (the sweep was stopped); its RUNNING arms with it."""
    store, plan = new_sweep(tmp_path)
    with store.run("sweep", "sweep") as opened:
        plan = replace(plan, run_id=opened.run_id)
        failed, stopped = open_cell_run(store, plan, 3), open_cell_run(store, plan, 5)
        key = sweep.Cell("smollm2-135m-bundled", 3).key
        sweep.settle(store, plan.run_id, {key: sweep.CellEnd(key, error="its Ray task was lost")})
    for run_id, status, tag, why in (
        (failed, "FAILED", tracking.ERROR, "its Ray task was lost"),
        (stopped, "KILLED", tracking.ENDED, "the sweep stopped while this cell ran, and nothing continued it"),
    ):
        run = store.get(run_id)
        assert run.status == status and run.tags[tag] == why
        assert [(c.status, c.tags[tag]) for c in store.children(run)] == [(status, why)]
    assert not [r for r in pipelines(store) if r.status == "RUNNING"]


class FakeRay:
    """Ray as a sweep's driver sees it: tasks run here at once; ``lost`` cells' tasks open their run and are
    lost (their worker died on every attempt), as ``ray.get`` then says."""

    def __init__(self, lost: tuple[int, ...] = (), gpus: float = 0.0):
        import ray

        self.exceptions = ray.exceptions
        self.asked: dict = {}
        self.lost, self.gpus, self.results = lost, gpus, {}

    def remote(self, **resources):
        self.asked.update(resources)
        return self

    def __call__(self, function):
        self.function = function
        return self

    def cluster_resources(self):
        return {"CPU": 2.0, "GPU": self.gpus}

    def wait(self, refs, num_returns):
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref):
        outcome = self.results[ref]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def test_ray_cells_ask_for_their_resources_and_retries_and_a_cell_lost_every_time_fails(tracking_uri, tmp_path):
    """Each task asks for its CPUs, GPUs (default: one where the cluster has a GPU) and Ray's retries; a cell
    whose worker died on every attempt fails in one line and its run ends FAILED, the other cell finishes."""
    import ray

    store, plan = new_sweep(tmp_path)
    fake = FakeRay(lost=(3,), gpus=1.0)

    def submit(run_cell, job):  # what ray.remote(...)(run_attempt).remote(run_cell, job) does here
        ref = f"ref-{job.cell.seed}"
        if job.cell.seed in fake.lost:
            open_cell_run(store, replace(plan, run_id=job.sweep_id), job.cell.seed)
            fake.results[ref] = ray.exceptions.WorkerCrashedError()
        else:
            fake.results[ref] = sweep.run_attempt(run_cell, job)
        return ref

    fake.remote = lambda **resources: (
        fake.asked.update(resources) or (lambda f: type("T", (), {"remote": staticmethod(submit)}))
    )
    with contextlib.ExitStack() as stack:
        stack.enter_context(pytest.MonkeyPatch.context()).setattr(
            sweep, "_connected", lambda s: contextlib.nullcontext(fake)
        )
        with pytest.raises(
            CctkError,
            match=r"^1 of 2 cells failed: cell smollm2-135m-bundled\|seed=3: its Ray task was lost on all 4 attempts",
        ):
            sweep.execute(
                store,
                replace(plan, executor="ray"),
                lambda cell, *_: f"run-{cell.seed}",
                echo=lambda *_: None,
                per_cell=sweep.per_cell(2.0),
            )
    assert fake.asked == {"num_cpus": 2.0, "num_gpus": 1.0, "max_retries": 3}
    (cell_run,) = pipelines(store)
    assert cell_run.status == "FAILED" and "lost on all 4 attempts" in cell_run.tags[tracking.ERROR]


def test_a_cell_given_half_a_gpu_plans_with_half_of_it(monkeypatch):
    """A Ray task given 0.5 GPU: the memory plan counts half the GPU it was given (a fake reader of it here,
    on the CPU), and says so in the device's name."""
    import sys

    import torch

    from cctk.core.lm import compute, device

    class Context:
        def get_assigned_resources(self):
            return {"CPU": 1.0, "GPU": 0.5}

    fake_ray = type(
        "Ray", (), {"is_initialized": staticmethod(lambda: True), "get_runtime_context": staticmethod(Context)}
    )
    monkeypatch.setitem(sys.modules, "ray", fake_ray)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda d=None: (30 * 2**30, 40 * 2**30))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "Fake GPU 40 GB")
    monkeypatch.setattr(compute, "bf16_missing", lambda d: None)
    with sweep.gpu_share():
        room = device.room(torch.device("cuda"))
    assert room.device == 20 * 2**30 and room.name == "cuda (Fake GPU 40 GB, 0.5 of it)"
    assert device.room(torch.device("cuda")).device == 30 * 2**30  # the share ends with the cell
    monkeypatch.setenv("CCTK_GPU_SHARE", "2")
    with pytest.raises(CctkError, match="CCTK_GPU_SHARE='2'"):
        device.gpu_share()


def test_a_cell_that_does_not_fit_its_gpu_fails_in_one_line_and_the_others_run(tracking_uri, tmp_path, monkeypatch):
    """The node of cell seed=3 has a small GPU (a fake memory reader): its memory plan, read on that GPU,
    refuses it in one line naming the GPU; seed=5's node has room and its cell runs."""
    from cctk.core.lm.memory import Room
    from cctk.manuals import registry
    from cctk.manuals.configure import make_config
    from cctk.pipeline import stages

    store, plan = new_sweep(tmp_path)
    rooms = {
        3: Room(2**30, 64 * 2**30, "cuda", "cuda:0 (Fake GPU 1 GB)"),
        5: Room(80 * 2**30, 64 * 2**30, "cuda", "cuda:0 (Fake GPU 80 GB)"),
    }

    def run_cell(cell, *_):  # the checks of stages.run, on the node's GPU
        monkeypatch.setattr(stages, "room", lambda where: rooms[cell.seed])
        monkeypatch.setattr(stages, "check_recipe", lambda recipe, where: None)
        stages.check_device(make_config(cell.model, "smoke", (cell.seed,)), registry.get("v2"), None)
        return f"run-{cell.seed}"

    with pytest.raises(CctkError) as failed:
        sweep.execute(store, plan, run_cell, echo=lambda *_: None)
    assert str(failed.value).startswith(
        "1 of 2 cells failed: cell smollm2-135m-bundled|seed=3: smollm2-135m-bundled with this recipe"
    )
    assert "on cuda:0 (Fake GPU 1 GB)" in str(failed.value) and "\n" not in str(failed.value)


def test_a_cluster_refuses_a_local_store_before_anything_exists(tmp_path, monkeypatch):
    """With --address: a SQLite or file store, or a URI with a password, fails in one line before any store,
    run or connection; a wrong address fails within seconds, naming the connection timeout."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    base = [
        "sweep",
        "--models",
        "smollm2-135m-bundled",
        "--seeds",
        "1,2",
        "--executor",
        "ray",
        "--address",
        "127.0.0.1:1",
    ]
    for extra, message in (
        ([], "cannot reach the local store sqlite:///"),
        (["--tracking", "file:///nowhere/runs"], "is MLflow's filesystem store"),
        (["--tracking", "http://me:secret@127.0.0.1:5000"], "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD"),
        (["--tracking", "server", "--out", "here"], "leave it out"),
    ):
        result = CliRunner().invoke(cli, [*base, *extra])
        assert result.exit_code == 1 and message in result.output.strip().splitlines()[-1], result.output
    assert not list(tmp_path.iterdir())
    with pytest.raises(
        CctkError, match=r"^no Ray cluster answers at 127.0.0.1:1 \(Connection refused; connection timeout 20 s\)"
    ):
        sweep.check_cluster("127.0.0.1:1")
    with pytest.raises(CctkError, match="HOST:PORT"):
        sweep.check_cluster("nowhere")


def test_a_cluster_needs_artifacts_the_workers_reach(tracking_uri, tmp_path):
    store = tracking.connect()
    with pytest.raises(CctkError, match="a local folder that other machines cannot reach"):
        sweep.check_artifacts(store)


def test_workers_get_the_tracking_uri_and_no_credentials(monkeypatch):
    """The cluster's workers are handed the tracking URI, never this machine's MLflow credentials (each
    machine takes its own from its environment)."""
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "secret")
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "me")
    seen = {}

    class Ray:
        def is_initialized(self):
            return False

        def init(self, **kwargs):
            seen.update(kwargs)

        def shutdown(self):
            seen["shut"] = True

    monkeypatch.setattr(sweep, "ray_module", Ray)
    monkeypatch.setattr(sweep, "check_cluster", lambda address: None)
    plan = sweep.Sweep(None, sweep.parse_grid("smollm2-135m-bundled", "1,2"), None, "ray", "h:1", "http://h:5000")
    with sweep._connected(plan):
        pass
    assert seen["runtime_env"] == {"env_vars": {"MLFLOW_TRACKING_URI": "http://h:5000"}} and seen["address"] == "h:1"
    assert "secret" not in repr(seen) and seen["shut"]
    # a local instance on a database with its password: Ray would write its runtime environment into its logs
    seen.clear()
    local = sweep.Sweep(None, plan.grid, None, "ray", None, "postgresql://u:S3cret@h/db")
    with sweep._connected(local):
        pass
    assert seen["runtime_env"] == {"env_vars": {}} and "S3cret" not in repr(seen)
    # the experiment this process names: a cell's access is checked against the sweep's (a worker's machine
    # would take cctk's, where a lab's user may not write)
    seen.clear()
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "alice")
    with sweep._connected(plan):
        pass
    assert seen["runtime_env"] == {
        "env_vars": {"MLFLOW_TRACKING_URI": "http://h:5000", "MLFLOW_EXPERIMENT_NAME": "alice"}
    }


def test_gpus_per_cell_is_one_device_at_most():
    assert sweep.per_cell().gpus is None and sweep.per_cell(2.0, 0.5) == sweep.PerCell(2.0, 0.5)
    with pytest.raises(CctkError, match=r"^--gpus-per-cell must be between 0 and 1 .* got 2$"):
        sweep.per_cell(1.0, 2)
    with pytest.raises(CctkError, match=r"^--cpus-per-cell must be > 0, got 0.0$"):  # each named alone
        sweep.per_cell(0.0)
    import importlib

    assert importlib.import_module("cctk.cli.main").RETRIES == sweep.RETRIES


def test_the_pace_says_what_is_left_from_the_cells_ended_so_far():
    """Four cells, handed out at t=100 s: the first ends at 160 (three left at 60 s a cell), the second at 340
    (two left at 120 s a cell: the pace of both), the last alone."""
    pace = sweep.Pace(4, started=100.0)
    assert pace.tick(160.0) == "(1 of 4 cells ended in 1.0 min; the other 3 about 3.0 min at this pace)"
    assert pace.tick(340.0) == "(2 of 4 cells ended in 4.0 min; the other 2 about 4.0 min at this pace)"
    assert pace.tick(400.0) == "(3 of 4 cells ended in 5.0 min; the other 1 about 1.7 min at this pace)"
    assert pace.tick(430.0) == "(4 of 4 cells ended in 5.5 min)"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--set", "optimizer=adamw8bit"], "--optimizer adamw8bit runs on CUDA devices"),
        (["--set", "precision=fp16"], "--precision fp16 is for CUDA devices"),
        (["--set", "batch_size=100000", "--set", "repeats=2000"], "needs about"),  # 162,000 rows an arm
        (["--set", "epochs=2,2"], "--set epochs=2,2: a value is given twice"),
        (["--set", "epochs=2", "--set", "epochs=3"], "--set epochs is given twice"),
        (["--resume", ""], "--resume needs the SWEEP_ID of the run to continue, got an empty one"),
        (["--resume", "nosuch"], "there is no MLflow store at"),
    ],
)
def test_a_local_sweep_refuses_what_cctk_run_refuses_before_anything_exists(tmp_path, monkeypatch, extra, message):
    """A cell that cannot run on this machine (an 8-bit optimizer or fp16 on a CPU, a batch that does not fit:
    batch 100000 alone fits the smoke recipe, whose arms have 162 rows at most)
    was a FAILED cell of a sweep run that existed; a value twice, one recipe run twice; an empty or unknown
    --resume started a new sweep or created an empty store. Now each is one line, nothing created."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    grid = [] if "--resume" in extra else ["--models", "smollm2-135m-bundled", "--seeds", "1,", "--profile", "smoke"]
    done = CliRunner().invoke(cli, ["sweep", *grid, *extra])
    assert done.exit_code == 1 and len(done.output.strip().splitlines()) == 1, done.output
    assert message in done.output and not list(tmp_path.iterdir()), done.output


def test_a_resumed_sweep_refuses_settings_it_would_ignore(tracking_uri, tmp_path):
    """--models, --seeds, --set ... given with --resume were ignored without a word (the sweep keeps its own)."""
    store, _ = new_sweep(tmp_path)
    with store.run("sweep", "sweep") as opened:
        pass
    for extra in (["--models", "x"], ["--seeds", "3"], ["--set", "epochs=2"], ["--profile", "quick"]):
        done = CliRunner().invoke(cli, ["sweep", "--resume", opened.run_id, *extra])
        option = extra[0]
        assert done.exit_code == 1 and f"leave out {option}" in done.output, done.output


def test_a_sweep_of_many_seeds_resumes_with_every_seed(tracking_uri):
    """1,500 seeds log a `seeds` parameter of 8,999 characters: MLflow cut it to 6,000, and --resume read back
    a grid of the seeds that fitted. The parameter goes whole into an artifact and is read back from it."""
    from cctk.store import tracking

    store = tracking.connect()
    grid = sweep.parse_grid("smollm2-135m-bundled", ",".join(str(10000 + i) for i in range(1500)))
    run = store.start(store.experiment(), "sweep", {tracking.KIND: "sweep"})
    plan = sweep.Sweep(None, grid, Path("out"), "local", None, tracking_uri)
    sweep._describe(run, plan)
    assert store.client.get_run(run.run_id).data.params["seeds"].endswith("whole in the artifact params/seeds.txt")
    back = sweep.reopen_sweep(store, run.run_id)
    assert back.grid == grid and len(back.grid.cells()) == 1500
    note = store.client.get_run(run.run_id).data.tags["mlflow.note.content"]  # MLflow cut one past 8,000
    assert note == (
        "cctk sweep: 1500 pipelines over models smollm2-135m-bundled, seeds "
        + ", ".join(str(10000 + i) for i in range(10))
        + ", ... (1500 in all)"
    )
