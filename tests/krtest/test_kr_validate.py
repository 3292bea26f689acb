"""Every rule a proposed item must pass, one hand-made item per reason, on the bundled tokenizer."""
import pytest

from cctk.krtest.from_corpus import checker_for
from cctk.krtest.passages import segment
from cctk.krtest.validate import changed, content_words, support, verbatim, words

PASSAGE = "The Dunholt ferry crosses the Ouse at Kelby. It carries 40 passengers at a time. It was built in 1902."
CONTEXT = "The Dunholt ferry crosses the Ouse at Kelby."
TRUE = "It carries 40 passengers at a time."


@pytest.fixture(scope="module")
def check(tokenizer):
    corpus = "Another passage.\n\n" + PASSAGE + "\n"
    found = segment(corpus)
    return checker_for(found[1], "char", tokenizer), found[1].start


def test_words_and_support():
    assert words("The Ouse's ferry, 40 ft!") == ["the", "ouse", "s", "ferry", "40", "ft"]
    assert content_words("It carries 40 passengers at a time.") == ["carries", "40", "passengers", "time"]
    assert support("It carries 50 passengers.", set(words(PASSAGE))) == pytest.approx(2 / 3)
    assert verbatim("the  OUSE at kelby", PASSAGE) and not verbatim("Ouse at Kel", PASSAGE)
    assert changed("It has 40 seats.", "It has 10 seats.") == (["40"], ["10"], 1, 3)


@pytest.mark.parametrize(("context", "true", "false", "reason"), [
    (CONTEXT, TRUE, "It carries 10 passengers at a time.", None),
    (CONTEXT, TRUE, "It carries 40 horses at a time.", None),
    (CONTEXT, TRUE, "It carries no passengers at a time.", None),  # a changed word, not only a number
    ("  ", TRUE, "It carries 10 passengers at a time.", "empty"),
    ("The ferry sails to Lisbon every spring.", TRUE, "It carries 10 passengers at a time.", "context_not_grounded"),
    ("The ferry of Dunholt crosses the Ouse near Kelby.", TRUE, "It carries 10 passengers at a time.", None),  # paraphrase
    (CONTEXT, "It carries 45 passengers at a time.", "It carries 10 passengers at a time.", "true_not_supported"),
    (CONTEXT, "It carries cattle and sheep to market.", "It carries goats and sheep to market.", "true_not_supported"),
    (CONTEXT, TRUE, TRUE, "not_a_small_edit"),
    (CONTEXT, TRUE, "It carries passengers.", "not_a_small_edit"),  # words dropped, nothing changed
    (CONTEXT, TRUE, "It carries 10 cars and 2 lorries at noon on most days.", "not_a_small_edit"),
    (CONTEXT, TRUE, "It was built in 1902.", "not_a_small_edit"),  # another sentence, not an edit of this one
    (CONTEXT, "It was built in 1902.", "It was built in 1902 at Kelby.", None),  # words added: a changed fact
    (CONTEXT, "It crosses the Ouse at Kelby.", "It crosses the Ouse at Leith.", "context_gives_answer"),
    ("The Dunholt ferry carries 40 passengers.", TRUE, "It carries 10 passengers at a time.", "context_gives_answer"),
    (CONTEXT, "It carries 40 passengers at a time", "It carries 40 passengers at a time each way",
     "identical_first_t"),  # T = the true side's tokens, all shared
])
def test_each_rule(check, context, true, false, reason):
    checker, start = check
    assert checker.reason(context, true, false, start) == reason


def test_false_sentence_stated_in_the_passage(check):
    checker, start = check
    assert checker.passage == PASSAGE
    # a small edit of the true sentence (one span added), but every word of it is the passage's: no falsehood
    assert checker.reason("It was built in 1902.", TRUE, TRUE + " It was built in 1902.", start) == "false_in_passage"


def test_location_must_be_the_passages(check):
    checker, start = check
    false = "It carries 10 passengers at a time."
    assert checker.reason(CONTEXT, TRUE, false, start) is None
    assert checker.reason(CONTEXT, TRUE, false, start + 4) == "location_outside"  # inside, but not its start
    assert checker.reason(CONTEXT, TRUE, false, 0) == "location_outside"  # the other passage
