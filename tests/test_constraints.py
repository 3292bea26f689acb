"""constraints.txt installs from the public index: plain ``name==version`` pins (no local labels such as
``+cpu``, which only match one machine's local file), every dependency of pyproject.toml pinned inside its
range, and (integration) an offline resolution against this machine's local package sources."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = ROOT / "constraints.txt"
EXTRAS = ("dev", "ray", "teacher", "server")  # the extras `make setup` installs


def pin_problems(text: str) -> list[str]:
    """One line per constraint line that is not a plain ``name==version`` pin: a local version label
    (``torch==2.13.0+cpu``), a range, a URL, an unparsable line. Comments and blank lines are skipped."""
    problems = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            requirement = Requirement(line)
        except InvalidRequirement as error:
            problems.append(f"line {number}: {raw!r}: not a requirement ({error})")
            continue
        specifiers = list(requirement.specifier)
        if (
            requirement.url
            or requirement.extras
            or requirement.marker
            or len(specifiers) != 1
            or specifiers[0].operator != "=="
        ):
            problems.append(f"line {number}: {raw!r}: not a plain name==version pin")
            continue
        try:
            version = Version(specifiers[0].version)
        except InvalidVersion:  # a wildcard (==1.*) or a legacy version
            problems.append(f"line {number}: {raw!r}: not an exact version")
            continue
        if version.local is not None:
            problems.append(
                f"line {number}: {raw!r}: local version label '+{version.local}' "
                "(only that local build matches it; the public index has none)"
            )
    return problems


def read_pins(text: str) -> dict[str, Version]:
    pins = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            requirement = Requirement(line)
            pins[canonicalize_name(requirement.name)] = Version(next(iter(requirement.specifier)).version)
    return pins


def project_requirements() -> list[Requirement]:
    """The core dependencies of pyproject.toml and those of the extras that `make setup` installs."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib comes with Python 3.11+")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    strings = list(project["dependencies"])
    for extra in EXTRAS:
        strings += project["optional-dependencies"][extra]
    return [Requirement(s) for s in strings]


def test_every_pin_is_plain_name_equals_version():
    assert pin_problems(CONSTRAINTS.read_text()) == []


def test_the_checker_reports_a_local_label_and_other_non_pins(tmp_path):
    # The line that broke `make setup` on the public index (ResolutionImpossible), and its neighbours.
    bad = tmp_path / "constraints.txt"
    bad.write_text(
        "# a comment\nnumpy==2.4.6\ntorch==2.13.0+cpu\nscipy>=1.11\n"
        "gguf @ https://example.org/gguf-0.19.0-py3-none-any.whl\nray==2.*\n"
    )
    problems = pin_problems(bad.read_text())
    assert len(problems) == 4, problems
    assert "line 3" in problems[0] and "local version label '+cpu'" in problems[0]
    assert "line 4" in problems[1] and "line 5" in problems[2] and "line 6" in problems[3]
    assert pin_problems("torch==2.13.0\n") == []


def test_every_project_dependency_is_pinned_inside_its_range():
    pins = read_pins(CONSTRAINTS.read_text())
    for requirement in project_requirements():
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement} (pyproject.toml) has no pin in constraints.txt: run `make constraints`"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {name}=={pins[name]}, outside pyproject.toml's {requirement}"
        )


# -- offline resolution against this machine's local package sources --------------------------------


def _local(value: str) -> str | None:
    """A local folder or file:// URL from a pip setting, else None."""
    if value.startswith("file:"):
        return unquote(urlparse(value).path)
    return value if value.startswith("/") else None


def local_pip_sources() -> tuple[list[str], list[str]]:
    """(local find-links folders, local index URLs) in pip's configuration and environment: this
    project's machines have a folder of wheels (torch's CPU build among them) and file:// mirror indexes."""
    listing = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60
    ).stdout
    folders, indexes = [], []
    for line in listing.splitlines():
        match = re.match(r"^[^.]*\.([a-z-]+)='(.*)'$", line.strip())
        if not match:
            continue
        key, value = match.groups()
        for item in value.split():
            path = _local(item)
            if path is None or not os.path.exists(path):
                continue
            if key == "find-links" and path not in folders:
                folders.append(path)
            elif key in ("index-url", "extra-index-url") and item not in indexes:
                indexes.append(item)
    return folders, indexes


def offline_dry_run(args: list[str], tmp_path: Path, folders: list[str], indexes: list[str]) -> list[dict]:
    """`pip install --dry-run --report` that can reach nothing but the local sources: no pip configuration
    (PIP_CONFIG_FILE=/dev/null, no PIP_* variables), the local index URLs or --no-index, the local folders.
    Returns the report's list of what would be installed."""
    report = tmp_path / "report.json"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    environment["PIP_CONFIG_FILE"] = os.devnull
    sources = (
        ["--index-url", indexes[0]] + [a for i in indexes[1:] for a in ("--extra-index-url", i)]
        if indexes
        else ["--no-index"]
    )
    for folder in folders:
        sources += ["--find-links", folder]
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--dry-run",
        "--quiet",
        "--disable-pip-version-check",
        "--report",
        str(report),
        *sources,
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=120, cwd=ROOT)
    assert done.returncode == 0, f"{' '.join(command)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return json.loads(report.read_text())["install"]


@pytest.fixture(scope="module")
def local_sources():
    folders, indexes = local_pip_sources()
    if not folders and not indexes:
        pytest.skip(
            "no local package mirror in pip's configuration (find-links / index-url on file://): "
            "the offline resolution runs on this project's machines only"
        )
    return folders, indexes


@pytest.mark.integration
def test_the_unlabelled_torch_pin_takes_the_local_cpu_wheel_offline(local_sources, tmp_path):
    """From scratch (--ignore-installed), `torch==VERSION` with no label resolves, with no network, to the
    local CPU file: the pin that also matches the public index's builds keeps this machine working."""
    folders, indexes = local_sources
    torch_pin = read_pins(CONSTRAINTS.read_text())["torch"]
    if not any(
        name.startswith(f"torch-{torch_pin}+cpu-") and name.endswith(".whl")
        for folder in folders
        if os.path.isdir(folder)
        for name in os.listdir(folder)
    ):
        pytest.skip(f"no local CPU wheel torch-{torch_pin}+cpu in {folders}")
    install = offline_dry_run(
        ["--ignore-installed", "--no-deps", "-c", str(CONSTRAINTS), "torch"], tmp_path, folders, indexes
    )
    (torch,) = install
    version = Version(torch["metadata"]["version"])
    assert torch["metadata"]["name"] == "torch" and version.public == str(torch_pin)
    assert version.local == "cpu" and torch["download_info"]["url"].startswith("file:")


@pytest.mark.integration
def test_the_constraints_resolve_offline_for_every_extra(local_sources, tmp_path):
    """The whole dependency tree of cctk[dev,ray,teacher,server] plus torch resolves offline under constraints.txt:
    from the local sources and the venv's installed packages (most pins are not in the local mirror, so a
    from-scratch resolution would need the public index), nothing to install, and the installed
    torch (2.13.0+cpu here) satisfies its unlabelled pin."""
    folders, indexes = local_sources
    requirements = [str(r) for r in project_requirements()] + ["torch"]
    install = offline_dry_run(["-c", str(CONSTRAINTS), *requirements], tmp_path, folders, indexes)
    assert install == [], [f"{i['metadata']['name']}=={i['metadata']['version']}" for i in install]
