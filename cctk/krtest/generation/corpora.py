"""A user's corpus as documents, and its passages within each document.

``--corpus`` is one of::

    a text file           one document (its name: the file name)
    a folder              every .txt and .md file in it, sorted by name, each its own document
    a .jsonl file         one document per record, its text in ``--text-field`` (default ``text``),
                          named ``<file>:<line>``

Each document is cut as ``cctk.krtest.measurement.passages.segment`` cuts a corpus; then ``--min-tokens``
merges a passage shorter than that many tokens into the next one of its document (a WikiText heading
such as ``= = Gameplay = =`` is not worth a request of its own), and ``--max-tokens-per-passage``
splits a longer passage at its sentence ends (a sentence longer than the bound stays whole). A
passage's location counts within its own document, so one file and a folder of its paragraphs give
the same passages, the same texts and the same requests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...core.errors import CctkError
from ..measurement.items import read_corpus
from ..measurement.passages import Passage, _piece, segment

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

SUFFIXES = (".txt", ".md")
SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")


@dataclass(frozen=True)
class Document:
    name: str
    text: str


@dataclass(frozen=True)
class Located:
    """A passage and the document it is in (its location counts within that document)."""

    document: int
    passage: Passage


def read_documents(path: Path, text_field: str = "text") -> list[Document]:
    """The documents of a file, folder or JSONL file; a one-line error on anything unreadable."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES)
        if not files:
            raise CctkError(f"corpus folder {path} holds no .txt or .md file")
        return [Document(p.name, read_corpus(p)) for p in files]
    if not path.is_file():
        raise CctkError(f"corpus {path} does not exist")
    if path.suffix.lower() == ".jsonl":
        return _jsonl(path, text_field)
    return [Document(path.name, read_corpus(path))]


def _jsonl(path: Path, field: str) -> list[Document]:
    found = []
    for number, line in enumerate(read_corpus(path).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise CctkError(f"{path} line {number}: not valid JSON ({error.msg})") from None
        if not isinstance(record, dict) or not isinstance(record.get(field), str):
            raise CctkError(f"{path} line {number}: no string field {field!r} (choose it with --text-field)")
        found.append(Document(f"{path.name}:{number}", record[field]))
    return found


def token_counter(tokenizer: PreTrainedTokenizerBase) -> Callable[[str], int]:
    """A text's tokens as the bounds count them (no special tokens): what ``merge_short`` and ``split_long`` take."""

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    return count


def cut(
    documents: list[Document],
    how: str,
    tokenizer: PreTrainedTokenizerBase,
    min_tokens: int = 0,
    max_tokens: int | None = None,
) -> list[Located]:
    """Every document's passages, in order, shaped by the token bounds (see the module docstring)."""
    count = token_counter(tokenizer)
    found = []
    for k, document in enumerate(documents):
        passages = segment(document.text, how, tokenizer) if document.text.strip() else []
        passages = merge_short(document.text, passages, count, min_tokens)
        if max_tokens:
            passages = [piece for p in passages for piece in split_long(document.text, p, count, max_tokens)]
        found += [Located(k, p) for p in passages]
    return found


def merge_short(text: str, passages: list[Passage], count: Callable[[str], int], min_tokens: int) -> list[Passage]:
    """Each passage under ``min_tokens`` joined to the next (the last one stays as it is)."""
    out, pending = [], None
    for passage in passages:
        if pending is not None:
            passage = Passage(
                pending.start, passage.end, pending.first_line, passage.last_line, text[pending.start : passage.end]
            )
            pending = None
        if min_tokens and count(passage.text) < min_tokens and passage is not passages[-1]:
            pending = passage
            continue
        out.append(passage)
    if pending is not None:
        out.append(pending)
    return out


def split_long(text: str, passage: Passage, count: Callable[[str], int], max_tokens: int) -> list[Passage]:
    """``passage`` cut at sentence ends into pieces of at most ``max_tokens`` tokens where it can be."""
    if count(passage.text) <= max_tokens:
        return [passage]
    ends = [m.start() for m in SENTENCE_END.finditer(passage.text)] + [len(passage.text)]
    pieces, at, last = [], 0, 0
    for end in ends:
        if last > at and count(passage.text[at:end]) > max_tokens:
            pieces.append(_piece(text, passage, at, last))
            at = last + len(passage.text[last:end]) - len(passage.text[last:end].lstrip())
        last = end
    pieces.append(_piece(text, passage, at, len(passage.text)))
    return [p for p in pieces if p.text]
