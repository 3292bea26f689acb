"""A corpus cut into passages, and where each passage is: a character offset or a line index.

Three ways to cut (``--segment``)::

    blank-lines   runs of non-blank lines; a blank line is empty or whitespace only, so WikiText's
                  " \\n" separator lines cut as well as "\\n\\n" does (the default)
    lines         every non-blank line is a passage
    tokens:N      each blank-line passage cut into windows of at most N tokens of a tokenizer,
                  every cut moved back to the last whitespace before it (no word is split)

A passage starts at its first non-whitespace character. Its location (``--location``) is either the
character offset of that start in the corpus (``char``, the default: the paper's appendix A) or
the 0-based index of the line it starts on (``line``: appendix B calls the field "the starting line
index of the source paragraph in the WikiText2 training split"; it does not say from where it
counts, and an index into the split's rows, as into ``corpus.split("\\n")``, counts from 0). Offsets
and lines are those of the text as Python reads it (universal newlines: "\\r\\n" is one character).
Torch-free: a tokenizer is only needed for ``tokens:N``.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...core.errors import CctkError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

SEGMENTS = ("blank-lines", "lines", "tokens:N")
UNITS = ("char", "line")
TOKENS = re.compile(r"tokens:(\d+)")


@dataclass(frozen=True)
class Passage:
    start: int  # character offset of its first non-whitespace character
    end: int  # character offset just after its last non-whitespace character
    first_line: int  # 0-based line of ``start``
    last_line: int  # 0-based line of ``end - 1``
    text: str

    def location(self, unit: str) -> int:
        return self.start if unit == "char" else self.first_line

    def holds(self, location: int, unit: str) -> bool:
        """Does ``location`` (in ``unit``) fall inside this passage?"""
        if unit == "char":
            return self.start <= location < self.end
        return self.first_line <= location <= self.last_line


def check_segment(segment: str, unit: str = "char") -> None:
    """A one-line error on an unknown segmentation or unit, or on ``tokens:N`` with line locations."""
    if unit not in UNITS:
        raise CctkError(f"unknown location unit {unit!r}; choose one of: {', '.join(UNITS)}")
    match = TOKENS.fullmatch(segment)
    if segment not in SEGMENTS[:2] and not match:
        raise CctkError(f"unknown segmentation {segment!r}; choose blank-lines, lines or tokens:N (N >= 8)")
    if match and int(match.group(1)) < 8:
        raise CctkError(f"segmentation {segment!r}: N must be >= 8 tokens")
    if match and unit == "line":
        raise CctkError(
            "--location line cannot point at a token window (one line can hold several); "
            "use --location char with --segment tokens:N"
        )


def segment(corpus: str, how: str = "blank-lines", tokenizer: PreTrainedTokenizerBase | None = None) -> list[Passage]:
    """The passages of ``corpus`` in order (see the module docstring)."""
    check_segment(how)
    lines = _lines(corpus)
    if how == "lines":
        return [_passage(corpus, lines, i, i) for i, (_, _, blank) in enumerate(lines) if not blank]
    blocks, first = [], None
    for i, (_, _, blank) in enumerate([*lines, (len(corpus), len(corpus), True)]):
        if not blank and first is None:
            first = i
        elif blank and first is not None:
            blocks.append(_passage(corpus, lines, first, i - 1))
            first = None
    if how == "blank-lines":
        return blocks
    if tokenizer is None:
        raise CctkError(f"--segment {how} needs a tokenizer to count tokens")
    tokens = TOKENS.fullmatch(how)
    assert tokens is not None, how  # check_segment lets through lines, blank-lines and tokens:N alone
    size = int(tokens.group(1))
    return [window for block in blocks for window in _windows(corpus, block, size, tokenizer)]


def _lines(corpus: str) -> list[tuple[int, int, bool]]:
    """(start, end, blank) of every line, lines cut at "\\n" (the corpus is read with universal newlines)."""
    found, at = [], 0
    for body in corpus.split("\n"):
        found.append((at, at + len(body), not body.strip()))
        at += len(body) + 1
    return found


def _passage(corpus: str, lines: list[tuple[int, int, bool]], first: int, last: int) -> Passage:
    start, end = lines[first][0], lines[last][1]
    text = corpus[start:end]
    start += len(text) - len(text.lstrip())
    end -= len(text) - len(text.rstrip())
    return Passage(start, end, first, last, corpus[start:end])


def _windows(corpus: str, block: Passage, size: int, tokenizer: PreTrainedTokenizerBase) -> list[Passage]:
    """``block`` cut into windows of at most about ``size`` tokens, each cut at the last whitespace
    before the token limit (a word longer than the window is cut at the limit)."""
    text = block.text
    ends = [end for _, end in tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]]
    windows, at = [], 0
    while at < len(text):
        first = bisect.bisect_right(ends, at)  # the first token that ends after ``at``
        if first + size >= len(ends):
            cut = len(text)
        else:
            limit = ends[first + size - 1]
            space = max(text.rfind(c, at + 1, limit + 1) for c in " \t\n")
            cut = space if space > at else limit
        windows.append(_piece(corpus, block, at, cut))
        at = cut + len(text[cut:]) - len(text[cut:].lstrip())
    return windows


def _piece(corpus: str, block: Passage, at: int, cut: int) -> Passage:
    text = block.text[at:cut].strip()
    start = block.start + at + (len(block.text[at:cut]) - len(block.text[at:cut].lstrip()))
    line = corpus.count("\n", 0, start)
    return Passage(start, start + len(text), line, line + text.count("\n"), text)


def passage_at(passages: list[Passage], location: int, unit: str = "char") -> Passage | None:
    """The passage that holds ``location``, or None (``passages`` in corpus order, as ``segment`` gives them)."""
    k = bisect.bisect_right(passages, location, key=lambda p: p.location(unit)) - 1
    return passages[k] if k >= 0 and passages[k].holds(location, unit) else None
