"""The journal of a paid generation (or oracle) in its ``--out`` folder: nothing paid for is lost.

``journal.jsonl`` is append-only: a header line (``{"header": {...}}``: the settings that make the
run what it is, and its MLflow run id), then one line per answered unit (a passage) as soon as its
reply arrives, flushed and fsynced, then ``{"finished": true}`` when every unit is answered. A run
of two stages (a generation with ``--oracle``: the teacher's passages, then the oracle's) marks the
lines of its later stage with ``"stage": "oracle"``; a unit of one stage is not one of another. A
kill -9 can leave at most a partial last line, which is dropped when the journal is opened again.
Every other file of the folder is rewritten from the journal, so it is the one source of truth.

Opening a folder:
    no journal, none of the outputs   a fresh start
    a journal, not finished           a continuation, if its settings are the ones asked for now; with other
                                      settings, a fresh start where no unit was answered; else, where only a
                                      later stage's settings differ (changed or added, not dropped) and that
                                      stage has answered nothing (the oracle, after the teacher's replies), a
                                      continuation under the settings now (a second header line; the last one
                                      holds); else refused
    a finished journal                refused in one line, unless ``overwrite`` (then removed first)
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...core.errors import CctkError

if TYPE_CHECKING:
    from ...store.tracking import LiveRun, Store

JOURNAL = "journal.jsonl"
ORACLE = "oracle"  # the stage of a generation's oracle lines (``gate.STAGE``), and its setting's key


@dataclass
class Journal:
    path: Path
    header: dict[str, Any] | None = None  # None: not yet written (a fresh start)
    entries: dict[int, dict[str, Any]] = field(default_factory=dict)  # unit index -> its line (the first stage)
    stages: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)  # a later stage -> its units' lines

    def start(self, header: dict[str, Any]) -> None:
        """Write the header of a fresh journal (or a later one: the settings a continuation holds to)."""
        self.header = header
        self._append({"header": header})

    def units(self, stage: str | None = None) -> dict[int, dict[str, Any]]:
        """The lines answered so far of ``stage`` (None: the first), by unit index."""
        return self.entries if stage is None else self.stages.setdefault(stage, {})

    def add(self, unit: int, record: dict[str, Any], stage: str | None = None) -> None:
        line = {"unit": unit, **({"stage": stage} if stage else {}), **record}
        self.units(stage)[unit] = line
        self._append(line)

    def run(self, store: Store, kind: str, name: str, source: str) -> AbstractContextManager[LiveRun]:
        """The MLflow run (a context manager): a new one for a fresh journal; for a continuation, the journal's
        own, RUNNING again."""
        run_id = self.header.get("run_id") if self.header else None
        return store.run(kind, name, {"mlflow.source.name": source}, reopen=run_id)

    def finish(self) -> None:
        self._append({"finished": True})

    def _append(self, record: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as sink:
            sink.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
            sink.flush()
            os.fsync(sink.fileno())


def open_journal(
    folder: Path,
    settings: dict[str, Any],
    owned: tuple[str, ...],
    overwrite: bool,
    what: str,
    later: Mapping[str, str] | None = None,
) -> Journal:
    """The journal of ``folder`` for a run with ``settings`` (see the module docstring); ``owned``: the
    files the run writes there (removed with ``overwrite``); ``later``: the settings of a later stage, each
    with the stage whose lines it governs (``{"oracle": "oracle"}``: they may change until it answers)."""
    folder, path = Path(folder), Path(folder) / JOURNAL
    if overwrite:
        for name in (JOURNAL, *owned):
            (folder / name).unlink(missing_ok=True)
    if not path.exists():
        present = [name for name in owned if (folder / name).exists()]
        if present:
            raise CctkError(
                f"--out {folder} already holds {present[0]} without a journal; "
                "--overwrite replaces it, or choose another --out"
            )
        return Journal(path)
    lines = _read(path)
    if not lines or "header" not in lines[0]:
        raise CctkError(f"{path} has no header line; --overwrite replaces it, or choose another --out")
    if any(line.get("finished") for line in lines):
        raise CctkError(f"--out {folder} holds a finished {what}; --overwrite replaces it, or choose another --out")
    header = [line["header"] for line in lines if "header" in line][-1]  # a later stage's change: the last
    answered = {line.get("stage") for line in lines if "unit" in line}  # the stages with a unit (None: the first)
    before = header.get("settings", {})
    # a setting dropped differs too (--oracle)
    differ = [
        key for key in [*settings, *(k for k in before if k not in settings)] if before.get(key) != settings.get(key)
    ]
    if differ and not answered:  # nothing answered (a first request refused): nothing to keep
        for name in (JOURNAL, *owned):
            (folder / name).unlink(missing_ok=True)
        return Journal(path)
    stages = later or {}
    # a later stage's setting changes (or is added: an oracle for a generation without one); dropped, it stays
    fixed = [key for key in differ if key not in stages or stages[key] in answered or settings.get(key) is None]
    if fixed:
        key = fixed[0]
        raise CctkError(
            f"--out {folder} holds an unfinished {what} with other settings ({key}: "
            f"{before.get(key)!r} there, {settings.get(key)!r} now); run it as it was "
            "to continue, or --overwrite"
        )
    journal = Journal(path, header)
    for line in lines[1:]:
        if "unit" in line:
            journal.units(line.get("stage"))[line["unit"]] = line
    if differ:  # only a later stage's, before it answered anything: it continues under the settings now
        journal.start({**header, "settings": settings})
    return journal


def _read(path: Path) -> list[dict[str, Any]]:
    """Every complete line; a partial last line (a kill during a write) is cut off the file."""
    raw = path.read_bytes()
    complete = raw[: raw.rfind(b"\n") + 1]
    if len(complete) != len(raw):
        with open(path, "r+b") as sink:
            sink.truncate(len(complete))
    return [json.loads(line) for line in complete.decode("utf-8").splitlines() if line.strip()]
