import re

import pytest
from click.testing import CliRunner
from scipy import stats

from cctk.cli.main import cli
from cctk.core.errors import CctkError
from cctk.krtest.generation.generate import KINDS, make_dataset, make_people, write_dataset
from cctk.krtest.measurement.items import passages, read_items
from cctk.krtest.measurement.passages import passage_at, segment


@pytest.fixture(scope="module")
def data():
    return make_dataset(0)


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    for folder, seed in (("a", 5), ("b", 5), ("c", 6)):
        result = CliRunner().invoke(cli, ["krtest", "generate", "--seed", str(seed), "--out", str(tmp_path / folder)])
        assert result.exit_code == 0, result.output
    for name in ("corpus.txt", "questions.jsonl", "validation.txt"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
        assert (tmp_path / "a" / name).read_bytes() != (tmp_path / "c" / name).read_bytes()


def test_default_size_and_files_round_trip(data, tmp_path):
    assert len(data.items) >= 200
    paths = write_dataset(data, tmp_path)
    assert read_items(paths["questions.jsonl"]) == list(data.items)
    assert len(passages(data.corpus)) == 36 and len(passages(data.validation)) == 8


def split(sentence: str, surname: str) -> tuple[str, str]:
    """(kind, value) of a generated sentence about ``surname``."""
    for kind, template in KINDS.items():
        pattern = re.escape(template).replace(re.escape("{who}"), re.escape(surname))
        pattern = pattern.replace(re.escape("{value}"), "(.+)")
        match = re.fullmatch(pattern, sentence)
        if match:
            return kind, match.group(1)
    raise AssertionError(f"no template matches {sentence!r}")


def test_items_differ_in_exactly_the_value_and_the_context_gives_nothing_away(data):
    for item in data.items:
        surname = item.context.split()[1]
        kind_true, true = split(item.sentence_true, surname)
        kind_false, false = split(item.sentence_false, surname)
        assert kind_true == kind_false and true != false  # one template, one surname: only the value differs
        assert true not in item.context and false not in item.context
        passage = passage_at(segment(data.corpus), item.location)
        assert passage.start == item.location  # location points at the start of the source passage
        passage = passage.text
        assert passage.startswith(item.context)
        assert item.sentence_true in passage and item.sentence_false not in passage


def test_every_false_value_is_someone_elses_fact_in_the_corpus(data):
    for item in data.items:
        surname = item.context.split()[1]
        _, false = split(item.sentence_false, surname)
        others = [p for p in passages(data.corpus) if not p.startswith(item.context)]
        assert any(re.search(rf" {re.escape(false)}[ .]", p) for p in others)


def test_which_value_is_true_is_a_coin_flip():
    # For each pair of people and kind, is the first person's value the alphabetically first candidate?
    flips = []
    for seed in range(5):
        people = make_people(seed, 36)
        for k in range(0, 36, 2):
            flips.extend(people[k].facts[kind] < people[k + 1].facts[kind] for kind in KINDS)
    assert stats.binomtest(sum(flips), len(flips)).pvalue > 0.001
    assert 0.4 < sum(flips) / len(flips) < 0.6


def test_validation_people_are_not_in_the_corpus(data):
    corpus_names = {p.split(" appears")[0] for p in passages(data.corpus)}
    for passage in passages(data.validation):
        name = passage.split(" appears")[0]
        assert name not in corpus_names and name.split()[1] not in data.corpus


def test_sizes_are_checked():
    with pytest.raises(CctkError, match="even number"):
        make_dataset(0, entities=5)
    with pytest.raises(CctkError, match="name pools"):
        make_dataset(0, entities=200)
    with pytest.raises(CctkError, match=r"seeds must be in 0..2\*\*32-1 \(4294967295\), got -1$"):
        make_dataset(-1)  # the one rule for seeds (core.config.check_seeds), as for the manuals' pipelines


def test_line_locations_point_at_the_same_passages(data):
    by_line = make_dataset(0, location="line")
    lines = by_line.corpus.split("\n")
    assert by_line.corpus == data.corpus
    for char_item, line_item in zip(data.items, by_line.items, strict=True):
        assert lines[line_item.location] == passage_at(segment(data.corpus), char_item.location).text
    assert {i.location for i in by_line.items} == set(range(0, 72, 2))  # 36 passages, each a line and a blank one
