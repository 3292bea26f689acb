"""Bad input to ``cctk run`` and ``cctk sweep`` fails in one line before any session folder or MLflow run
exists (issue 31): a held-out share that empties a group, an --out that cannot hold files, an unknown
device, a model folder whose config.json is broken."""

import os
import shutil

import pytest
from click.testing import CliRunner

from cctk.cli.main import cli
from cctk.store import tracking


def _one_line_error(result, start: str) -> None:
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {start}"), lines


def _no_run(tmp_path) -> None:
    assert (
        not (tmp_path / "mlflow.db").exists() or tracking.connect().search([tracking.connect().experiment()], "") == []
    )


@pytest.fixture
def broken_model(tiny_dir, tmp_path):
    folder = tmp_path / "broken"
    shutil.copytree(tiny_dir, folder)
    (folder / "config.json").write_text('{"model_type": "llama", "hidden_size": ')  # cut short
    return folder


@pytest.mark.parametrize(
    ("holdout", "message"),
    [
        ("0.001", "holdout=0.001 holds out 0 of the 81 additions"),
        ("0.999", "holdout=0.999 holds out 81 of the 81 additions"),
    ],
)
def test_a_holdout_that_empties_a_group_fails_in_one_line(holdout, message, tiny_dir, tmp_path, tracking_uri):
    result = CliRunner().invoke(
        cli,
        ["run", "--model", str(tiny_dir), "--profile", "smoke", "--holdout", holdout, "--out", str(tmp_path / "out")],
    )
    _one_line_error(result, message)
    assert not (tmp_path / "out").exists()
    _no_run(tmp_path)


def _below_a_file(tmp_path):
    (tmp_path / "file").write_text("x")
    return tmp_path / "file" / "out"


def _read_only(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    return folder / "out"


@pytest.mark.parametrize("where", [_below_a_file, lambda _: "/proc/cctk-out", _read_only])
def test_an_out_that_cannot_hold_files_fails_in_one_line(where, tiny_dir, tmp_path, tracking_uri):
    out = where(tmp_path)
    if where is _read_only and os.geteuid() == 0:
        pytest.skip("root writes into a read-only mode folder")
    result = CliRunner().invoke(cli, ["run", "--model", str(tiny_dir), "--profile", "smoke", "--out", str(out)])
    _one_line_error(result, f"--out {os.path.abspath(out)} cannot hold the outputs: ")
    _no_run(tmp_path)


def test_an_unknown_device_fails_in_one_line(tiny_dir, tmp_path, tracking_uri):
    result = CliRunner().invoke(cli, ["run", "--model", str(tiny_dir), "--device", "tpu", "--out", str(tmp_path / "o")])
    _one_line_error(result, "--device 'tpu' is not a device cctk runs on")
    assert not (tmp_path / "o").exists()


def test_run_refuses_a_model_folder_with_a_broken_config(broken_model, tmp_path, tracking_uri):
    result = CliRunner().invoke(
        cli, ["run", "--model", str(broken_model), "--profile", "smoke", "--out", str(tmp_path / "out")]
    )
    _one_line_error(result, f"cannot read the configuration of {broken_model}")
    assert not (tmp_path / "out").exists()
    _no_run(tmp_path)


def test_sweep_checks_every_cells_model_before_any_cell(broken_model, tiny_dir, tmp_path, tracking_uri):
    """The good model comes first: without the check its cells would run, then the broken one fail."""
    result = CliRunner().invoke(
        cli,
        [
            "sweep",
            "--models",
            f"{tiny_dir},{broken_model}",
            "--seeds",
            "1,2",
            "--profile",
            "smoke",
            "--out",
            str(tmp_path / "out"),
        ],
    )
    _one_line_error(result, f"cannot read the configuration of {broken_model}")
    assert not (tmp_path / "out").exists()
    _no_run(tmp_path)


# every command with an --out folder, its other required options given (nothing of them is read first)
OUT_COMMANDS = {
    "measure": ["measure"],
    "compare": ["compare", "--runs", "a,b"],
    "report": ["report", "nowhere"],
    "krtest eval": ["krtest", "eval", "--questions", "q.jsonl"],
    "krtest train": ["krtest", "train", "--corpus", "c.txt", "--questions", "q.jsonl"],
    "krtest generate": ["krtest", "generate"],
    "krtest oracle": ["krtest", "oracle", "--oracle", "o"],
    "krtest study": ["krtest", "study"],
}


@pytest.mark.parametrize("command", OUT_COMMANDS)
@pytest.mark.parametrize("where", [_below_a_file, lambda _: "/proc/cctk-out"])
def test_every_out_is_checked_before_any_work(command, where, tmp_path, unopened_tracking_uri):
    """measure, compare, report and the KR-Test commands refuse an --out that cannot hold files in one line,
    as the options are read: no store is opened, no model loaded, nothing made."""
    out = where(tmp_path)
    result = CliRunner().invoke(cli, [*OUT_COMMANDS[command], "--out", str(out)])
    _one_line_error(result, f"--out {os.path.abspath(out)} cannot hold the outputs: ")
    assert not (tmp_path / "mlflow.db").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["run", "--model", "smollm2-135m-bundeld"],
            "unknown model 'smollm2-135m-bundeld' (did you mean 'smollm2-135m-bundled'?); choose a roster key",
        ),
        (["run", "--parts", "A,PARTC"], "unknown part 'PARTC' in --parts A,PARTC (did you mean 'C'?): choose among"),
        (["run", "--profile", "quik"], "unknown profile 'quik' (did you mean 'quick'?); choose one of: auto, paper"),
    ],
)
def test_a_near_miss_gets_did_you_mean(args, message, tmp_path, tracking_uri):
    """Issue 48: a name one letter off names the one meant, in the same one line, before any work."""
    _one_line_error(CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "out")]), message)
    assert not (tmp_path / "out").exists()
    _no_run(tmp_path)


def test_a_fictional_set_replaces_another_generation_only_with_overwrite(tmp_path):
    """krtest generate --seed S --out DIR wrote over a folder's questions (another seed's, a teacher's) without
    a word, while --overwrite is what the help says replaces one: the same set again is no change, another is
    one line with nothing written, --overwrite replaces it."""
    generate = ["krtest", "generate", "--out", str(tmp_path / "kr")]
    assert CliRunner().invoke(cli, [*generate, "--seed", "0"]).exit_code == 0
    first = (tmp_path / "kr" / "questions.jsonl").read_bytes()
    assert CliRunner().invoke(cli, [*generate, "--seed", "0"]).exit_code == 0  # the same set: no change
    refused = CliRunner().invoke(cli, [*generate, "--seed", "1"])
    assert refused.exit_code == 1 and "holds another corpus.txt already: --overwrite replaces it" in refused.output
    assert (tmp_path / "kr" / "questions.jsonl").read_bytes() == first
    assert CliRunner().invoke(cli, [*generate, "--seed", "1", "--overwrite"]).exit_code == 0
    assert (tmp_path / "kr" / "questions.jsonl").read_bytes() != first


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--model", ""], "--model is empty: give a model key"),
        (["krtest", "train", "--method", "lora"], "--method lora needs --modules, the LoRA placement"),
        (["krtest", "train", "--validation", "nosuch.txt"], "validation file nosuch.txt does not exist"),
        (["sweep", "--models", "smollm2-135m-bundled", "--seeds", "1", "--cpus-per-cell", "0"], "got 0.0"),
        (["run", "--seed", ""], "--seed is empty: give seeds, or leave --seed out to draw fresh ones"),
        (["sweep", "--models", "smollm2-135m-bundled", "--seeds", "1,,2"], "--seeds takes a count N or seeds S1,S2"),
        (["krtest", "study", "--seeds", "3,,4"], "--seeds takes a count N or seeds S1,S2,..., got '3,,4'"),
        (["models", "--profile", "quick"], "--profile is the recipe of --fits' table; the roster alone has none"),
        (
            ["krtest", "eval", "--questions", "q.jsonl", "--tokenizer", "gpt2", "--out", "o"],
            "--tokenizer names what cut a corpus into --segment tokens:N windows; give both and --corpus",
        ),
        (
            ["krtest", "eval", "--questions", "q.jsonl", "--segment", "lines", "--out", "o"],
            "--segment says how --corpus is cut into passages (by_passage.csv); give --corpus too",
        ),
        (
            ["krtest", "study", "--location", "line"],
            "--location says what the items of a --data folder count; a generated corpus counts characters",
        ),
        (
            ["krtest", "study", "--corpus", "c.txt"],
            "--corpus and --validation go with --data; a generated data set brings its own",
        ),
        (
            ["krtest", "study", "--data", "kr", "--entities", "5"],
            "--entities and --validation-entities size a generated corpus; --data brings its own",
        ),
        # a nan temperature passed the >= 0 check and failed in transformers' generate, a run and files made;
        # inf generated at random; the oracle took a negative seed
        *(
            (
                [
                    *("krtest", "generate", "--corpus", "c.txt", "--teacher", "smollm2-135m-bundled", "--out", "o"),
                    *("--temperature", t),
                ],
                f"--temperature must be a number >= 0 (0: greedy), got {t}",
            )
            for t in ("nan", "inf")
        ),
        (
            [
                *(
                    "krtest",
                    "oracle",
                    "--oracle",
                    "smollm2-135m-bundled",
                    "--questions",
                    "q.jsonl",
                    "--corpus",
                    "c.txt",
                ),
                *("--seed", "-3", "--out", "o"),
            ],
            "seeds must be in 0..2**32-1 (4294967295), got -3",
        ),
    ],
)
def test_messages_name_what_is_wrong(tmp_path, monkeypatch, argv, message):
    """Lines that named the wrong thing or printed a None: ` is a folder but not a model directory` (an empty
    --model read as the working folder), `unknown LoRA placement None`, `corpus file nosuch.txt` for the
    validation text, `got 0.0 and None`; and input that was taken without a word: `--seed ''` drew fresh seeds,
    `--seeds 1,,2` ran seeds 1 and 2, an option that means nothing without another was ignored."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / "c.txt").write_text("Kelby is a village.\n")
    (tmp_path / "q.jsonl").write_text(
        '{"context": "Kelby", "sentence_true": "is a village.", "sentence_false": "is a town.", "location": 0}\n'
    )
    if argv[:2] == ["krtest", "train"]:
        argv = [*argv, "--model", "smollm2-135m-bundled", "--corpus", "c.txt", "--questions", "q.jsonl", "--out", "o"]
    done = CliRunner().invoke(cli, argv)
    assert done.exit_code == 1 and message in done.output and "None" not in done.output, done.output
    assert len(done.output.strip().splitlines()) == 1, done.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.txt", "q.jsonl"]  # nothing made: no store, no folder


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["run", "--modle", "x"],
            "Error: No such option '--modle'. (Did you mean one of: '--model', '--profile'?) See 'cctk run --help'.",
        ),
        (["run", "--epochs", "abc"], "Error: Invalid value for '--epochs': 'abc' is not a valid integer. See 'cctk"),
        (["krtest", "frob"], "Error: No such command 'frob'. See 'cctk krtest --help'."),
        (["run", "--out", ""], "Error: Invalid value for '--out': is empty: give a folder, or . for the working one."),
        # an empty value ran with the option's default: every part, the ./mlruns store, the default device, v2
        (["run", "--parts", " "], "Error: Invalid value for '--parts': is empty: give a value such as A,C, or leave"),
        (["run", "--tracking", ""], "Error: Invalid value for '--tracking': is empty: give a tracking configuration's"),
        (
            ["compare", "--runs", "a,b", "--out", "o", "--tracking", ""],
            "Error: Invalid value for '--tracking': is empty",
        ),
        (["run", "--device", ""], "Error: Invalid value for '--device': is empty: give a device (cpu, cuda, cuda:1)"),
        (["sweep", "--protocol", ""], "Error: Invalid value for '--protocol': is empty: give a protocol (v2, v1)"),
    ],
)
def test_a_usage_error_is_one_line_naming_the_help(tmp_path, monkeypatch, argv, line):
    """Click's own usage errors were four lines (usage, hint, a blank, the error) where every other error of
    the command line is one; `--out ''` wrote into the working folder."""
    monkeypatch.chdir(tmp_path)
    done = CliRunner().invoke(cli, argv, prog_name="cctk")
    assert done.exit_code == 2 and done.output.strip().splitlines()[0].startswith(line), done.output
    assert len(done.output.strip().splitlines()) == 1 and not list(tmp_path.iterdir()), done.output


@pytest.mark.parametrize(
    ("given", "flag"),
    [
        (["--seed", "5"], "--seed"),
        (["--model", "smollm2-135m"], "--model"),
        (["--profile", "smoke"], "--profile"),
        (["--learning-rate", "0.1"], "--learning-rate"),
        (["--parts", "A"], "--parts"),
    ],
)
def test_a_resume_refuses_the_runs_own_settings_given_again(tmp_path, monkeypatch, given, flag):
    """``cctk run --resume ID --seed 5`` resumed with the run's own seeds, saying nothing of the 5 (as --model
    and --profile did): the run's settings given again are refused in one line, as a sweep's resume refuses its
    own. Where it works and how (--out, --tracking, --device, --no-figures) is the resume's to say."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    done = CliRunner().invoke(cli, ["run", "--resume", "abc", *given], prog_name="cctk")
    assert done.exit_code == 1 and done.output.strip() == (
        "Error: --resume continues a run with the options it was started with (its model, profile, seeds, recipe "
        f"values and parts); leave out {flag}"
    )
    assert not list(tmp_path.iterdir())
    where = CliRunner().invoke(cli, ["run", "--resume", "abc", "--device", "cpu", "--no-figures", "--out", "o"])
    assert "leave out" not in where.output and "no MLflow store" in where.output  # on to the run's store
