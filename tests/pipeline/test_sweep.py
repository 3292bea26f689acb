"""cctk sweep: the grid, its parameters, the store URI every worker uses, and one-line errors."""

from __future__ import annotations

import contextlib
import json

import pytest
from click.testing import CliRunner

from cctk.cli.main import cli
from cctk.core.errors import CctkError, Terminated
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


@pytest.mark.parametrize(
    ("models", "seeds", "sets", "message"),
    [
        ("nope", "1,2", (), "unknown model 'nope'"),
        ("smollm2-135m-bundled", "1,1", (), "repeats a seed"),
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
    server.uri = "http://127.0.0.1:5000"
    assert sweep.absolute_store(server) == "http://127.0.0.1:5000"


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


@pytest.mark.parametrize(
    ("raised", "status"),
    [(None, "FINISHED"), (RuntimeError("cell broke"), "FAILED"), (Terminated("stopped by signal 15"), "KILLED")],
)
def test_a_sweep_run_ends_as_its_cells_end(tracking_uri, tmp_path, raised, status):
    """The sweep run goes through the run lifecycle: FINISHED, FAILED with the error as a tag, or KILLED
    when a cell is stopped by SIGTERM (which cctk's CLI raises as ``Terminated``)."""
    store = tracking.connect()
    plan = sweep.open_sweep(
        store, sweep.parse_grid("smollm2-135m-bundled", "3,5", (), "smoke"), tmp_path, "local", None
    )

    def run_cell(cell, *args):
        if raised is not None:
            raise raised
        return f"run-{cell.seed}"

    with pytest.raises(type(raised)) if raised else contextlib.nullcontext():
        assert sweep.execute(store, plan, run_cell, echo=lambda *_: None) == {
            "smollm2-135m-bundled|seed=3": "run-3",
            "smollm2-135m-bundled|seed=5": "run-5",
        }
    (ended,) = store.search([store.experiment()], f"tags.`{tracking.KIND}` = 'sweep'")
    assert ended.status == status and ended.tags[tracking.KIND] == "sweep"
    assert ended.tags.get(tracking.ERROR) == ("RuntimeError: cell broke" if status == "FAILED" else None)


def test_ray_cells_ask_for_the_gpus_they_use(monkeypatch):
    """Ray hides the GPUs from a task that asks for none: a cell asks for --gpus-per-cell (default: 1 where
    CUDA is here, 0 elsewhere), and its CPUs."""
    import torch

    from cctk.pipeline import sweep as sweep_module

    asked = {}

    class FakeRay:
        def is_initialized(self):
            return True

        def remote(self, **resources):
            asked.update(resources)
            raise RuntimeError("stop here")

    monkeypatch.setattr(sweep_module, "ray_module", lambda: FakeRay())
    plan = type("Plan", (), {"address": None, "tracking_uri": "sqlite:///x.db"})()
    with pytest.raises(RuntimeError, match="stop here"):
        sweep_module._ray(plan, [], None, print, sweep_module.per_cell(2.0, 0.5))
    assert asked == {"num_cpus": 2.0, "num_gpus": 0.5}
    assert sweep_module.per_cell().gpus == (1.0 if torch.cuda.is_available() else 0.0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a CUDA machine: a GPU a cell by default
    assert sweep_module.per_cell().gpus == 1.0
    with pytest.raises(CctkError, match=r"--gpus-per-cell >= 0, got 1.0 and -1"):
        sweep_module.per_cell(1.0, -1)
