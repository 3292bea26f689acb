"""Is a proposed KR-Test item usable? The rules a teacher's item must pass, each with its reason.

Words are compared after Unicode NFKC and case folding, as runs of letters and digits (``\\w+``),
a number keeping its decimal point, thousands separator or clock colon (``3.2``, ``1,000``, ``10:30``)
and whatever is glued to it (``12th``, ``1990s``, ``40m``): a number is compared as the token it is;
*content words* are those words minus a short list of function words (``FUNCTION_WORDS``). A text's
*support* in a passage is the share of its content words that occur among the passage's words.

Checked in this order; the first rule an item breaks is its reason:

    empty                  a field is blank
    context_not_grounded   the context is neither a word-for-word piece of the passage nor supported
                           (support < SUPPORT): the paper's context is "extracted or paraphrased"
    true_not_supported     sentence_true has support < SUPPORT, or a number (a word with a digit, or a
                           number word: "nine", "million") the passage does not have
    no_fact_replaced       words differ, but no changed span replaces words: sentence_false only adds
                           words to sentence_true ("... miles away." / "... miles away in fog."), only
                           drops some ("It has 312 inhabitants and one school." / "It has one school."),
                           or both in different places. A qualifier added or a fact left out leaves every
                           stated fact standing, so the passage does not contradict the false side; the
                           paper's false side replaces a fact (a number, a name, a term, a phrase for one
                           fact). Spans as ``edits`` finds them: difflib over ``words``
    not_a_small_edit       sentence_false is not sentence_true with one fact changed: the same words,
                           or more than MAX_SPANS changed spans, or fewer than half of the longer side's
                           words kept. One fact may take several words: the paper's appendix pairs
                           "insects such as beetles and grasshoppers" with "fish such as salmon and
                           mackerel" (3 spans)
    false_in_passage       sentence_false is a word-for-word piece of the passage: it is no falsehood
    context_gives_answer   the context already says the true sentence (all its content words are in
                           the context), or every changed word of the true side is in the context and
                           none of the false side's
    identical_first_t      the two sides have the same first T tokens under the scoring tokenizer
                           (T = the shorter side's length, as scoring cuts): no item can tell them apart
    duplicate              the same three texts as an item already kept
    location_outside       the location does not point back into the item's passage

Torch-free: the tokenizer and the token encoding are passed in.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

# every reason a proposed item can be rejected for (generation.json counts each, in this order): the reading
# of a reply's entries (from_corpus), then the rules of the docstring above
REASONS = (
    "no_item",
    "truncated",
    "malformed",
    "empty",
    "context_not_grounded",
    "true_not_supported",
    "no_fact_replaced",
    "not_a_small_edit",
    "false_in_passage",
    "context_gives_answer",
    "identical_first_t",
    "duplicate",
    "location_outside",
)
SUPPORT = 0.8  # share of content words that must occur in the passage
MAX_SPANS = 3  # changed spans allowed: one fact may be a list ("beetles and grasshoppers", appendix B)
# a number with its separators and what is glued to it is one word ("3.2", "10:30", "1990s", "12th")
WORD = re.compile(r"\d+(?:[.,:]\d+)*\w*|\w+")
NUMBER_WORDS = frozenset(
    [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
        "thirty",
        "forty",
        "fifty",
        "sixty",
        "seventy",
        "eighty",
        "ninety",
        "hundred",
        "thousand",
        "million",
        "billion",
        "trillion",
        "first",
        "second",
        "third",
        "fourth",
        "fifth",
        "sixth",
        "seventh",
        "eighth",
        "ninth",
        "tenth",
        "dozen",
        "half",
    ]
)
FUNCTION_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "from",
        "by",
        "with",
        "and",
        "or",
        "but",
        "nor",
        "so",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "he",
        "she",
        "they",
        "his",
        "her",
        "their",
        "them",
        "him",
        "i",
        "we",
        "you",
        "our",
        "your",
        "my",
        "me",
        "us",
        "not",
        "no",
        "than",
        "then",
        "there",
        "here",
        "which",
        "who",
        "whom",
        "whose",
        "what",
        "when",
        "where",
        "while",
        "also",
        "has",
        "have",
        "had",
        "do",
        "does",
        "did",
        "into",
        "over",
        "under",
        "about",
        "after",
        "before",
        "during",
        "its",
        "it's",
        "s",
    ]
)


def words(text: str) -> list[str]:
    return WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def content_words(text: str) -> list[str]:
    return [w for w in words(text) if w not in FUNCTION_WORDS]


def numbers(text: str) -> set[str]:
    """The words of ``text`` that are numbers: with a digit ("1864", "12th", "3.2") or a number word
    ("nine", "million"): one of them unsupported is a wrong fact however well the rest is supported."""
    return {w for w in words(text) if any(c.isdigit() for c in w) or w in NUMBER_WORDS}


def support(text: str, passage_words: set[str]) -> float:
    """Share of ``text``'s content words among the passage's words (0 for a text without any)."""
    found = content_words(text)
    return sum(w in passage_words for w in found) / len(found) if found else 0.0


def verbatim(text: str, passage: str) -> bool:
    """``text`` occurs in ``passage`` word for word (after normalisation)."""
    return f" {' '.join(words(text))} " in f" {' '.join(words(passage))} "


def edits(true: str, false: str) -> list[tuple[str, int, int, int, int]]:
    """The changed spans from the true side's words to the false side's: difflib opcodes, "equal" left out
    ("replace", "insert" or "delete", then the span in each side's ``words``)."""
    matcher = difflib.SequenceMatcher(a=words(true), b=words(false), autojunk=False)
    return [op for op in matcher.get_opcodes() if op[0] != "equal"]


def replaces(true: str, false: str) -> bool:
    """Some changed span replaces words of the true side with others (not only adds or only drops)."""
    return any(op[0] == "replace" for op in edits(true, false))


def changed(true: str, false: str) -> tuple[list[str], list[str], int, int]:
    """Words of the true and of the false side outside their common blocks, changed spans, words kept."""
    a, b = words(true), words(false)
    ops = edits(true, false)
    kept = len(a) - sum(i2 - i1 for _, i1, i2, _, _ in ops)
    return (
        [w for _, i1, i2, _, _ in ops for w in a[i1:i2]],
        [w for _, _, _, j1, j2 in ops for w in b[j1:j2]],
        len(ops),
        kept,
    )


@dataclass(frozen=True)
class Checker:
    """The rules for the items of one passage. ``sides(context, true, false)`` gives the two sides' token
    ids as scoring sees them; ``holds(location)`` says whether a location points into the passage."""

    passage: str
    sides: Callable[[str, str, str], tuple[list[int], list[int]]]
    holds: Callable[[int], bool]

    def reason(self, context: str, true: str, false: str, location: int) -> str | None:
        """The first rule the item breaks, or None for an item to keep (``duplicate`` is the caller's)."""
        passage_words = set(words(self.passage))
        if not (context.strip() and true.strip() and false.strip()):
            return "empty"
        if not (verbatim(context, self.passage) or support(context, passage_words) >= SUPPORT):
            return "context_not_grounded"
        if support(true, passage_words) < SUPPORT or not numbers(true) <= passage_words:
            return "true_not_supported"
        gone, added, spans, kept = changed(true, false)
        if (gone or added) and not replaces(true, false):  # only added or dropped: every true fact still stands
            return "no_fact_replaced"
        if not (gone or added) or spans > MAX_SPANS or kept < max(len(words(true)), len(words(false))) / 2:
            return "not_a_small_edit"
        if verbatim(false, self.passage):
            return "false_in_passage"
        context_words = set(words(context))
        gone_content = {w for w in gone if w not in FUNCTION_WORDS}
        if support(true, context_words) == 1.0 or (
            gone_content and gone_content <= context_words and not set(added) & context_words
        ):
            return "context_gives_answer"
        a, b = self.sides(context, true, false)
        t = min(len(a), len(b))
        if a[:t] == b[:t]:
            return "identical_first_t"
        if not self.holds(location):
            return "location_outside"
        return None


def key(context: str, true: str, false: str) -> tuple[str, ...]:
    """What makes two items the same item (``duplicate``)."""
    return tuple(" ".join(words(t)) for t in (context, true, false))
