"""A seeded KR-Test data set about fictional people: corpus, questions and a validation text.

Every name, town and river is composed from syllables, and every fact is drawn at random, so no
pretrained model can know any of them. A passage introduces one person and states one fact of each
kind (``KINDS``) in a shuffled order::

    Velmora Quistral appears in the old registers of the valley. Quistral was born in the town of
    Ostravel. Quistral came to the valley in 1743. Quistral worked as a glazier. ...

A question's context is the introduction (the person, no fact); its two continuations are the same
sentence with two values of one kind. People come in pairs that share their candidate values: for
each pair and kind two values are drawn, and a coin flip decides which one is the first person's
(the other is the second's). So every false value is stated in the corpus as someone else's fact,
as often as the true one, and a preference for one value over the other, whatever its source,
scores exactly one of the pair's two questions. The validation text is passages of the same form
about other people, for perplexity. The same seed gives the same bytes.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

from ...core.config import check_seeds
from ...core.errors import CctkError
from ...core.facts import rng
from ..measurement.items import PASSAGE_END, Item, questions_text
from ..measurement.passages import check_segment

CORPUS, QUESTIONS, VALIDATION = "corpus.txt", "questions.jsonl", "validation.txt"
ENTITIES = 36  # people in the corpus (6 facts each: 216 questions)
VALIDATION_ENTITIES = 8
MAX_PEOPLE = 150  # the smallest name pool (towns) holds 150 names

INTRO = "{name} appears in the old registers of the valley."
KINDS: dict[str, str] = {  # kind -> sentence; every sentence starts with the surname
    "town": "{who} was born in the town of {value}.",
    "year": "{who} came to the valley in {value}.",
    "trade": "{who} worked as a {value}.",
    "river": "{who} lived by the river {value}.",
    "spouse": "{who} married a weaver called {value}.",
    "colour": "{who} always wore {value} boots.",
}

GIVEN = (
    [
        "Vel",
        "Ary",
        "Bel",
        "Cor",
        "Dar",
        "Eli",
        "Fen",
        "Gal",
        "Hes",
        "Ilo",
        "Jas",
        "Kel",
        "Lir",
        "Mav",
        "Nor",
        "Per",
        "Quen",
        "Ros",
        "Sel",
        "Tam",
        "Ulv",
        "Vin",
        "Wen",
        "Yso",
        "Zan",
    ],
    ["mora", "dric", "wen", "ith", "ara", "ion", "elle", "ric", "ona", "ander", "ise", "uin"],
)
SURNAME = (
    [
        "Quis",
        "Brom",
        "Carr",
        "Dov",
        "Esk",
        "Grim",
        "Harl",
        "Isk",
        "Jor",
        "Krel",
        "Lom",
        "Narr",
        "Orv",
        "Pell",
        "Rask",
        "Sorr",
        "Tyl",
        "Umb",
        "Varr",
        "Wex",
        "Yarr",
        "Zorn",
    ],
    ["a", "e", "i", "o"],
    ["tral", "mond", "dane", "vey", "ker", "stan", "rell", "dow", "thorp", "gan"],
)
TOWN = (
    ["Ost", "Bren", "Kar", "Vell", "Dun", "Ast", "Mor", "Tir", "Zel", "Quo", "Ryn", "Sav", "Hal", "Ibr", "Lun"],
    ["ravel", "moor", "dale", "gard", "mere", "holt", "wyn", "esk", "ara", "vine"],
)
RIVER = (
    [
        "Al",
        "Bri",
        "Cal",
        "Dre",
        "Eo",
        "Fyr",
        "Gly",
        "Hol",
        "Isl",
        "Ker",
        "Lyr",
        "Nev",
        "Ors",
        "Pyr",
        "Sil",
        "Tev",
        "Ush",
        "Vyr",
    ],
    ["enne", "ash", "ora", "iss", "uin", "ay", "eth", "ond", "ime", "ax"],
)
TRADES = (
    "potter",
    "weaver",
    "cooper",
    "tanner",
    "miller",
    "baker",
    "chandler",
    "glazier",
    "saddler",
    "mason",
    "thatcher",
    "fletcher",
    "brewer",
    "dyer",
    "farrier",
    "bookbinder",
    "cartographer",
    "clockmaker",
    "ropemaker",
    "shipwright",
    "locksmith",
    "tailor",
    "vintner",
    "jeweller",
)
COLOURS = (
    "crimson",
    "yellow",
    "violet",
    "grey",
    "green",
    "scarlet",
    "brown",
    "black",
    "white",
    "blue",
    "purple",
    "silver",
    "golden",
    "teal",
    "amber",
    "ochre",
)
YEARS = range(1620, 1900)


@dataclass(frozen=True)
class Person:
    given: str
    surname: str
    facts: dict[str, str]  # kind -> value
    order: tuple[str, ...]  # the kinds in the order the passage states them

    def passage(self) -> str:
        facts = [KINDS[k].format(who=self.surname, value=self.facts[k]) for k in self.order]
        return " ".join([self.intro(), *facts])

    def intro(self) -> str:
        return INTRO.format(name=f"{self.given} {self.surname}")


@dataclass(frozen=True)
class Dataset:
    corpus: str
    items: tuple[Item, ...]
    validation: str


def check_sizes(entities: int, validation_entities: int) -> None:
    for name, value in (("entities", entities), ("validation entities", validation_entities)):
        if value < 2 or value % 2:
            raise CctkError(f"{name}={value} is out of range: people come in pairs, give an even number >= 2")
    if entities + validation_entities > MAX_PEOPLE:
        raise CctkError(f"{entities} + {validation_entities} people is more than the name pools hold ({MAX_PEOPLE})")


def make_dataset(
    seed: int, entities: int = ENTITIES, validation_entities: int = VALIDATION_ENTITIES, location: str = "char"
) -> Dataset:
    """Corpus, questions and validation text for ``entities`` people (and others for validation); an item's
    location is its passage's character offset (``char``) or 0-based line index (``line``)."""
    check_seeds((seed,))
    check_segment("blank-lines", location)
    check_sizes(entities, validation_entities)
    people = make_people(seed, entities + validation_entities)
    corpus_people, other_people = people[:entities], people[entities:]
    corpus: list[str] = []
    items: list[Item] = []
    offset = 0
    for i, person in enumerate(corpus_people):
        partner = corpus_people[i ^ 1]  # pairs: (0, 1), (2, 3), ...
        for kind in person.order:
            true = KINDS[kind].format(who=person.surname, value=person.facts[kind])
            false = KINDS[kind].format(who=person.surname, value=partner.facts[kind])
            items.append(Item(len(items) + 1, person.intro(), true, false, offset if location == "char" else 2 * i))
        corpus.append(person.passage())  # one line, then a blank one: passage i starts on line 2 i
        offset += len(corpus[-1]) + len(PASSAGE_END)
    validation = PASSAGE_END.join(p.passage() for p in other_people) + "\n"
    return Dataset(PASSAGE_END.join(corpus) + "\n", tuple(items), validation)


def make_people(seed: int, n: int) -> list[Person]:
    """``n`` people (``n`` even) with distinct names; pairs (2k, 2k+1) share their candidate values."""
    given = _names(seed, "given", GIVEN, n * 2)
    names, spouses = given[:n], given[n:]
    surnames = _names(seed, "surname", SURNAME, n)
    pools = {
        "town": _names(seed, "town", TOWN, n),
        "river": _names(seed, "river", RIVER, n),
        "spouse": spouses,
        "year": [str(y) for y in rng(seed, "krtest:year").choice(YEARS, size=n, replace=False)],
    }
    facts: list[dict[str, str]] = [{} for _ in range(n)]
    coins = rng(seed, "krtest:coin")
    for kind in KINDS:
        for k in range(0, n, 2):
            pair = sorted(_pair(seed, kind, k, pools))
            first = int(coins.integers(2))  # which of the two candidate values is person k's
            facts[k][kind], facts[k + 1][kind] = pair[first], pair[1 - first]
    order = rng(seed, "krtest:order")
    orders = [tuple(str(k) for k in order.permutation(list(KINDS))) for _ in range(n)]
    return [Person(names[i], surnames[i], facts[i], orders[i]) for i in range(n)]


def _pair(seed: int, kind: str, k: int, pools: dict[str, list[str]]) -> tuple[str, str]:
    """The two candidate values of pair ``k`` (people k and k+1) for ``kind``, distinct."""
    if kind in pools:  # values of their own: each stated exactly once in the corpus
        return pools[kind][k], pools[kind][k + 1]
    choices = TRADES if kind == "trade" else COLOURS
    a, b = rng(seed, f"krtest:{kind}:{k}").choice(len(choices), size=2, replace=False)
    return choices[a], choices[b]


def _names(seed: int, purpose: str, parts: tuple[list[str], ...], n: int) -> list[str]:
    """``n`` distinct names, each a concatenation of one piece of every list in ``parts``."""
    combos = ["".join(c) for c in itertools.product(*parts)]
    picked = rng(seed, f"krtest:names:{purpose}").permutation(len(combos))[:n]
    return [combos[i] for i in picked]


def write_dataset(dataset: Dataset, folder: Path, overwrite: bool = False) -> dict[str, Path]:
    """``corpus.txt``, ``questions.jsonl``, ``validation.txt`` in ``folder``; returns their paths. A file there
    already that holds something else (another seed's set, a generation from a corpus) is replaced only with
    ``overwrite``: one line before anything is written; the same set written again is no change."""
    folder = Path(folder)
    paths = {name: folder / name for name in (CORPUS, QUESTIONS, VALIDATION)}
    texts = {CORPUS: dataset.corpus, QUESTIONS: questions_text(dataset.items), VALIDATION: dataset.validation}
    other = [
        name for name, path in paths.items() if path.is_file() and path.read_bytes() != texts[name].encode("utf-8")
    ]
    if other and not overwrite:
        raise CctkError(f"{folder} holds another {other[0]} already: --overwrite replaces it, or give another --out")
    folder.mkdir(parents=True, exist_ok=True)
    for name, path in paths.items():
        path.write_text(texts[name], encoding="utf-8", newline="\n")
    return paths
