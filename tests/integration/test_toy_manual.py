"""A third manual from a package outside cctk: the toy manual of tests/toy_manual_dist (its own facts, two arms, one
table, one figure), built into a wheel whose metadata registers it (entry point ``toy`` of group ``cctk.manuals``)
and installed by pip into a folder of its own, with nothing of cctk edited. It runs end to end on the tiny model
through every command a manual meets: ``cctk run --protocol toy`` (a parent run, a nested run per model, its table
and figure), ``cctk report``, ``cctk.results.load`` (folder and run id), ``cctk sweep --protocol toy``,
``cctk compare`` of the sweep and ``cctk export``. Integration: the tiny model trains."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import mlflow
import pandas as pd
import pytest
from click.testing import CliRunner

from cctk import results
from cctk.cli.main import cli
from cctk.core.readings import read
from cctk.manuals import registry

DIST = Path(__file__).resolve().parents[1] / "toy_manual_dist"


def build_wheel(project: Path, out: Path) -> Path:
    """The wheel of ``project`` (its package beside its pyproject.toml), as a build backend writes one: the package,
    METADATA, WHEEL, entry_points.txt from ``[project.entry-points]`` and RECORD."""
    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    name, version = meta["name"], meta["version"]
    info = f"{name.replace('-', '_')}-{version}.dist-info"
    groups = "".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()) + "\n"
        for group, points in meta["entry-points"].items()
    )
    files = {p.relative_to(project).as_posix(): p.read_bytes() for p in (project / "toy_manual").glob("*.py")}
    files[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files[f"{info}/entry_points.txt"] = groups.encode()

    def digest(data: bytes) -> str:
        return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()

    record = "".join(f"{path},sha256={digest(data)},{len(data)}\n" for path, data in files.items())
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    wheel = out / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return wheel


@pytest.fixture(scope="module")
def toy_site(tmp_path_factory) -> Path:
    """The toy manual's wheel installed by pip into a folder of its own (a package outside cctk)."""
    root = tmp_path_factory.mktemp("toy")
    wheel = build_wheel(DIST, root)
    site = root / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--disable-pip-version-check"]
    subprocess.run([*pip, "--target", str(site), str(wheel)], check=True, capture_output=True, text=True)
    assert (site / "cctk_toy_manual-0.1.0.dist-info" / "entry_points.txt").is_file()
    return site


@pytest.fixture
def toy(toy_site, monkeypatch, tmp_path, new_store):
    """The installed toy manual on this process's path, read afresh by the registry; a store of the test's own."""
    monkeypatch.syspath_prepend(str(toy_site))
    registry.refresh()
    uri = new_store(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("CCTK_CACHE", str(tmp_path / "cache"))
    yield uri
    registry.refresh()


def cctk(*args: str) -> str:
    done = CliRunner().invoke(cli, list(args))
    assert done.exit_code == 0, done.output
    return done.output


def test_the_registry_finds_the_installed_manual_and_nothing_else_of_it_was_edited(toy, toy_site):
    manual = registry.get("toy")
    assert type(manual).__module__ == "toy_manual.manual" and Path(sys.modules["toy_manual"].__file__).is_relative_to(
        toy_site
    )
    assert registry.names() == ("v2", "v1", "toy")
    assert "toy" not in (Path(registry.__file__)).read_text()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(toy_site), os.getcwd()])}  # a user's process: installed
    shown = subprocess.run([sys.executable, "-m", "cctk", "run", "--help"], env=env, capture_output=True, text=True)
    assert "toy (manual 0.1.0: two arms on the digits of the sums)" in " ".join(shown.stdout.split())


def test_the_toy_manual_runs_end_to_end(tiny_dir, tmp_path, toy):
    from toy_manual.facts import digits

    uri = toy
    args = ["run", "--protocol", "toy", "--model", str(tiny_dir), "--profile", "smoke", "--seed", "5"]
    said = cctk(*args, "--no-system-metrics", "--out", str(tmp_path / "out"))
    assert "protocol toy finished" in said and "last digits: " in said

    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("cctk")
    (parent,) = client.search_runs([experiment.experiment_id], "tags.`cctk.kind` = 'pipeline'")
    assert parent.info.status == "FINISHED" and parent.data.tags["cctk.protocol"] == "toy"
    assert parent.data.params["protocol"] == "toy" and parent.data.params["candidates"] == "0..9"
    assert {"last_hits", "tens_hits"} <= set(parent.data.metrics)
    assert "--protocol toy" in parent.data.tags["cctk.reproduce"]
    nested = client.search_runs([experiment.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    assert {r.data.tags["cctk.key"]: r.info.status for r in nested} == dict.fromkeys(
        ("base", "last", "tens"), "FINISHED"
    )
    assert {r.data.tags["cctk.key"]: r.data.tags["cctk.parent"] for r in nested} == {
        "base": "",
        "last": "base",
        "tens": "base",
    }
    assert {r.data.params.get("corpus") for r in nested} == {None, "last digit", "tens digit"}

    (folder,) = (tmp_path / "out").iterdir()
    loaded = results.load(folder)
    assert loaded.protocol == "toy" and list(loaded.tables) == ["table01"] and list(loaded.figures) == ["hits_by_model"]
    assert {p.suffix for p in loaded.figure_files["hits_by_model"].values()} == {".png", ".pdf", ".eps"}
    assert loaded.info.design.digits == ("last", "tens") and loaded.info.training["last"].parent == "base model"
    table = loaded.tables["table01"].set_index(["model_key", "target_key"])
    for key in ("base", "last", "tens"):  # every hit count is the measurement's own: argmax on the digit
        for target in ("last", "tens"):
            hits = int(read(loaded.measurement(key), digits(target))["hit"].sum())
            assert table.loc[(key, target), "hits"] == hits
    assert parent.data.metrics["last_hits"] == table.loc[("last", "last"), "hits"]
    by_id = results.load(parent.info.run_id)
    pd.testing.assert_frame_equal(by_id.tables["table01"], loaded.tables["table01"])

    csv = folder / "tables" / "table01_hits_on_the_digits" / "table01_hits_on_the_digits.csv"
    written = csv.read_bytes()
    again = cctk("report", str(folder), "--out", str(tmp_path / "again"))
    assert "re-rendered 1 figure, 1 table and the reports" in again
    assert (tmp_path / "again" / folder.name / csv.relative_to(folder)).read_bytes() == written
    assert "The digits" in (tmp_path / "again" / folder.name / "report.html").read_text()

    paper = tmp_path / "paper"
    cctk("export", parent.info.run_id, "--latex", str(paper))
    assert "tab:table01" in (paper / "tables" / "table01.tex").read_text()
    assert "\\input{tables/table01.tex}" in (paper / "paper.tex").read_text()


def test_a_sweep_of_the_toy_manual_nests_its_cells_and_compares(tiny_dir, tmp_path, toy):
    """``cctk sweep --protocol toy``: two seeds, each a toy pipeline nested under the sweep (its parameters name the
    manual), then ``cctk compare --sweep``: runs.csv lists both under protocol toy (it compares nothing more: the
    toy manual is not ``Comparable``). An option of another manual is one line before any work."""
    refused = CliRunner().invoke(cli, ["sweep", "--protocol", "toy", "--models", "m", "--seeds", "1", "--parts", "A"])
    assert refused.exit_code == 1 and "--parts has no meaning under --protocol toy" in refused.output
    out = tmp_path / "cells"
    said = cctk(
        "sweep",
        "--protocol",
        "toy",
        "--models",
        str(tiny_dir),
        "--seeds",
        "3,4",
        "--profile",
        "smoke",
        "--out",
        str(out),
    )
    assert "cells run with --protocol toy" in said
    client = mlflow.MlflowClient(toy)
    experiment = client.get_experiment_by_name("cctk")
    (sweep,) = client.search_runs([experiment.experiment_id], "tags.`cctk.kind` = 'sweep'")
    assert sweep.info.status == "FINISHED" and sweep.data.params["protocol"] == "toy"
    cells = client.search_runs([experiment.experiment_id], f"tags.`cctk.sweep` = '{sweep.info.run_id}'")
    assert sorted((c.data.tags["cctk.protocol"], c.data.params["seed"], c.info.status) for c in cells) == [
        ("toy", "3", "FINISHED"),
        ("toy", "4", "FINISHED"),
    ]
    compared = tmp_path / "compared"
    cctk("compare", "--sweep", sweep.info.run_id, "--out", str(compared))
    runs = pd.read_csv(compared / "runs.csv")
    assert sorted(runs["seed"]) == [3, 4] and set(runs["protocol"]) == {"toy"}
