"""KR-Test items: the JSONL question files of the paper, read into typed records, checked line by line.

One item per line, the paper's field names::

    {"context": "...", "sentence_true": "...", "sentence_false": "...", "location": 13630}

``location`` is the character offset of the source passage in the corpus; scoring never reads it,
only ``--open-book`` does (the passage runs from there to the next blank line). Blank lines are
skipped; every other line must be one object with the four fields, or reading fails in one line
naming the file, the line and the field, before any work is done with the file.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import CctkError

FIELDS: dict[str, type] = {"context": str, "sentence_true": str, "sentence_false": str, "location": int}
PASSAGE_END = "\n\n"  # passages of a corpus are separated by a blank line
JSON_TYPES = {type(None): "null", bool: "a boolean", int: "a number", float: "a number", str: "a string",
              list: "an array", dict: "an object"}


@dataclass(frozen=True)
class Item:
    line: int  # line of the file, counted from 1
    context: str
    sentence_true: str
    sentence_false: str
    location: int


def read_items(path: Path) -> list[Item]:
    """Every item of a JSONL file, in file order; a one-line ``CctkError`` on the first bad line."""
    path = Path(path)
    if not path.is_file():
        raise CctkError(f"questions file {path} does not exist")
    items = []
    for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        where = f"{path} line {number}"
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise CctkError(f"{where}: not UTF-8 text") from None
        if text.strip():
            items.append(parse_item(text, number, where))
    if not items:
        raise CctkError(f"questions file {path} holds no items")
    return items


def parse_item(text: str, line: int, where: str) -> Item:
    try:
        record = json.loads(text)
    except json.JSONDecodeError as error:
        raise CctkError(f"{where}: not valid JSON ({error.msg} at column {error.colno})") from None
    if not isinstance(record, dict):
        raise CctkError(f"{where}: expected a JSON object with the fields {', '.join(FIELDS)}, "
                        f"got {_json_type(record)}")
    return Item(line, **{name: _field(record, name, kind, where) for name, kind in FIELDS.items()})


def _field(record: dict, name: str, kind: type, where: str):
    if name not in record:
        raise CctkError(f"{where}: field {name!r} is missing")
    value = record[name]
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise CctkError(f"{where}: field {name!r} must be an integer (a character offset), got {_json_type(value)}")
        if value < 0:
            raise CctkError(f"{where}: field {name!r} must be >= 0, got {value}")
        return value
    if not isinstance(value, str):
        raise CctkError(f"{where}: field {name!r} must be a string, got {_json_type(value)}")
    if not value.strip():
        raise CctkError(f"{where}: field {name!r} is empty")
    return value


def _json_type(value) -> str:
    return JSON_TYPES.get(type(value), type(value).__name__)


def read_corpus(path: Path) -> str:
    path = Path(path)
    if not path.is_file():
        raise CctkError(f"corpus file {path} does not exist")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise CctkError(f"corpus file {path} is not UTF-8 text") from None
    if not text.strip():
        raise CctkError(f"corpus file {path} is empty")
    return text


def passage_at(corpus: str, location: int) -> str:
    """The passage that starts at character ``location``: up to the next blank line, stripped."""
    end = corpus.find(PASSAGE_END, location)
    return corpus[location : end if end >= 0 else len(corpus)].strip()


def passages(corpus: str) -> list[str]:
    """The corpus cut at its blank lines, empty pieces dropped."""
    return [p.strip() for p in corpus.split(PASSAGE_END) if p.strip()]


def open_book(items: list[Item], corpus: str, source: str = "questions") -> list[Item]:
    """The oracle baseline: each item's source passage, then a blank line, then its context.

    Fails in one line on a ``location`` that points past the corpus or at blank text.
    """
    books = []
    for item in items:
        passage = passage_at(corpus, item.location) if item.location < len(corpus) else ""
        if not passage:
            raise CctkError(f"{source} line {item.line}: field 'location' ({item.location}) points at no passage "
                            f"of the corpus ({len(corpus)} characters)")
        books.append(replace(item, context=passage + PASSAGE_END + item.context))
    return books
