"""Every rule a proposed item must pass, one hand-made item per reason, on the bundled tokenizer."""

import pytest

from cctk.krtest.generation.from_corpus import checker_for
from cctk.krtest.generation.validate import changed, content_words, edits, replaces, support, verbatim, words
from cctk.krtest.measurement.passages import segment

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
    assert edits("It has 40 seats.", "It has 40 seats in all.") == [("insert", 4, 4, 4, 6)]
    assert replaces("It has 40 seats.", "It has 10 seats in all.") and not replaces("It has 40 seats.", "It has seats.")


@pytest.mark.parametrize(
    ("context", "true", "false", "reason"),
    [
        (CONTEXT, TRUE, "It carries 10 passengers at a time.", None),
        (CONTEXT, TRUE, "It carries 40 horses at a time.", None),
        (CONTEXT, TRUE, "It carries no passengers at a time.", None),  # a changed word, not only a number
        ("  ", TRUE, "It carries 10 passengers at a time.", "empty"),
        (
            "The ferry sails to Lisbon every spring.",
            TRUE,
            "It carries 10 passengers at a time.",
            "context_not_grounded",
        ),
        (
            "The ferry of Dunholt crosses the Ouse near Kelby.",
            TRUE,
            "It carries 10 passengers at a time.",
            None,
        ),  # paraphrase
        (CONTEXT, "It carries 45 passengers at a time.", "It carries 10 passengers at a time.", "true_not_supported"),
        (
            CONTEXT,
            "It carries cattle and sheep to market.",
            "It carries goats and sheep to market.",
            "true_not_supported",
        ),
        (CONTEXT, TRUE, TRUE, "not_a_small_edit"),
        (CONTEXT, TRUE, "It carries passengers.", "no_fact_replaced"),  # words dropped, nothing changed
        (CONTEXT, TRUE, "It carries 10 cars and 2 lorries at noon on most days.", "not_a_small_edit"),
        (CONTEXT, TRUE, "It was built in 1902.", "not_a_small_edit"),  # another sentence, not an edit of this one
        (CONTEXT, "It was built in 1902.", "It was built in 1902 at Kelby.", "no_fact_replaced"),  # words added
        (CONTEXT, "It was built in 1902.", "It was built in 1904 at Kelby.", None),  # a fact replaced, and words added
        (CONTEXT, "It crosses the Ouse at Kelby.", "It crosses the Ouse at Leith.", "context_gives_answer"),
        (
            "The Dunholt ferry carries 40 passengers.",
            TRUE,
            "It carries 10 passengers at a time.",
            "context_gives_answer",
        ),
        (
            CONTEXT,
            "It carries 40 passengers at a time",
            "It carries 40 passengers at a time each way",
            "no_fact_replaced",
        ),  # words added (the same first T tokens, too: that rule comes later)
        (
            CONTEXT,
            "At a time it carries 40",
            "At a time it carries 400",
            "identical_first_t",
        ),  # T = the true side's tokens, all shared: digits one by one, 40 = "4" "0"
    ],
)
def test_each_rule(check, context, true, false, reason):
    checker, start = check
    assert checker.reason(context, true, false, start) == reason


def test_false_sentence_stated_in_the_passage(check_text):
    passage = "The farm stands by the river. The mill has two wheels. The barn has two doors."
    # a small edit of the true sentence (two words replaced), but the passage states it: no falsehood
    assert (
        check_text(passage, "The farm stands by the river.", "The mill has two wheels.", "The barn has two doors.")
        == "false_in_passage"
    )
    # one span added, every word of it the passage's: it replaces nothing, which is checked first
    assert (
        check_text(
            passage,
            "The farm stands by the river.",
            "The mill has two wheels.",
            "The mill has two wheels. The barn has two doors.",
        )
        == "no_fact_replaced"
    )


# The lighthouse (#41): a false side that only appends a qualifier is no falsehood of the passage.
LIGHTHOUSE = (
    "The Harlow lighthouse stands on Vell Island. It was built in 1864. "
    "Its lamp can be seen from 18 nautical miles away."
)
LAMP = "Its lamp can be seen from 18 nautical miles away."


@pytest.mark.parametrize(
    ("false", "reason"),
    [
        ("Its lamp can be seen from 18 nautical miles away in fog.", "no_fact_replaced"),  # the issue's: words added
        ("Its lamp can be seen from miles away.", "no_fact_replaced"),  # words dropped: the number left out
        ("Its lamp can be seen from 18 miles away in fog.", "no_fact_replaced"),  # one dropped, two added elsewhere
        ("Its lamp can be seen from 12 nautical miles away.", None),  # the number replaced
        ("Its lamp can be seen from 12 nautical miles away in fog.", None),  # replaced, and a qualifier added
        ("Its lamp can be seen from 18 nautical miles away.", "not_a_small_edit"),  # a copy: no span changed
    ],
)
def test_a_false_side_must_replace_a_fact(check_text, false, reason):
    assert check_text(LIGHTHOUSE, "The Harlow lighthouse stands on Vell Island.", LAMP, false) == reason


def test_location_must_be_the_passages(check):
    checker, start = check
    false = "It carries 10 passengers at a time."
    assert checker.reason(CONTEXT, TRUE, false, start) is None
    assert checker.reason(CONTEXT, TRUE, false, start + 4) == "location_outside"  # inside, but not its start
    assert checker.reason(CONTEXT, TRUE, false, 0) == "location_outside"  # the other passage


# The paper's appendix B (Golden Standard) items, over a passage that states what its true sides say.
STARLING = (
    "The common starling is a medium @-@ sized passerine bird with glossy black plumage and a metallic sheen . "
    "Its legs are pink and the bill is yellow in summer . It was introduced to Australia in 1857 to control "
    "insect pests , and it has been introduced to many countries including Australia and New Zealand . "
    "It is largely insectivorous but will also eat seeds and fruits . They primarily feed on "
    "insects such as beetles and grasshoppers . These flocks may consist of over a million individuals in "
    "some cases . Common starlings form very large flocks , creating murmurations that are a sight to behold . "
    "Common starlings construct untidy nests in natural or artificial cavities . They lay four or five glossy , "
    "pale blue eggs in their nests . The common starling 's vocal repertoire is highly variable and includes "
    "sounds mimicked from other birds . Proficient male starlings can have a repertoire of up to 25 variable "
    "song types . The species is classified as least concern by the International Union for Conservation of "
    "Nature . Despite population declines in northern and western Europe , its global numbers are stable . "
    "Common starlings prefer urban or suburban areas for nesting and roosting . They are often found in grassy "
    "areas like farmland and golf courses for foraging ."
)
NUMBERS = (
    "The 12th Baron rebuilt the hall in the 1990s . The tower is 40m tall and its spire adds 3.2 metres . "
    "The bells ring at 10:30 each day ."
)


@pytest.fixture(scope="module")
def check_text(tokenizer):
    def check(passage, context, true, false):
        return checker_for(segment(passage + "\n")[0], "char", tokenizer).reason(context, true, false, 0)

    return check


@pytest.mark.parametrize(
    ("context", "true", "false", "reason"),
    [
        (
            "The common starling is a medium-sized passerine bird with glossy black plumage and a metallic sheen.",
            "Its legs are pink and the bill is yellow in summer.",
            "Its legs are blue and the bill is red in summer.",
            None,
        ),
        (
            "The common starling is largely insectivorous but will also eat seeds and fruits when available.",
            "They primarily feed on insects such as beetles and grasshoppers.",
            "They primarily feed on fish such as salmon and mackerel.",
            None,
        ),  # one fact over three words
        (
            "The common starling is largely insectivorous but will also eat seeds and fruits when available.",
            "They primarily feed on insects such as beetles and grasshoppers.",
            "They mostly feed on fish such as salmon and mackerel.",
            "not_a_small_edit",
        ),  # four changed spans
        (
            "The common starling has been introduced to various countries including Australia and New Zealand.",
            "It was introduced to Australia in 1857 to control insect pests.",
            "It was introduced to Australia in 1907 to control insect pests.",
            None,
        ),
        (
            "Common starlings can form very large flocks, creating murmurations that are a sight to behold.",
            "These flocks may consist of over a million individuals in some cases.",
            "These flocks may consist of no more than a thousand individuals in some cases.",
            None,
        ),
        (
            "Common starlings can form very large flocks, creating murmurations that are a sight to behold.",
            "These flocks may consist of over a billion individuals in some cases.",
            "These flocks may consist of no more than a thousand individuals in some cases.",
            "true_not_supported",
        ),
        (
            "Common starlings construct untidy nests in natural or artificial cavities.",
            "They lay four or five glossy, pale blue eggs in their nests.",
            "They lay six or seven glossy, pale blue eggs in their nests.",
            None,
        ),  # two numbers, one fact
        (
            "The common starling's vocal repertoire is highly variable and includes sounds mimicked from other birds.",
            "Proficient male starlings can have a repertoire of up to 25 variable song types.",
            "Proficient male starlings can have a repertoire of up to 35 variable song types.",
            None,
        ),
        (
            "The species is classified as least concern by the International Union for Conservation of Nature.",
            "Despite population declines in northern and western Europe, its global numbers are stable.",
            "Despite population increases in northern and western Europe, its global numbers are declining.",
            None,
        ),
        (
            "Common starlings prefer urban or suburban areas for nesting and roosting.",
            "They are often found in grassy areas like farmland and golf courses for foraging.",
            "They are often found in dense, wet forests for foraging.",
            None,
        ),  # seven words for three, half kept
    ],
)
def test_the_papers_appendix_items(check_text, context, true, false, reason):
    assert check_text(STARLING, context, true, false) == reason


@pytest.mark.parametrize(
    ("true", "false", "reason"),
    [
        ("The 12th Baron rebuilt the hall in the 1990s.", "The 14th Baron rebuilt the hall in the 1990s.", None),
        (
            "The 12th Baron rebuilt the hall in the 1980s.",
            "The 14th Baron rebuilt the hall in the 1980s.",
            "true_not_supported",
        ),  # a decade the passage does not have
        (
            "The tower is 40m tall and its spire adds 3.2 metres.",
            "The tower is 40m tall and its spire adds 4.5 metres.",
            None,
        ),
        (
            "The tower is 40m tall and its spire adds 3.5 metres.",
            "The tower is 40m tall and its spire adds 4.5 metres.",
            "true_not_supported",
        ),  # 3.5 is not 3.2, though "3" is in the passage
        (
            "The tower is 45m tall and its spire adds 3.2 metres.",
            "The tower is 50m tall and its spire adds 3.2 metres.",
            "true_not_supported",
        ),
        ("The bells ring at 10:30 each day.", "The bells ring at 11:45 each day.", None),
        ("The bells ring at 10:45 each day.", "The bells ring at 11:45 each day.", "true_not_supported"),
    ],
)
def test_numbers_are_compared_as_the_tokens_they_are(check_text, true, false, reason):
    assert words("in the 1990s, 40m and 3.2 at 10:30 on the 12th") == [
        "in",
        "the",
        "1990s",
        "40m",
        "and",
        "3.2",
        "at",
        "10:30",
        "on",
        "the",
        "12th",
    ]
    assert check_text(NUMBERS, "The hall has a tower and bells.", true, false) == reason
