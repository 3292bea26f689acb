"""The commit a run records, from a fresh ``git clone`` of this repository (issue 48): a pipeline run from the
clone (tiny model, smoke, Part A, no figures, from a folder outside it) carries ``git rev-parse HEAD`` in its
MLflow tags (``mlflow.source.git.commit``, ``cctk.git.*``), its run_info.json and ``cctk cite``; the same clone
with a tracked file changed records ``dirty``. Integration: a clone and two processes of the clone's cctk."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
from click.testing import CliRunner

from cctk.cli.main import cli

pytestmark = pytest.mark.slow

REPOSITORY = Path(__file__).resolve().parents[2]
LEAN = ("--parts", "A", "--no-figures", "--no-system-metrics")


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A fresh clone of the commit these tests run from (its committed code, nothing of the work tree)."""
    found = subprocess.run(["git", "-C", str(REPOSITORY), "rev-parse", "HEAD"], capture_output=True, text=True)
    if found.returncode != 0:
        pytest.skip(f"{REPOSITORY} is not a git checkout: there is no commit to clone")
    folder = tmp_path_factory.mktemp("clone") / "cctk"
    subprocess.run(["git", "clone", "--quiet", str(REPOSITORY), str(folder)], check=True, capture_output=True)
    return folder


def _cctk(clone: Path, work: Path, *args: str) -> subprocess.CompletedProcess:
    """``python ARGS`` importing the clone's cctk (PYTHONPATH), run in ``work`` (outside the clone), its
    store there."""
    env = {**os.environ, "PYTHONPATH": str(clone), "OMP_NUM_THREADS": "1", "MLFLOW_TRACKING_URI": _uri(work)}
    done = subprocess.run([sys.executable, *args], cwd=work, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _uri(work: Path) -> str:
    return f"sqlite:///{work}/mlflow.db"


def test_a_run_from_a_fresh_clone_records_its_commit_and_a_changed_tree_records_dirty(
    clone, tiny_dir, tmp_path, new_store
):
    head = _git(clone, "rev-parse", "HEAD")
    work = tmp_path / "work"  # outside the clone: the commit is found from the package, not the working folder
    assert new_store(work) == _uri(work)  # its store, already migrated
    found = _cctk(clone, work, "-c", "import cctk; print(cctk.__file__)")
    assert Path(found.stdout.strip()).parent == clone / "cctk"  # the clone's code runs, not this checkout's
    _cctk(clone, work, "-m", "cctk", "run", "--model", str(tiny_dir), "--profile", "smoke", "--seed", "7", *LEAN)

    client = mlflow.MlflowClient(_uri(work))
    experiment = client.get_experiment_by_name("cctk").experiment_id
    (parent,) = client.search_runs([experiment], "tags.`cctk.kind` = 'pipeline'")
    arms = client.search_runs([experiment], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    assert len(arms) == 3  # base model, correct sums, fabricated answers
    for run in [parent, *arms]:
        tags = run.data.tags
        assert tags.get("mlflow.source.git.commit") == head, run.info.run_name
        assert (tags.get("cctk.git.dirty"), tags.get("cctk.git.state")) == ("false", "clean"), run.info.run_name
    assert parent.data.tags["cctk.git.commit"] == head

    (folder,) = (work / "outputs").iterdir()
    info = json.loads((folder / "run_info.json").read_text())
    assert info["provenance"]["git"] == {"commit": head, "dirty": False}
    cited = CliRunner().invoke(cli, ["cite", str(folder)])
    assert cited.exit_code == 0, cited.output
    assert re.search(r"^\s+commit\s+= \{(\w+)\},$", cited.output, flags=re.M)[1] == head

    # A tracked file changed: the next run from the clone records the same commit, dirty.
    readme = clone / "README.md"
    readme.write_text(readme.read_text() + "\nA local change.\n")
    _cctk(clone, work, "-m", "cctk", "measure", "--model", str(tiny_dir), "--out", str(work / "measured"))
    (measured,) = client.search_runs([experiment], "tags.`cctk.kind` = 'measure'")
    tags = measured.data.tags
    assert tags.get("mlflow.source.git.commit") == head
    assert (tags.get("cctk.git.dirty"), tags.get("cctk.git.state")) == ("true", "dirty")
