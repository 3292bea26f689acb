"""Fixtures: the bundled tokenizer, tiny random real-architecture models, a tracking store of the test's
own, and a written session folder. What they are built from lives in ``builders`` (tests import from it)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from builders import RUN, SEED, small_tokenizer, synthetic_results, tiny_model, write_session

INTEGRATION = Path(__file__).parent / "integration"


def pytest_collection_modifyitems(config, items):
    """Everything under tests/integration/ is an end-to-end run (bundled model, servers, whole
    pipelines): marked ``integration``, left out of ``make test-fast``, and collected first, so that
    under ``make test``'s workers (a module each, in this order) the many short unit modules fill
    the workers' ends instead of one long run holding the last minutes alone."""
    for item in items:
        if INTEGRATION in Path(item.fspath).parents:
            item.add_marker(pytest.mark.integration)
    items.sort(key=lambda item: INTEGRATION not in Path(item.fspath).parents)  # stable: order kept within each


CHECKOUT_STORE = Path(__file__).parents[1] / "mlruns"  # the default store of a command run in the checkout


def _store_state() -> tuple[int, int, int]:
    """The checkout's ./mlruns as it stands: its database's time and size, and the runs' folders under it."""
    database = CHECKOUT_STORE / "mlflow.db"
    written = (database.stat().st_mtime_ns, database.stat().st_size) if database.exists() else (0, 0)
    return (*written, sum(1 for _ in CHECKOUT_STORE.glob("*/*")))


def pytest_sessionstart(session):
    session.config._checkout_store = _store_state()


def pytest_sessionfinish(session, exitstatus):
    """No test logs to the checkout's default store (./mlruns, where MLFLOW_TRACKING_URI is unset) nor puts
    artifacts there (MLflow's default artifact root of a store without one): a test without the
    ``tracking_uri`` fixture (or one that undid it with ``monkeypatch.undo()``) piled its runs into the
    developer's own. Checked once, by the process that ran or gathered every test (under xdist the controller:
    which test it was, its runs' params and artifacts name)."""
    if hasattr(session.config, "workerinput") or _store_state() == session.config._checkout_store:
        return
    print(
        f"\nFAILED: a test wrote into the checkout's default store {CHECKOUT_STORE}: give it the tracking_uri fixture"
    )
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def tokenizer():
    """The real SmolLM2 tokenizer, read from the bundled GGUF (no download)."""
    from transformers import AutoTokenizer

    from cctk.core.lm.models import bundled_gguf

    folder, name = bundled_gguf()
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    tok.pad_token = tok.pad_token or tok.eos_token
    return tok


@pytest.fixture(scope="session")
def make_tiny():
    """``make_tiny(arch, vocab_size, seed=0)``: a fresh tiny model (llama, qwen2, gpt_neox, phi)."""
    return tiny_model


@pytest.fixture(scope="session")
def tiny(tokenizer):
    return tiny_model("llama", len(tokenizer))


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory, tokenizer):
    """A tiny Llama saved with the bundled tokenizer retrained to 275 tokens (``builders.small_tokenizer``): a
    local model directory for pipeline runs, whose arithmetic is in its blocks, not in a 49,152-token head."""
    folder = tmp_path_factory.mktemp("tiny")
    small = small_tokenizer(tokenizer)
    tiny_model("llama", len(small)).save_pretrained(folder)
    small.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_dir_bundled(tmp_path_factory, tokenizer):
    """A tiny Llama saved with the bundled tokenizer itself (49,152 tokens): for the tests whose text is English
    prose (KR-Test's passages and items), where the tokens a sentence splits into are what is measured."""
    folder = tmp_path_factory.mktemp("tiny_bundled")
    tiny_model("llama", len(tokenizer)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


FAKE_NVIDIA_SMI = """#!/bin/sh
# nvidia-smi of a machine with a Tesla T4 on driver 535 (CUDA 12.2 at most)
case "$*" in
*-L*) echo "GPU 0: Tesla T4 (UUID: GPU-5a1c0c2e-0000-0000-0000-000000000000)" ;;
*--query-gpu=driver_version*) echo "535.183.01" ;;
*) echo "| NVIDIA-SMI 535.183.01   Driver Version: 535.183.01   CUDA Version: 12.2 |" ;;
esac
"""


@pytest.fixture
def fake_nvidia_smi(tmp_path_factory, monkeypatch):
    """A machine whose ``nvidia-smi`` answers (a T4, driver 535) while this torch (the CPU build) cannot use
    it: the fake first on PATH, for this process and the commands it starts."""
    folder = tmp_path_factory.mktemp("nvidia")
    script = folder / "nvidia-smi"
    script.write_text(FAKE_NVIDIA_SMI)
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ.get('PATH', '')}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return script


@pytest.fixture(scope="session", autouse=True)
def _gemm_peak_pinned():
    """The GEMM peak measured once per test process and pinned (``CCTK_GEMM_PEAK_GFLOPS``) for it and every
    ``cctk`` process its tests start: a run measures it at its start and end (1.5 s of GEMMs and a warm-up
    each), and no test checks the rate a pipeline run measured, only that it logged one. Still measured:
    ``compute.peak_flops`` itself and the pin's refusals (tests/core/lm/test_compute.py, which unsets it where
    it measures), and the benchmarks, which measure whatever the environment pins
    (tests/integration/test_bench_pipeline.py reads their before/after peaks). A pin of the caller's is kept."""
    from cctk.core.lm import compute

    if os.environ.get(compute.PINNED):
        yield
        return
    os.environ[compute.PINNED] = f"{compute.peak_flops() / 1e9:.1f}"
    yield
    os.environ.pop(compute.PINNED, None)


@pytest.fixture(autouse=True)
def _no_global_tracking_uri():
    """No test may leave MLflow's global tracking URI set: ``mlflow.set_tracking_uri`` also sets
    MLFLOW_TRACKING_URI in os.environ, and every later test's clients and CLI runs would log to that
    store (a test that once did pointed the rest of the suite at a server it had shut down)."""
    import os
    import sys

    before = os.environ.get("MLFLOW_TRACKING_URI")
    yield  # torn down after monkeypatch has restored what it set
    utils = sys.modules.get("mlflow.tracking._tracking_service.utils")
    leaked = utils is not None and getattr(utils, "_tracking_uri", None) is not None
    if leaked:
        utils._tracking_uri = None
    if os.environ.get("MLFLOW_TRACKING_URI") != before:
        leaked = True
        if before is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = before
    assert not leaked, "this test set MLflow's global tracking URI (use MlflowClient(uri))"


@pytest.fixture(scope="session")
def migrated_store(tmp_path_factory) -> Path:
    """An empty SQLite tracking store with MLflow's migrations applied, made once per test process: a new
    store pays about 4 s of migrations on first use, which every test that opens one would pay again."""
    import mlflow

    path = tmp_path_factory.mktemp("template") / "mlflow.db"
    mlflow.MlflowClient(f"sqlite:///{path}").search_experiments()  # creates the tables and the Default experiment
    return path


@pytest.fixture(scope="session")
def new_store(migrated_store):
    """``new_store(folder, name="mlflow.db")``: the URI of a new, empty SQLite store at ``folder/name``, a copy
    of the migrated template (what MLflow would create there on first use, without paying the migrations)."""
    import shutil

    def make(folder: Path, name: str = "mlflow.db") -> str:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(migrated_store, Path(folder) / name)
        return f"sqlite:///{folder}/{name}"

    return make


@pytest.fixture
def tracking_uri(tmp_path, monkeypatch, new_store):
    """An embedded SQLite store of the test's own (already migrated), with MLFLOW_TRACKING_URI pointing at it."""
    uri = new_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


@pytest.fixture
def unopened_tracking_uri(tmp_path, monkeypatch):
    """MLFLOW_TRACKING_URI at an SQLite store not made yet (``tmp_path/mlflow.db`` absent): for the tests that
    check a command failed before it opened any store (the file still absent after it)."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


@contextmanager
def built_once(tmp_path_factory, name: str) -> Iterator[tuple[Path, bool]]:
    """``(folder, missing)``: a folder of this run of the suite, shared by its test processes (pytest-xdist's
    workers), under a lock held while the one that finds it ``missing`` fills it; marked complete after, so a
    process stopped half way leaves it to be built again."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the run's, above each worker's
    folder, complete = root / name, root / f"{name}.complete"
    with FileLock(str(root / f"{name}.lock")):
        if complete.exists():
            yield folder, False
            return
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        yield folder, True
        complete.touch()


@pytest.fixture(scope="session")
def written_session(tmp_path_factory):
    """(session folder, results, tables) of the synthetic results, written once per run of the suite (its test
    processes share the folder; none may change it) with every figure as PNG only (PDF and EPS are the slow
    formats; tests/integration/test_outputs_full.py writes all three and checks them)."""
    from cctk.manuals.configure import make_config
    from cctk.manuals.v2.parts import compute_tables

    results = synthetic_results()
    tables = compute_tables(results)
    with built_once(tmp_path_factory, "written_session") as (root, missing):
        if missing:
            config = make_config("smollm2-135m-bundled", "quick", (SEED,))
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr("cctk.figures.common.FORMATS", ("png",))
                write_session(root, results, tables, config)
    return root / RUN["session"], results, tables
