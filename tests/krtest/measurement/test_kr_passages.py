"""Cutting a corpus into passages, and locations as character offsets or 0-based line indices."""

import pytest

from cctk.core.errors import CctkError
from cctk.krtest.measurement.passages import Passage, check_segment, passage_at, segment

WIKITEXT = " = Harlow = \n \n The lamp is white . \n It was lit in 1864 . \n \n Salmon return every autumn . \n"


def test_wikitext_separator_lines_cut_like_blank_lines():
    found = segment(WIKITEXT)
    assert [p.text for p in found] == [
        "= Harlow =",
        "The lamp is white . \n It was lit in 1864 .",
        "Salmon return every autumn .",
    ]
    assert [p.start for p in found] == [1, WIKITEXT.index("The"), WIKITEXT.index("Salmon")]
    assert [(p.first_line, p.last_line) for p in found] == [(0, 0), (2, 3), (5, 5)]
    assert all(WIKITEXT[p.start : p.end] == p.text for p in found)
    lines = WIKITEXT.split("\n")
    assert all(lines[p.location("line")].strip().startswith(p.text.split("\n")[0].strip()) for p in found)
    assert [p.text for p in segment(WIKITEXT.replace(" \n \n", "\n\n"))] == [p.text for p in found]


def test_lines_makes_every_non_blank_line_a_passage():
    found = segment(WIKITEXT, "lines")
    assert [p.text for p in found] == [
        "= Harlow =",
        "The lamp is white .",
        "It was lit in 1864 .",
        "Salmon return every autumn .",
    ]
    assert [p.location("line") for p in found] == [0, 2, 3, 5]


def test_passage_at_finds_the_passage_holding_a_location():
    found = segment(WIKITEXT)
    second = found[1]
    assert passage_at(found, second.start, "char") is second
    assert passage_at(found, second.start + 5, "char") is second  # inside it
    assert passage_at(found, second.start - 1, "char") is None  # the blank line before it
    assert passage_at(found, 3, "line") is second and passage_at(found, 4, "line") is None
    assert passage_at(found, len(WIKITEXT) + 10, "char") is None


def test_a_passage_ends_before_its_end_offset():
    """``end`` is one past a passage's last character: that offset is not the passage's. Held end-inclusive it went
    unnoticed (a mutation audit). In WIKITEXT the second passage ends with "1864 ." at offset 52 + 6 = 58, the space
    before its line's end; the third starts at 63 ("Salmon"): 58 is in no passage. Two windows cut inside a word
    touch: "abcde" ends at 5, where "fghi" starts: 5 is the second's only."""
    found = segment(WIKITEXT)
    second = found[1]
    assert (second.end, WIKITEXT.index("1864 .")) == (58, 52)
    assert second.holds(57, "char") and not second.holds(58, "char")
    assert passage_at(found, 57, "char") is second and passage_at(found, 58, "char") is None
    first, next_one = Passage(0, 5, 0, 0, "abcde"), Passage(5, 9, 0, 0, "fghi")
    assert first.holds(4, "char") and not first.holds(5, "char") and next_one.holds(5, "char")
    assert passage_at([first, next_one], 5, "char") is next_one and passage_at([first, next_one], 9, "char") is None


def test_token_windows(tokenizer):
    text = " ".join(f"word{i} is here." for i in range(40))
    corpus = "Intro.\n\n" + text + "\n"
    windows = segment(corpus, "tokens:24", tokenizer)
    assert windows[0].text == "Intro." and len(windows) > 3
    for w in windows[1:]:
        assert corpus[w.start : w.end] == w.text and not w.text[0].isspace()
        assert len(tokenizer(w.text, add_special_tokens=False)["input_ids"]) <= 24
    assert " ".join(w.text for w in windows[1:]) == text  # nothing lost, no word split
    assert all(w.first_line == 2 for w in windows[1:])


@pytest.mark.parametrize(
    ("how", "unit", "message"),
    [
        ("paragraphs", "char", "unknown segmentation 'paragraphs'"),
        ("tokens:4", "char", "N must be >= 8"),
        ("tokens:x", "char", "unknown segmentation"),
        ("tokens:64", "line", "--location line cannot point at a token window"),
        ("lines", "offset", "unknown location unit 'offset'"),
    ],
)
def test_bad_segmentation_fails_in_one_line(how, unit, message):
    with pytest.raises(CctkError, match=message):
        check_segment(how, unit)
    with pytest.raises(CctkError, match="needs a tokenizer"):
        segment("a b c", "tokens:16")
