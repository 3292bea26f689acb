"""KR-Test items: the JSONL question files of the paper, read into typed records, checked line by line.

One item per line, the paper's field names::

    {"context": "...", "sentence_true": "...", "sentence_false": "...", "location": 13630}

``location`` says where the source passage is in the corpus: its character offset (``--location
char``, the default, as the paper's appendix A) or its 0-based line index (``--location line``, as
appendix B); see ``cctk.krtest.measurement.passages``. Scoring never reads it; ``--open-book`` puts the passage
that holds it before the context, and ``by_passage.csv`` groups items by it. Blank lines are
skipped; every other line must be one object with the four fields, or reading fails in one line
naming the file, the line and the field, before any work is done with the file. A text field must
be valid Unicode (no lone surrogates) and within a length bound; an item repeated is scored once.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from ...core.errors import CctkError
from .passages import Passage, check_segment, passage_at, segment

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from ...store.tracking import LiveRun

TEXT_FIELDS = ("context", "sentence_true", "sentence_false")  # what a teacher writes; the corpus gives location
FIELDS: dict[str, type] = {**dict.fromkeys(TEXT_FIELDS, str), "location": int}
PASSAGE_END = "\n\n"  # passages of a corpus are separated by a blank line
JSON_TYPES = {
    type(None): "null",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    str: "a string",
    list: "an array",
    dict: "an object",
}


@dataclass(frozen=True)
class Item:
    line: int  # line of the file, counted from 1
    context: str
    sentence_true: str
    sentence_false: str
    location: int
    book: str = ""  # open book: the source passage, put before the context when scoring

    @property
    def scored_context(self) -> str:
        """What the model reads before the continuations: the context, after the passage in an open book."""
        return self.book + PASSAGE_END + self.context if self.book else self.context


MAX_CHARS = 20_000  # per text field: a context of a few thousand tokens; 5 MB would ask for terabytes
MAX_TOKENS = 4_096  # per text field, where the scoring tokenizer is given


def read_items(
    path: Path,
    tokenizer: PreTrainedTokenizerBase | None = None,
    max_tokens: int = MAX_TOKENS,
    keep_duplicates: bool = False,
    report: Callable[[str], None] | None = None,
) -> list[Item]:
    """Every item of a JSONL file, in file order; a one-line ``CctkError`` on the first bad line.

    Each text field is bounded: ``max_tokens`` tokens of ``tokenizer`` when given, else ``MAX_CHARS``
    characters. An item repeated (all four fields equal) is scored once, at its first line, unless
    ``keep_duplicates``; ``report`` (default: one line on stderr) says how many were dropped. A UTF-8
    byte order mark at the start of the file is skipped."""
    path = Path(path)
    if not path.is_file():
        raise CctkError(f"questions file {path} does not exist")
    items = []
    data = path.read_bytes().removeprefix(b"\xef\xbb\xbf")  # editors on Windows write a BOM: no content
    for number, raw in enumerate(data.split(b"\n"), start=1):
        where = f"{path} line {number}"
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise CctkError(f"{where}: not UTF-8 text") from None
        if text.strip():
            items.append(check_length(parse_item(text, number, where), where, tokenizer, max_tokens))
    if not items:
        raise CctkError(f"questions file {path} holds no items")
    return items if keep_duplicates else drop_duplicates(items, str(path), report)


def check_length(
    item: Item, where: str, tokenizer: PreTrainedTokenizerBase | None = None, max_tokens: int = MAX_TOKENS
) -> Item:
    """A text field longer than the bound fails in one line that states the bound."""
    for name in TEXT_FIELDS:
        value = getattr(item, name)
        if tokenizer is not None:
            size, bound, unit = len(tokenizer(value, add_special_tokens=False)["input_ids"]), max_tokens, "tokens"
        else:
            size, bound, unit = len(value), MAX_CHARS, "characters"
        if size > bound:
            raise CctkError(f"{where}: field {name!r} is {size} {unit} long; the bound is {bound} {unit} per field")
    return item


def drop_duplicates(items: list[Item], source: str, report: Callable[[str], None] | None = None) -> list[Item]:
    """Each distinct item once (its first line): a copy would count twice in the accuracy."""
    seen: dict[tuple[str | int, ...], int] = {}
    kept = []
    for item in items:
        key = tuple(item_row(item).values())
        if key not in seen:
            seen[key] = item.line
            kept.append(item)
    dropped = len(items) - len(kept)
    if dropped:
        say = report or (lambda line: print(line, file=sys.stderr))
        say(
            f"{source}: {dropped} duplicate item{'s' if dropped > 1 else ''} scored once ({len(kept)} distinct "
            f"of {len(items)})"
        )
    return kept


def item_row(item: Item) -> dict[str, str | int]:
    """An item as a questions file holds it: the paper's four fields, in their order (parse_item reads it back)."""
    return {name: getattr(item, name) for name in FIELDS}


def questions_text(items: Sequence[Item], documents: Sequence[str] | None = None) -> str:
    """A questions file: one JSON line per item, each followed by its document's name where ``documents``
    are given (a corpus of several)."""
    named = documents if documents is not None else [None] * len(items)
    rows = [item_row(i) | ({"document": d} if d is not None else {}) for i, d in zip(items, named, strict=True)]
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def dataset_name(kind: str, source: str | Path) -> str:
    """An MLflow dataset's name: ``kr <kind> <file name>``, or the folder's name where the file is named for its
    kind (``data/kr/questions.jsonl``: ``kr questions kr``, not ``kr questions questions``)."""
    path = Path(source)
    return f"kr {kind} {path.parent.name if path.stem == kind and path.parent.name else path.stem}"


def log_questions(run: LiveRun, items: Sequence[Item], source: str) -> None:
    """The questions as ``run``'s MLflow dataset input ``kr questions <name>`` (``dataset_name``; evaluation)."""
    questions = pd.DataFrame([item_row(i) for i in items])
    run.dataset(questions, dataset_name("questions", source), source, context="evaluation")


def parse_item(text: str, line: int, where: str) -> Item:
    try:
        record = json.loads(text)
    except json.JSONDecodeError as error:
        message = error.msg.removesuffix(" at")  # "Unterminated string starting at": its column follows
        raise CctkError(f"{where}: not valid JSON ({message} at column {error.colno})") from None
    if not isinstance(record, dict):
        raise CctkError(
            f"{where}: expected a JSON object with the fields {', '.join(FIELDS)}, got {_json_type(record)}"
        )
    context, true, false = (_text(record, name, where) for name in TEXT_FIELDS)  # FIELDS' order: texts first
    return Item(line, context, true, false, _integer(record, "location", where))


def _field(record: dict[str, Any], name: str, where: str) -> object:
    """The value of field ``name`` as the JSON holds it (any JSON type: the caller checks it)."""
    if name not in record:
        raise CctkError(f"{where}: field {name!r} is missing")
    return record[name]


def _integer(record: dict[str, Any], name: str, where: str) -> int:
    value = _field(record, name, where)
    if isinstance(value, bool) or not isinstance(value, int):
        raise CctkError(
            f"{where}: field {name!r} must be an integer (a character offset or line index), got {_json_type(value)}"
        )
    if value < 0:
        raise CctkError(f"{where}: field {name!r} must be >= 0, got {value}")
    return value


def _text(record: dict[str, Any], name: str, where: str) -> str:
    value = _field(record, name, where)
    if not isinstance(value, str):
        raise CctkError(f"{where}: field {name!r} must be a string, got {_json_type(value)}")
    if not value.strip():
        raise CctkError(f"{where}: field {name!r} is empty")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:  # JSON lets "\ud800" through; no tokenizer or store takes it
        raise CctkError(
            f"{where}: field {name!r} is not valid Unicode text (a lone surrogate "
            f"{value[error.start]!r} at character {error.start})"
        ) from None
    return value


def _json_type(value: object) -> str:
    return JSON_TYPES.get(type(value), type(value).__name__)


def read_corpus(path: Path, what: str = "corpus") -> str:
    """A text file, ``what`` it is for (``corpus``, ``validation``) naming it in a one-line refusal."""
    path = Path(path)
    if not path.is_file():
        raise CctkError(f"{what} file {path} does not exist")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise CctkError(f"{what} file {path} is not UTF-8 text") from None
    if not text.strip():
        raise CctkError(f"{what} file {path} is empty")
    return text


def passages(corpus: str) -> list[str]:
    """The corpus cut at its blank lines (whitespace-only lines too), each passage stripped."""
    return [p.text for p in segment(corpus)]


def check_locations(items: list[Item], found: list[Passage], unit: str, source: str = "questions") -> None:
    """A one-line error on the first item whose ``location`` falls in no passage of the corpus."""
    for item in items:
        if passage_at(found, item.location, unit) is None:
            raise CctkError(
                f"{source} line {item.line}: field 'location' ({item.location}, as a {unit} location) "
                f"points at no passage of the corpus ({len(found)} passages)"
            )


def with_book(items: list[Item], found: list[Passage], unit: str = "char") -> list[Item]:
    """Each item with the passage that holds its location as its ``book`` (locations checked already)."""
    booked = []
    for item in items:
        passage = passage_at(found, item.location, unit)
        assert passage is not None, f"item {item.line}: its location was checked to fall in a passage"
        booked.append(replace(item, book=passage.text))
    return booked


def open_book(
    items: list[Item],
    corpus: str,
    source: str = "questions",
    unit: str = "char",
    how: str = "blank-lines",
    tokenizer: PreTrainedTokenizerBase | None = None,
) -> list[Item]:
    """The open-book upper bound: each item with its source passage before its context (the same model and
    likelihood scoring, the passage in context: not the paper's oracle, a chat model choosing A or B from the
    paragraph, which ``cctk krtest oracle`` asks).

    Fails in one line on a ``location`` that points past the corpus or at blank text.
    """
    check_segment(how, unit)
    found = segment(corpus, how, tokenizer)
    check_locations(items, found, unit, source)
    return with_book(items, found, unit)
