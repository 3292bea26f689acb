"""Citable: LICENSE, CITATION.cff valid against the CFF 1.2.0 schema (tests/data/cff-schema-1.2.0.json, the
schema cffconvert 2.0.0 ships), pyproject's licence and authors, and ``cctk cite``'s BibTeX for the tool."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from cctk import __version__
from cctk.cli.main import cli
from cctk.store import citation

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((Path(__file__).parents[1] / "data" / "cff-schema-1.2.0.json").read_text())


def cff() -> dict:
    return yaml.safe_load((ROOT / "CITATION.cff").read_text())


def test_citation_cff_is_valid_cff_1_2_0():
    jsonschema.validate(cff(), SCHEMA, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)


def test_the_schema_check_fails_on_a_broken_file():
    broken = {k: v for k, v in cff().items() if k != "authors"}  # authors are required
    with pytest.raises(jsonschema.ValidationError, match="'authors' is a required property"):
        jsonschema.validate(broken, SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**cff(), "cff-version": "1.2.0", "license": "not-a-licence"}, SCHEMA)


def test_citation_pyproject_and_package_agree():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    data = cff()
    assert data["version"] == project["version"] == __version__
    assert data["license"] == project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert data["authors"] == [{"name": "The cctk developers"}] and project["authors"] == [
        {"name": "The cctk developers"}
    ]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License\n\nCopyright (c) 2026 The cctk developers")
    assert "Homepage" not in project.get("urls", {})  # no public URL exists: none is claimed


def fields(bibtex: str) -> dict[str, str]:
    return dict(re.findall(r"^\s+(\w+)\s+= \{(.*)\},?$", bibtex, flags=re.M))


def test_cite_prints_the_tools_bibtex_with_version_and_year():
    done = CliRunner().invoke(cli, ["cite"])
    assert done.exit_code == 0, done.output
    assert done.output.startswith(f"@software{{cctk_{__version__.replace('.', '_')},")
    found = fields(done.output)
    assert found["version"] == __version__ and found["author"] == "{The cctk developers}"
    assert re.fullmatch(r"20\d\d", found["year"]) and found["license"] == "MIT"
    assert fields(citation.tool_bibtex("9.8.7", 2031))["year"] == "2031"


def test_cite_of_an_unknown_run_fails_in_one_line_before_any_output(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/none.db")
    monkeypatch.setenv("CCTK_CACHE", str(tmp_path / "cache"))
    done = CliRunner().invoke(cli, ["cite", "0123456789abcdef0123456789abcdef"])
    assert done.exit_code == 1 and done.output.startswith("Error: ") and "@software" not in done.output
    assert not (tmp_path / "none.db").exists()


def test_special_characters_are_escaped():
    assert citation._tex("/tmp/a_b 50% & #1") == r"/tmp/a\_b 50\% \& \#1"


def test_a_run_on_a_server_is_cited_with_its_page_in_the_model_training_view(written_session):
    """A run link cctk prints carries workflowType=machine_learning: without it MLflow opens the GenAI view."""
    from dataclasses import replace

    from cctk.core.records import MlflowIds
    from cctk.store import session

    info = session.read_run_info(written_session[0])
    assert info.mlflow.url is None and "url" not in fields(citation.run_bibtex(info))  # an embedded store
    served = replace(info, mlflow=MlflowIds("http://lab:5001", "3", "abc123"))
    link = "http://lab:5001/#/experiments/3/runs/abc123?workflowType=machine_learning"
    assert served.mlflow.url == link and fields(citation.run_bibtex(served))["url"] == link
