"""The recipe is declared once (cctk.core.config.Recipe): the CLI derives its options from it, and the
MLproject's parameters are checked against it here."""

from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner

from cctk.cli.main import cli
from cctk.cli.mlproject import strip_empty
from cctk.core.config import recipe_fields
from cctk.core.errors import CctkError

ROOT = Path(__file__).resolve().parents[2]


def test_cli_run_has_one_option_per_recipe_value():
    run = cli.commands["run"]
    options = {p.name: p for p in run.params}
    for spec in recipe_fields():
        assert spec.name in options, spec.name
        assert options[spec.name].opts == [f"--{spec.name.replace('_', '-')}"]
        assert options[spec.name].default is None  # None keeps the profile's value
        assert spec.metadata["help"] in options[spec.name].help


def test_mlproject_passes_every_recipe_value():
    project = yaml.safe_load((ROOT / "MLproject").read_text())
    main = project["entry_points"]["main"]
    for spec in recipe_fields():
        assert main["parameters"][spec.name]["default"] == "", spec.name  # empty keeps the profile's
        assert f"--{spec.name.replace('_', '-')} {{{spec.name}}}" in main["command"], spec.name
    assert main["parameters"]["profile"]["default"] == "auto"


def test_mlproject_passes_every_option_of_every_manual():
    """Each registered manual's options are parameters of the MLproject's main entry, passed to ``cctk run`` as
    its flags (a switch as ``-P name=yes|no``: ``FLAGS``); ``protocol`` picks the manual."""
    from cctk.cli.mlproject import FLAGS
    from cctk.manuals import registry
    from cctk.manuals.configure import command_options

    main = yaml.safe_load((ROOT / "MLproject").read_text())["entry_points"]["main"]
    assert main["parameters"]["protocol"]["default"] == registry.DEFAULT and "--protocol {protocol}" in main["command"]
    options = [o for m in registry.every() for o in command_options(m.spec)]
    assert {o.name for o in options} == {"holdout", "curves", "parts"}  # today's: manual 2.0.0's
    for option in options:
        assert option.name in main["parameters"], option.name
        assert f"{option.flag_name} {{{option.name}}}" in main["command"], option.name
        assert (FLAGS.get(option.flag_name) == (option.flag_name, None)) == option.flag, option.name


def test_a_recipe_value_out_of_range_fails_in_one_line(tmp_path):
    result = CliRunner().invoke(
        cli, ["run", "--model", "smollm2-135m-bundled", "--epochs", "0", "--out", str(tmp_path / "o")]
    )
    assert result.exit_code != 0
    assert result.output.strip().splitlines() == ["Error: recipe value epochs=0 is out of range: must be >= 1"]
    assert not (tmp_path / "o").exists()


def test_mlproject_switches_become_the_clis_flags():
    main = yaml.safe_load((ROOT / "MLproject").read_text())["entry_points"]["main"]
    assert "--curves {curves} --figures {figures}" in main["command"]
    assert (main["parameters"]["curves"]["default"], main["parameters"]["figures"]["default"]) == ("no", "yes")
    assert strip_empty(["--curves", "yes", "--figures", "no", "--seed", ""]) == ["--curves", "--no-figures"]
    assert strip_empty(["--curves", "no", "--figures", "YES"]) == ["--figures"]
    assert strip_empty(["--figures", "", "--curves", ""]) == []  # empty keeps the default (it turned figures off)
    with pytest.raises(CctkError, match=r"^-P curves=maybe: a switch takes yes or no \(or nothing: its default\)$"):
        strip_empty(["--curves", "maybe"])  # it was `Got unexpected extra argument (maybe)`
    options = {o for p in cli.commands["run"].params for o in (*p.opts, *p.secondary_opts)}
    assert {"--curves", "--figures", "--no-figures"} <= options  # the flags it gives exist


def test_version_from_the_command_and_from_python_dash_m():
    import subprocess
    import sys
    from importlib import metadata, resources

    from cctk import __version__

    done = CliRunner().invoke(cli, ["--version"])
    assert done.exit_code == 0 and done.output == f"cctk, version {__version__}\n"
    assert metadata.version("cctk") == __version__  # what click's version option reads
    module = subprocess.run([sys.executable, "-m", "cctk", "--version"], capture_output=True, text=True, timeout=120)
    assert module.returncode == 0 and module.stdout == f"cctk, version {__version__}\n"
    assert resources.files("cctk").joinpath("py.typed").is_file()  # a typed package (PEP 561)


def test_cctk_and_the_mlproject_entry_end_with_sigterm_handled_and_their_objects_frozen(monkeypatch):
    """``main`` (``cctk``, ``python -m cctk`` and the MLproject's entry alike) takes SIGTERM as Ctrl-C, so a
    stopped run ends KILLED, and freezes what the command made out of the interpreter's last garbage
    collection (1-2 s of CPU at every exit: docs/speed.md, "The exit")."""
    import gc
    import signal

    from cctk.cli import mlproject
    from cctk.cli.main import main
    from cctk.core.errors import Terminated

    handled: dict = {}
    monkeypatch.setattr(signal, "signal", lambda signum, handler: handled.update({signum: handler}))
    for start in ("cli", "mlproject"):
        gc.unfreeze()
        handled.clear()
        with pytest.raises(SystemExit) as ended:
            main(["--version"]) if start == "cli" else mlproject.entry(["--version", "--seed", ""])
        assert ended.value.code == 0 and gc.get_freeze_count() > 0, start
        with pytest.raises(Terminated):
            handled[signal.SIGTERM](signal.SIGTERM, None)
    gc.unfreeze()


@pytest.mark.parametrize("name", ["generate", "oracle", "eval", "train", "study"])
def test_what_a_krtest_command_passes_on_is_the_typeddict_it_declares(name):
    """``cli/krtest.py`` types each command's ``**options`` with a TypedDict of what click passes beyond the named
    parameters: its keys are exactly the options click declares and the function does not name."""
    import inspect
    import re

    from cctk.cli import krtest as module
    from cctk.cli.krtest import krtest

    command = krtest.commands[name]
    assert command.callback is not None
    signature = inspect.signature(command.callback)
    named = {p.name for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD}
    (rest,) = [p for p in signature.parameters.values() if p.kind is inspect.Parameter.VAR_KEYWORD]
    assert re.fullmatch(r"Unpack\[_\w+\]", rest.annotation), rest.annotation  # a string: the module's annotations
    declared = getattr(module, rest.annotation.removeprefix("Unpack[").removesuffix("]"))
    assert declared.__required_keys__ | declared.__optional_keys__ == {p.name for p in command.params} - named


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["run", "--curves", "maybe"], "-P curves=maybe: a switch takes yes or no (or nothing: its default)"),
        (
            ["sweep", "--models", "smollm2-135m-bundled", "--seeds", "1,,2"],
            "--seeds takes a count N or seeds S1,S2,..., got '1,,2'",
        ),
        (["run", "--modle", "x"], "No such option '--modle'. (Did you mean one of: '--model', '--profile'?) See"),
    ],
)
def test_the_mlproject_entry_leaves_its_refusal_on_mlflow_runs_run(tracking_uri, monkeypatch, capsys, argv, line):
    """`mlflow run` creates its run before cctk starts and ends it FAILED by the exit code: a bad parameter left
    it without a word of why (cctk never opened it). The line printed is its tag cctk.error now."""
    from mlflow import MlflowClient

    from cctk.cli import mlproject

    client = MlflowClient(tracking_uri)
    created = client.create_run(client.create_experiment("cctk")).info.run_id  # as `mlflow run` does
    monkeypatch.setenv("MLFLOW_RUN_ID", created)
    with pytest.raises(SystemExit) as end:
        mlproject.entry(argv)
    assert end.value.code in (1, 2)
    (printed,) = capsys.readouterr().err.strip().splitlines()
    tag = client.get_run(created).data.tags["cctk.error"]
    assert printed == f"Error: {tag}" and line in tag
    client.set_tag(created, "cctk.error", "the lifecycle's own")
    with pytest.raises(SystemExit):
        mlproject.entry(argv)
    assert client.get_run(created).data.tags["cctk.error"] == "the lifecycle's own"  # a run cctk ended keeps its own


def _groups(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [path]
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += _groups(command, (*path, name))
    return found


@pytest.mark.parametrize("path", _groups(cli), ids=lambda path: " ".join(("cctk", *path)))
def test_every_commands_listing_is_whole_at_80_columns(path):
    """`cctk --help` and each group's list every command in a line of its own words, never cut with '...' (they
    cut nine of eleven: 'BibTeX for cctk (version, year) and, given RUN (a session...')."""
    said = CliRunner().invoke(cli, [*path, "--help"], terminal_width=80)
    assert said.exit_code == 0, said.output
    listed = said.output.split("Commands:\n")[1].splitlines()
    assert listed and not [line for line in listed if line.rstrip().endswith("...")], said.output
