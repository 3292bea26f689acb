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


# The paper's appendix B (Golden Standard) items, over a passage that states what its true sides say.
STARLING = ("The common starling is a medium @-@ sized passerine bird with glossy black plumage and a metallic sheen . "
            "Its legs are pink and the bill is yellow in summer . It was introduced to Australia in 1857 to control "
            "insect pests , and it has been introduced to many countries including Australia and New Zealand . "
            "It is largely insectivorous but will also eat seeds and fruits . They primarily feed on "
            "insects such as beetles and grasshoppers . These flocks may consist of over a million individuals in "
            "some cases . Common starlings form very large flocks , creating murmurations that are a sight to behold .")
NUMBERS = ("The 12th Baron rebuilt the hall in the 1990s . The tower is 40m tall and its spire adds 3.2 metres . "
           "The bells ring at 10:30 each day .")


@pytest.fixture(scope="module")
def check_text(tokenizer):
    def check(passage, context, true, false):
        return checker_for(segment(passage + "\n")[0], "char", tokenizer).reason(context, true, false, 0)
    return check


@pytest.mark.parametrize(("context", "true", "false", "reason"), [
    ("The common starling is a medium-sized passerine bird with glossy black plumage and a metallic sheen.",
     "Its legs are pink and the bill is yellow in summer.", "Its legs are blue and the bill is red in summer.", None),
    ("The common starling is largely insectivorous but will also eat seeds and fruits when available.",
     "They primarily feed on insects such as beetles and grasshoppers.",
     "They primarily feed on fish such as salmon and mackerel.", None),  # one fact over three words
    ("The common starling is largely insectivorous but will also eat seeds and fruits when available.",
     "They primarily feed on insects such as beetles and grasshoppers.",
     "They mostly feed on fish such as salmon and mackerel.", "not_a_small_edit"),  # four changed spans
    ("The common starling has been introduced to various countries including Australia and New Zealand.",
     "It was introduced to Australia in 1857 to control insect pests.",
     "It was introduced to Australia in 1907 to control insect pests.", None),
    ("Common starlings can form very large flocks, creating murmurations that are a sight to behold.",
     "These flocks may consist of over a million individuals in some cases.",
     "These flocks may consist of no more than a thousand individuals in some cases.", None),
    ("Common starlings can form very large flocks, creating murmurations that are a sight to behold.",
     "These flocks may consist of over a billion individuals in some cases.",
     "These flocks may consist of no more than a thousand individuals in some cases.", "true_not_supported"),
])
def test_the_papers_appendix_items(check_text, context, true, false, reason):
    assert check_text(STARLING, context, true, false) == reason


@pytest.mark.parametrize(("true", "false", "reason"), [
    ("The 12th Baron rebuilt the hall in the 1990s.", "The 14th Baron rebuilt the hall in the 1990s.", None),
    ("The 12th Baron rebuilt the hall in the 1980s.", "The 14th Baron rebuilt the hall in the 1980s.",
     "true_not_supported"),  # a decade the passage does not have
    ("The tower is 40m tall and its spire adds 3.2 metres.", "The tower is 40m tall and its spire adds 4.5 metres.",
     None),
    ("The tower is 40m tall and its spire adds 3.5 metres.", "The tower is 40m tall and its spire adds 4.5 metres.",
     "true_not_supported"),  # 3.5 is not 3.2, though "3" is in the passage
    ("The tower is 45m tall and its spire adds 3.2 metres.", "The tower is 50m tall and its spire adds 3.2 metres.",
     "true_not_supported"),
    ("The bells ring at 10:30 each day.", "The bells ring at 11:45 each day.", None),
    ("The bells ring at 10:45 each day.", "The bells ring at 11:45 each day.", "true_not_supported"),
])
def test_numbers_are_compared_as_the_tokens_they_are(check_text, true, false, reason):
    assert words("in the 1990s, 40m and 3.2 at 10:30 on the 12th") == ["in", "the", "1990s", "40m", "and", "3.2",
                                                                       "at", "10:30", "on", "the", "12th"]
    assert check_text(NUMBERS, "The hall has a tower and bells.", true, false) == reason
