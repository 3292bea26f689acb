"""BibTeX for cctk itself and for one run (``cctk cite [RUN]``): what a methods section cites.

The tool's entry carries the version and the year of this version (its commit's date in a git clone,
else this year); a run's entry its run id, date, model (with the file's sha256 or the Hub revision),
the seed used, and the commit of the code that ran it. Torch-free and MLflow-free: it reads a
``RunInfo``.
"""

from __future__ import annotations

import re
from datetime import date

from .. import __version__
from ..core.provenance import version_date
from ..core.records import RunInfo
from .session import session_start

AUTHORS = "{The cctk developers}"  # one corporate author, braced so BibTeX does not split it
TITLE = "cctk: confidence-corpus consistency toolkit"
LICENSE = "MIT"


def tool_bibtex(version: str = __version__, year: int | None = None) -> str:
    """The entry for cctk ``version``; ``year``: of this version (its commit's date), else this year."""
    year = year or (version_date() or date.today()).year
    return _entry(
        "software",
        f"cctk_{version.replace('.', '_')}",
        [
            ("author", AUTHORS),
            ("title", _tex(TITLE)),
            ("version", version),
            ("year", str(year)),
            ("license", LICENSE),
            ("note", _tex(f"cctk version {version}")),
        ],
    )


def run_bibtex(info: RunInfo) -> str:
    """The entry for one pipeline run (its run_info.json)."""
    run_id = info.mlflow.run_id or info.session
    started = session_start(info.session)
    made = info.provenance
    git = made.git if made else None
    commit = git.commit if git else None
    model = _model(info)
    fields = [
        (
            "title",
            _tex(f"cctk run {info.session}: {info.model.key}, profile {info.profile}, seed {info.seeds.values[0]}"),
        ),
        ("year", str(started.year) if started else None),  # no author: whoever ran it, not cctk's
        ("month", str(started.month) if started else None),
        ("date", started.date().isoformat() if started else None),
        (
            "howpublished",
            _tex(f"MLflow run {run_id} (experiment {info.mlflow.experiment_id}) in {info.mlflow.tracking_uri}"),
        ),
        ("runid", run_id),
        ("url", info.mlflow.url),  # the run's page in its server's UI (the Model training view)
        ("model", _tex(model)),
        ("seed", str(info.seeds.values[0])),
        ("commit", commit + ("-dirty" if git.dirty else "") if git and commit else None),
        ("version", info.software.get("cctk")),
        (
            "note",
            _tex(
                f"Protocol {info.protocol}; model {model}; seed {info.seeds.values[0]}; "
                f"cctk {info.software.get('cctk') or '-'}"
                + (f", commit {commit}" if commit else "")
                + (f"; reproduce with: {made.reproduce}" if made else "")
            ),
        ),
    ]
    return _entry("misc", f"cctk_run_{run_id[:12]}", fields)


def _model(info: RunInfo) -> str:
    """The model as cited: its key and the file's sha256 or the Hub revision, where recorded."""
    made = info.provenance
    if made is None:
        return f"{info.model.key} ({info.model.id})"
    if made.model.sha256:
        return f"{info.model.key} (sha256 {made.model.sha256})"
    return f"{info.model.key} (revision {made.model.revision or 'unknown'})"


def _entry(kind: str, key: str, fields: list[tuple[str, str | None]]) -> str:
    width = max(len(name) for name, _ in fields)
    body = ",\n".join(f"  {name:<{width}} = {{{value}}}" for name, value in fields if value is not None)
    return f"@{kind}{{{key},\n{body}\n}}\n"


_SPECIAL = re.compile(r"([\\{}&%$#_^~])")
_REPLACE = {"\\": r"\textbackslash{}", "^": r"\^{}", "~": r"\~{}"}


def _tex(text: str) -> str:
    """``text`` with LaTeX's special characters escaped (file paths, keys with underscores)."""
    return _SPECIAL.sub(lambda m: _REPLACE.get(m.group(1), "\\" + m.group(1)), text)
