import json

import pytest
from click.testing import CliRunner

from cctk.cli.main import cli
from cctk.core.errors import CctkError
from cctk.krtest.measurement.items import Item, open_book, passages, read_items

GOOD = {
    "context": "Anna Berg appears.",
    "sentence_true": "Berg was born in Oslo.",
    "sentence_false": "Berg was born in Bergen.",
    "location": 0,
}


def write_lines(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def good_line(**changes):
    return json.dumps({**GOOD, **changes})


def error_of(path) -> str:
    with pytest.raises(CctkError) as caught:
        read_items(path)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_reads_items_in_file_order_with_line_numbers_skipping_blank_lines(tmp_path):
    path = write_lines(tmp_path / "q.jsonl", [good_line(location=3), "", good_line(context="Other one.", location=7)])
    items = read_items(path)
    assert items == [
        Item(1, GOOD["context"], GOOD["sentence_true"], GOOD["sentence_false"], 3),
        Item(3, "Other one.", GOOD["sentence_true"], GOOD["sentence_false"], 7),
    ]


def test_extra_fields_are_ignored(tmp_path):
    items = read_items(write_lines(tmp_path / "q.jsonl", [good_line(kind="town")]))
    assert items[0].location == 0


def test_bad_json_names_the_file_and_line(tmp_path):
    path = write_lines(tmp_path / "questions.jsonl", [good_line(), good_line(), '{"context": "x",'])
    message = error_of(path)
    assert message.startswith(f"{path} line 3: not valid JSON")


@pytest.mark.parametrize("field", ["context", "sentence_true", "sentence_false", "location"])
def test_missing_field(tmp_path, field):
    record = {k: v for k, v in GOOD.items() if k != field}
    path = write_lines(tmp_path / "questions.jsonl", [good_line(), json.dumps(record)])
    assert error_of(path) == f"{path} line 2: field '{field}' is missing"


@pytest.mark.parametrize("value", ["", "   "])
def test_empty_field(tmp_path, value):
    path = write_lines(tmp_path / "questions.jsonl", [good_line()] * 6 + [good_line(sentence_false=value)])
    assert error_of(path) == f"{path} line 7: field 'sentence_false' is empty"


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("context", 12, "field 'context' must be a string, got a number"),
        ("sentence_true", None, "field 'sentence_true' must be a string, got null"),
        ("sentence_false", ["a"], "field 'sentence_false' must be a string, got an array"),
        ("location", "12", "field 'location' must be an integer (a character offset or line index), got a string"),
        ("location", 1.5, "field 'location' must be an integer (a character offset or line index), got a number"),
        ("location", True, "field 'location' must be an integer (a character offset or line index), got a boolean"),
        ("location", -1, "field 'location' must be >= 0, got -1"),
    ],
)
def test_wrong_type(tmp_path, field, value, expected):
    path = write_lines(tmp_path / "questions.jsonl", [good_line(**{field: value})])
    assert error_of(path) == f"{path} line 1: {expected}"


def test_not_an_object_missing_file_and_no_items(tmp_path):
    assert "line 1: expected a JSON object" in error_of(write_lines(tmp_path / "a.jsonl", ["[1, 2]"]))
    assert error_of(tmp_path / "nope.jsonl") == f"questions file {tmp_path / 'nope.jsonl'} does not exist"
    assert error_of(write_lines(tmp_path / "b.jsonl", ["", " "])).endswith("holds no items")


def test_passages_and_open_book():
    corpus = "First passage. Two.\n\nSecond passage.\n"
    second = corpus.index("Second")
    assert passages(corpus) == ["First passage. Two.", "Second passage."]
    item = Item(4, "Context.", "a", "b", second)
    book = open_book([item], corpus)[0]
    assert book.book == "Second passage." and book.context == "Context."  # the context itself is kept
    assert book.scored_context == "Second passage.\n\nContext."
    assert open_book([Item(4, "Context.", "a", "b", second + 3)], corpus)[0].book == "Second passage."  # inside it
    assert open_book([Item(4, "Context.", "a", "b", 2)], corpus, unit="line")[0].book == "Second passage."
    with pytest.raises(
        CctkError, match=r"^q line 4: field 'location' \(500, as a char location\) points at no passage"
    ):
        open_book([Item(4, "Context.", "a", "b", 500)], corpus, "q")
    with pytest.raises(CctkError, match=r"\(1, as a line location\) points at no passage"):
        open_book([Item(4, "Context.", "a", "b", 1)], corpus, "q", unit="line")  # line 1 is blank


def test_cli_fails_in_one_line_before_any_run_or_folder(tmp_path, tracking_uri):
    import mlflow

    bad = write_lines(tmp_path / "questions.jsonl", [good_line(), good_line(sentence_false="")])
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli, ["krtest", "eval", "--model", "smollm2-135m-bundled", "--questions", str(bad), "--out", str(out)]
    )
    assert result.exit_code == 1
    assert result.output.strip() == f"Error: {bad} line 2: field 'sentence_false' is empty"
    assert not out.exists()
    assert mlflow.search_runs(search_all_experiments=True).empty


def test_cli_open_book_without_corpus_fails(tmp_path, tracking_uri):
    good = write_lines(tmp_path / "questions.jsonl", [good_line()])
    result = CliRunner().invoke(
        cli, ["krtest", "eval", "--questions", str(good), "--open-book", "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 1 and "needs --corpus" in result.output


def test_a_field_past_the_bound_fails_stating_the_bound(tmp_path, tokenizer):
    from cctk.krtest.measurement.items import MAX_CHARS

    path = write_lines(tmp_path / "q.jsonl", [good_line(), good_line(context="x " * 3_000_000)])
    assert error_of(path) == (
        f"{path} line 2: field 'context' is 6000000 characters long; the bound is {MAX_CHARS} characters per field"
    )
    short = write_lines(tmp_path / "t.jsonl", [good_line(sentence_false="Berg was born in " + "Bergen " * 10)])
    with pytest.raises(CctkError, match=r"line 1: field 'sentence_false' is \d+ tokens long; the bound is 8 tokens"):
        read_items(short, tokenizer=tokenizer, max_tokens=8)


def test_a_lone_surrogate_is_refused_with_its_line(tmp_path):
    path = write_lines(
        tmp_path / "q.jsonl",
        [good_line(), '{"context": "Anna \\ud800", "sentence_true": "a", "sentence_false": "b", "location": 0}'],
    )
    assert error_of(path) == (
        f"{path} line 2: field 'context' is not valid Unicode text (a lone surrogate '\\ud800' at character 5)"
    )


def test_duplicates_are_scored_once_and_reported(tmp_path):
    path = write_lines(tmp_path / "q.jsonl", [good_line()] * 5 + [good_line(location=3)])
    said = []
    items = read_items(path, report=said.append)
    assert [i.line for i in items] == [1, 6]
    assert said == [f"{path}: 4 duplicate items scored once (2 distinct of 6)"]
    assert len(read_items(path, keep_duplicates=True)) == 6


def test_a_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + (good_line() + "\n").encode())
    assert [i.context for i in read_items(path)] == [GOOD["context"]]


def test_an_item_past_the_models_context_is_refused_naming_its_line_and_tokens(tmp_path, tokenizer):
    """The bound is in tokens of the scoring tokenizer, counted as the scorer feeds the item: the context with
    its special tokens, then the answer sides' common length."""
    from cctk.krtest.measurement.scoring import check_fits

    long = "Anna Berg appears in the town hall of Oslo. " * 12
    items = read_items(write_lines(tmp_path / "q.jsonl", [good_line(), good_line(context=long)]))
    context = len(tokenizer(long)["input_ids"])
    answer = min(
        len(tokenizer(" " + GOOD[s], add_special_tokens=False)["input_ids"])
        for s in ("sentence_true", "sentence_false")
    )
    assert context > 100 and answer >= 5
    check_fits(tokenizer, items, context + answer, "q.jsonl")  # exactly at the bound: scored
    with pytest.raises(CctkError) as caught:
        check_fits(tokenizer, items, context + answer - 1, "q.jsonl")
    assert str(caught.value) == (
        f"q.jsonl line 2: the item is {context + answer} tokens of the scoring tokenizer "
        f"({context} of context, {answer} of answer); the model reads at most "
        f"{context + answer - 1} tokens"
    )


def test_eval_refuses_an_item_past_the_models_context_before_any_run(tiny_dir, tmp_path, tracking_uri):
    """The tiny model reads 256 positions: an item of more is refused in one line, no run, no output folder;
    a field alone past them is named by the per-field bound."""
    import mlflow

    long = "Anna Berg appears in the town hall of Oslo. " * 25 + "Anna Berg appears."  # 254 tokens: its answer
    # takes it past 256
    for name, line, expected in [
        (
            "whole",
            good_line(context=long),
            (
                r"line 2: the item is \d+ tokens of the scoring "
                r"tokenizer \(\d+ of context, \d+ of answer\); the model reads at most 256 tokens"
            ),
        ),
        (
            "field",
            good_line(context=long * 2),
            (
                r"line 2: field 'context' is \d+ tokens long; "
                "the bound is 256 tokens per field"
            ),
        ),
    ]:
        path = write_lines(tmp_path / f"{name}.jsonl", [good_line(), line])
        result = CliRunner().invoke(
            cli, ["krtest", "eval", "--model", str(tiny_dir), "--questions", str(path), "--out", str(tmp_path / name)]
        )
        assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1, result.output
        assert f"{path} " in result.output and __import__("re").search(expected, result.output), result.output
        assert not (tmp_path / name).exists()
    assert mlflow.MlflowClient().search_experiments()[0].name == "Default"  # no cctk experiment, no run
