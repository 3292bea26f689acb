"""The journal of a paid generation (or oracle) in its ``--out`` folder: nothing paid for is lost.

``journal.jsonl`` is append-only: a header line (``{"header": {...}}``: the settings that make the
run what it is, and its MLflow run id), then one line per answered unit (a passage) as soon as its
reply arrives, flushed and fsynced, then ``{"finished": true}`` when every unit is answered. A kill
-9 can leave at most a partial last line, which is dropped when the journal is opened again. Every
other file of the folder is rewritten from the journal, so it is the one source of truth.

Opening a folder:
    no journal, none of the outputs   a fresh start
    a journal, not finished           a continuation, if its settings are the ones asked for now
    a finished journal                refused in one line, unless ``overwrite`` (then removed first)
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import CctkError

JOURNAL = "journal.jsonl"


@dataclass
class Journal:
    path: Path
    header: dict | None = None  # None: not yet written (a fresh start)
    entries: dict[int, dict] = field(default_factory=dict)  # unit index -> its line

    def start(self, header: dict) -> None:
        """Write the header of a fresh journal."""
        self.header = header
        self._append({"header": header})

    def add(self, unit: int, record: dict) -> None:
        self.entries[unit] = {"unit": unit, **record}
        self._append(self.entries[unit])

    def finish(self) -> None:
        self._append({"finished": True})

    def _append(self, record: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as sink:
            sink.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
            sink.flush()
            os.fsync(sink.fileno())


def open_journal(folder: Path, settings: dict, owned: tuple[str, ...], overwrite: bool, what: str) -> Journal:
    """The journal of ``folder`` for a run with ``settings`` (see the module docstring); ``owned``: the
    files the run writes there (removed with ``overwrite``)."""
    folder, path = Path(folder), Path(folder) / JOURNAL
    if overwrite:
        for name in (JOURNAL, *owned):
            (folder / name).unlink(missing_ok=True)
    if not path.exists():
        present = [name for name in owned if (folder / name).exists()]
        if present:
            raise CctkError(f"--out {folder} already holds {present[0]} without a journal; "
                            "--overwrite replaces it, or choose another --out")
        return Journal(path)
    lines = _read(path)
    header = lines[0].get("header") if lines else None
    if header is None:
        raise CctkError(f"{path} has no header line; --overwrite replaces it, or choose another --out")
    if any(line.get("finished") for line in lines):
        raise CctkError(f"--out {folder} holds a finished {what}; --overwrite replaces it, or choose another --out")
    for key, value in settings.items():
        if header.get("settings", {}).get(key) != value:
            raise CctkError(f"--out {folder} holds an unfinished {what} with other settings ({key}: "
                            f"{header.get('settings', {}).get(key)!r} there, {value!r} now); run it as it was "
                            "to continue, or --overwrite")
    entries = {line["unit"]: line for line in lines[1:] if "unit" in line}
    return Journal(path, header, entries)


def _read(path: Path) -> list[dict]:
    """Every complete line; a partial last line (a kill during a write) is cut off the file."""
    raw = path.read_bytes()
    complete = raw[: raw.rfind(b"\n") + 1]
    if len(complete) != len(raw):
        with open(path, "r+b") as sink:
            sink.truncate(len(complete))
    return [json.loads(line) for line in complete.decode("utf-8").splitlines() if line.strip()]
