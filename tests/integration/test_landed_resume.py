"""A pipeline the landed code started and was killed in (tests/data/landed_3c00e48: v2, parts A, its base model
measured, killed as its first arm trained) resumes with today's code: the base model taken from its finished run,
the two arms trained, the run FINISHED with its tables. Integration: the tiny model trains."""

from __future__ import annotations

import shutil

import mlflow
from builders import Landed
from click.testing import CliRunner

from cctk import results
from cctk.cli.main import cli


def test_a_run_the_landed_code_left_killed_resumes(tiny_dir, tmp_path, monkeypatch):
    landed = Landed(tmp_path)
    shutil.copytree(tiny_dir, tmp_path / "tiny")  # the model it ran on, where it was (``--model tiny``)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", landed.uri)
    client = mlflow.MlflowClient(landed.uri)
    (killed,) = client.search_runs(["1"], f"tags.`cctk.session` = '{Landed.KILLED}'")
    assert killed.info.status == "KILLED"
    base = landed.session(Landed.KILLED) / "measurements" / "base_model.csv"
    measured = base.read_bytes()

    done = CliRunner().invoke(cli, ["run", "--resume", killed.info.run_id, "--no-figures", "--out", "outputs"])
    assert done.exit_code == 0, done.output
    assert "1 of 3 models already finished" in done.output
    assert client.get_run(killed.info.run_id).info.status == "FINISHED"
    assert base.read_bytes() == measured  # taken from its run, not measured again
    loaded = results.load(landed.session(Landed.KILLED))
    assert loaded.info.seeds.values == (11, 12, 13, 14, 15) and loaded.parts == ("A",)
    assert list(loaded.tables) == ["table01", "table09", "table11"]
    assert sorted(loaded.info.training) == ["m_correct", "m_random"]
