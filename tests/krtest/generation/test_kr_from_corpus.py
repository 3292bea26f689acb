"""Items from a corpus: replies recorded from a real teacher (the bundled SmolLM2 behind ``transformers serve``,
greedy) replayed, every count checked; the command's checks; a local teacher on the tiny model."""

import json
from pathlib import Path

import pytest
from builders import chat_tokens, reading
from click.testing import CliRunner
from mlflow import MlflowClient

from cctk.cli.main import cli
from cctk.core.errors import CctkError
from cctk.krtest.generation.from_corpus import GenerationOptions, generate, write_generation
from cctk.krtest.generation.teacher import messages, parse_reply
from cctk.krtest.measurement.items import read_items
from cctk.krtest.measurement.passages import segment

DATA = Path(__file__).parents[2] / "data"
RECORDED = [json.loads(line) for line in (DATA / "kr_recorded_replies.jsonl").read_text().splitlines()]
CORPUS = (DATA / "kr_recorded_corpus.txt").read_text()


class Replay:
    """A teacher that answers with recorded replies, in order, and remembers what it was asked."""

    max_tokens = 400

    def __init__(self, replies):
        self.replies, self.asked = list(replies), []

    def connect(self):
        pass

    def complete(self, chat, n=0, limit=None):
        self.asked.append(chat)
        return self.replies[len(self.asked) - 1]

    def describe(self):
        return {"kind": "replay"}


def test_recorded_replies_are_judged_rule_by_rule(tokenizer, tmp_path):
    teacher = Replay(r["reply"] for r in RECORDED)
    done = generate(CORPUS, teacher, tokenizer, GenerationOptions(per_passage=1), echo=lambda *_: None)
    verdicts = [p["verdict"] for p in done.proposals]
    assert verdicts == [
        "no_fact_replaced",  # "It has one school.": a fact dropped, not changed (and still true)
        "not_a_small_edit",
        "not_a_small_edit",  # the false sentence is the true one
        # "They are not covered in heather.": only "not" added (its true side repeats the
        # context as well, a rule checked later)
        "no_fact_replaced",
        "not_a_small_edit",
        "kept",
        "kept",
        "not_a_small_edit",
    ]  # "It has three arches of grey stone.": two changes, 3 of 7 words kept
    assert (done.passages, done.proposed, done.kept, done.surplus) == (8, 8, 2, 0)
    assert done.kept + sum(done.rejected.values()) == done.proposed
    assert [p["location"] for p in done.proposals] == [r["location"] for r in RECORDED]
    assert teacher.asked[5][-1]["content"].startswith("Passage: The Dunholt ferry crosses the Ouse.")
    paths = write_generation(done, tmp_path, {"teacher": teacher.describe(), "seed": 0})
    kept = read_items(paths["questions.jsonl"])
    assert [(i.sentence_true, i.sentence_false, i.location) for i in kept] == [
        ("It carries 40 passengers at a time.", "It carries 10 passengers at a time.", 387),
        ("She designed nine lighthouses.", "She designed one lighthouse.", 460),
    ]
    record = json.loads(paths["generation.json"].read_text())
    assert (record["passages"], record["proposed"], record["kept"]) == (8, 8, 2)
    assert record["rejected"]["not_a_small_edit"] == 4 and record["rejected"]["no_fact_replaced"] == 2
    assert record["prompt_version"] == "kr-items-2" and record["seed"] == 0
    assert len(paths["replies.jsonl"].read_text().splitlines()) == 8


def test_missing_surplus_malformed_unparsable_and_duplicate(tokenizer):
    corpus = "Kelby has 312 inhabitants. It has one school.\n\nKelby has 312 inhabitants. It has one school.\n"
    good = {
        "context": "Kelby has 312 inhabitants.",
        "sentence_true": "It has one school.",
        "sentence_false": "It has two schools.",
    }
    replies = [
        json.dumps([good, "a bare string", {"context": "x"}, good]),  # 2 asked: 1 surplus
        "Sure! ```json\n" + json.dumps(good) + "\n```",
    ]  # one object: the second item is missing
    done = generate(corpus, Replay(replies), tokenizer, GenerationOptions(per_passage=2), echo=lambda *_: None)
    assert [p["verdict"] for p in done.proposals] == ["kept", "malformed", "duplicate", "no_item"]
    assert (done.proposed, done.kept, done.surplus) == (4, 1, 2)
    assert done.rejected["malformed"] == done.rejected["duplicate"] == done.rejected["no_item"] == 1
    nothing = generate(
        corpus,
        Replay(["I cannot help with that.", "[{broken"]),
        tokenizer,
        GenerationOptions(per_passage=3),
        echo=lambda *_: None,
    )
    assert (nothing.proposed, nothing.kept, nothing.rejected["no_item"]) == (6, 0, 6)


def test_parse_reply():
    assert parse_reply('[{"a": 1}]') == [{"a": 1}]
    assert parse_reply('Here:\n```json\n{"items": [{"a": 1}, {"a": 2}]}\n```') == [{"a": 1}, {"a": 2}]
    assert parse_reply('{"context": "c"} and more') == [{"context": "c"}]
    assert parse_reply('[{"a": 1}"}]') == [{"a": 1}]  # a recorded reply with a stray '"}': its object is read
    assert parse_reply("no JSON here") is None


@pytest.mark.parametrize("k", [1, 3, 4])
def test_prompt_examples_show_as_many_items_as_asked_each_on_another_fact(k):
    chat = messages("Kelby has a school.", k)
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert "one fact changed" in chat[0]["content"] and "different fact" in chat[0]["content"]
    assert chat[-1]["content"].startswith(f"Passage: Kelby has a school.\n\nWrite {k} item")
    shown = [parse_reply(m["content"]) for m in chat if m["role"] == "assistant"]
    assert [len(s) for s in shown] == [k, k]  # a small teacher copies the length of the reply it is shown
    for items in shown:  # each item of a worked reply tests another sentence of its passage
        assert len({i["sentence_true"] for i in items}) == k
    assert [len(s) for s in (parse_reply(m["content"]) for m in messages("x", 7) if m["role"] == "assistant")] == [4, 4]


def test_max_passages_and_line_locations(tokenizer):
    good = json.dumps(
        [
            {
                "context": "Kelby is a village on the river Calder.",
                "sentence_true": "It has 312 inhabitants and one school.",
                "sentence_false": "It has 412 inhabitants and one school.",
            }
        ]
    )
    done = generate(
        CORPUS,
        Replay([good]),
        tokenizer,
        GenerationOptions(per_passage=1, location="line", max_passages=1),
        echo=lambda *_: None,
    )
    assert (done.passages, done.kept) == (1, 1) and done.items[0].location == 0
    assert segment(CORPUS)[0].first_line == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--corpus", "{corpus}"], "--corpus needs --teacher"),
        (
            ["--corpus", "{corpus}", "--teacher", "smollm2-135m-bundled", "--entities", "4"],
            "mean nothing with --corpus",
        ),
        (["--per-passage", "2"], "--per-passage is for items from your corpus"),
        (["--teacher", "smollm2-135m-bundled"], "--teacher is for items from your corpus"),
        (
            ["--corpus", "{corpus}", "--teacher", "smollm2-135m-bundled", "--per-passage", "0"],
            "--per-passage must be >= 1",
        ),
        (["--corpus", "{corpus}", "--teacher", "smollm2-135m-bundled", "--segment", "words"], "unknown segmentation"),
        (
            ["--corpus", "{corpus}", "--teacher", "smollm2-135m-bundled", "--teacher-model", "x"],
            "for an endpoint teacher",
        ),
        (["--corpus", "{corpus}", "--teacher", "no-such-model"], "unknown model 'no-such-model'"),
        (
            ["--corpus", "{corpus}", "--teacher", "http://127.0.0.1:9/v1", "--api-key-env", "CCTK_NO_SUCH_KEY"],
            "CCTK_NO_SUCH_KEY: that environment variable is not set",
        ),
        (["--corpus", "{corpus}", "--teacher", "http://127.0.0.1:9/v1"], "cannot reach the teacher endpoint"),
        (["--oracle", "http://127.0.0.1:9/v1"], "--oracle is for items from your corpus"),
        (
            ["--corpus", "{corpus}", "--teacher", "smollm2-135m-bundled", "--oracle-model", "x"],
            "--oracle-model needs --oracle",
        ),
        (
            ["--corpus", "{corpus}", "--teacher", "smollm2-135m-bundled", "--oracle-api-key-env", "K"],
            "--oracle-api-key-env needs --oracle",
        ),
        (
            [
                "--corpus",
                "{corpus}",
                "--teacher",
                "smollm2-135m-bundled",
                "--oracle",
                "smollm2-135m-bundled",
                "--oracle-model",
                "x",
            ],
            "--oracle-model and --api-key-env are for an endpoint oracle (--oracle http://...)",
        ),
        (
            ["--corpus", "{corpus}", "--teacher", "smollm2-135m-bundled", "--oracle", "no-such-model"],
            "unknown model 'no-such-model'",
        ),
        (
            [
                "--corpus",
                "{corpus}",
                "--teacher",
                "smollm2-135m-bundled",
                "--oracle",
                "http://127.0.0.1:9/v1",
                "--oracle-api-key-env",
                "CCTK_NO_SUCH_KEY",
            ],
            "--oracle-api-key-env CCTK_NO_SUCH_KEY: that environment variable",
        ),
        (  # the key itself typed where its variable's name belongs: refused, not echoed
            ["--corpus", "{corpus}", "--teacher", "http://127.0.0.1:9/v1", "--api-key-env", "sk-proj-S3cretKEY"],
            "--api-key-env takes the name of an environment variable (letters, digits and _), and what it was",
        ),
        (
            [
                "--corpus",
                "{corpus}",
                "--teacher",
                "smollm2-135m-bundled",
                "--oracle",
                "http://127.0.0.1:9/v1",
            ],
            "cannot reach the oracle endpoint http://127.0.0.1:9/v1",
        ),  # before the teacher works
        (  # a teacher named by its model is asked for /models too: one that does not answer fails here
            ["--corpus", "{corpus}", "--teacher", "http://127.0.0.1:9/v1", "--teacher-model", "t"],
            "cannot reach the teacher endpoint http://127.0.0.1:9/v1",
        ),
        (["--device", "cpu"], "--device is for items from your corpus"),
        (  # nothing generates here: an endpoint teacher and no oracle
            ["--corpus", "{corpus}", "--teacher", "http://127.0.0.1:9/v1", "--device", "cpu"],
            "--device cpu is where a local model generates; an endpoint's server chooses its own",
        ),
        (
            ["--corpus", "{corpus}", "--teacher", "smollm2-135m-bundled", "--device", "cuda"],
            "--device cuda: this torch build (",  # this machine's CPU build, before the model loads
        ),
        (["--dtype", "bfloat16"], "--dtype is for items from your corpus"),
        (
            ["--corpus", "{corpus}", "--teacher", "http://127.0.0.1:9/v1", "--dtype", "bfloat16"],
            "--dtype bfloat16 is what a local model's weights load in; an endpoint's server chooses its own",
        ),
        (
            ["--corpus", "{corpus}", "--teacher", "smollm2-135m-bundled", "--device", "cpu", "--dtype", "float16"],
            "--dtype float16 is for CUDA devices, not cpu; use --dtype bfloat16 or float32",
        ),
        (
            [
                "--corpus",
                "{corpus}",
                "--teacher",
                "http://127.0.0.1:9/v1",
                "--oracle",
                "smollm2-135m-bundled",
                "--device",
                "tpu",
            ],
            "--device 'tpu' is not a device cctk runs on",  # a local oracle's device, before the endpoint is asked
        ),
    ],
)
def test_generate_checks_before_any_work(tmp_path, args, message, monkeypatch):
    monkeypatch.delenv("CCTK_NO_SUCH_KEY", raising=False)
    out = tmp_path / "out"
    argv = [a.format(corpus=DATA / "kr_corpus.txt") for a in args]
    result = CliRunner().invoke(cli, ["krtest", "generate", "--out", str(out), *argv])
    assert result.exit_code == 1, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1
    assert not out.exists() and "S3cret" not in result.output


def test_an_endpoint_url_is_shown_without_its_secrets(tmp_path):
    """Before: a teacher's ``user:password@`` and ``?api_key=`` went into its error lines whole."""
    url = "http://alice:S3cret@127.0.0.1:9/v1?api_key=K3y"
    args = ["krtest", "generate", "--out", str(tmp_path / "out"), "--corpus", str(DATA / "kr_corpus.txt")]
    result = CliRunner().invoke(cli, [*args, "--teacher", url])
    assert result.exit_code == 1, result.output
    assert "cannot reach the teacher endpoint http://alice:***@127.0.0.1:9/v1?api_key=*** " in result.output
    assert "S3cret" not in result.output and "K3y" not in result.output
    result = CliRunner().invoke(cli, [*args, "--teacher", "https://ghp_S3cretTOKEN@127.0.0.1:9/v1"])  # a token
    assert "cannot reach the teacher endpoint https://***@127.0.0.1:9/v1 " in result.output, result.output
    assert "S3cret" not in result.output


def two_passages(tmp_path, tokenizer):
    """A corpus of a short passage and a long one: the corpus, the short one, and as the tiny teacher sends them,
    its instructions' tokens and the long passage's prompt tokens, and the long passage's own tokens."""
    short = "The bridge has five arches."
    long = " ".join(f"Stone {n} of the bridge was cut in {1800 + n}." for n in range(30))
    corpus = tmp_path / "c.txt"
    corpus.write_text(f"{short}\n\n{long}\n")
    counted = len(tokenizer(long, add_special_tokens=False)["input_ids"])
    return corpus, short, chat_tokens(tokenizer, messages("", 1)), chat_tokens(tokenizer, messages(long, 1)), counted


def generate_local(corpus, teacher, out, *extra):
    """``krtest generate`` of ``corpus`` with the local ``teacher`` (its own tokenizer), one item a passage, replies
    of up to 16 tokens."""
    args = ["--corpus", str(corpus), "--teacher", str(teacher), "--tokenizer", str(teacher), "--per-passage", "1"]
    return CliRunner().invoke(cli, ["krtest", "generate", *args, "--max-tokens", "16", "--out", str(out), *extra])


def test_local_teacher_is_seeded(tiny_dir, tmp_path, tracking_uri):
    tiny_dir = reading(tiny_dir, tmp_path / "teacher", 2048)  # the instructions alone are 496 tokens

    def run(name, *extra):
        result = CliRunner().invoke(
            cli,
            [
                "krtest",
                "generate",
                "--corpus",
                str(DATA / "kr_corpus.txt"),
                "--teacher",
                str(tiny_dir),
                "--tokenizer",
                str(tiny_dir),
                "--per-passage",
                "1",
                "--max-passages",
                "2",
                "--max-tokens",
                "16",
                "--out",
                str(tmp_path / name),
                *extra,
            ],
        )
        assert result.exit_code == 0, result.output
        record = json.loads((tmp_path / name / "generation.json").read_text())
        assert record["passages"] == 2 and record["kept"] + sum(record["rejected"].values()) == record["proposed"] == 2
        return record, (tmp_path / name / "replies.jsonl").read_text()

    greedy, replies = run("a")
    assert greedy["teacher"] == {
        "kind": "local",
        "model": str(tiny_dir),
        "device": "cpu",  # the default where there is no GPU
        "dtype": "float32",  # the default
        "decoding": "greedy",
        "temperature": 0.0,
        "max_tokens": 16,
    }
    assert len(replies.splitlines()) == 2 and all(json.loads(r)["reply"] for r in replies.splitlines())
    sampled, first = run("c", "--temperature", "1.0", "--seed", "5")
    assert sampled["seed"] == 5 and sampled["teacher"]["decoding"] == "sampled"
    assert (
        run("d", "--temperature", "1.0", "--seed", "5")[1]
        == first
        != run("e", "--temperature", "1.0", "--seed", "6")[1]
    )


def test_a_local_teacher_answers_concurrent_requests_one_at_a_time_as_seeded(tiny_dir, tmp_path, tracking_uri):
    """--concurrency N sends N requests at once: an endpoint's server batches them, a local teacher answers them one
    at a time, each drawn from its own seed (its replies as with --concurrency 1, not threads racing for the global
    generator, nor N caches on the device at once)."""
    teacher = reading(tiny_dir, tmp_path / "teacher", 2048)
    sampled = ["--temperature", "1.0", "--seed", "5", "--max-passages", "4"]
    one = generate_local(DATA / "kr_corpus.txt", teacher, tmp_path / "one", *sampled)
    four = generate_local(DATA / "kr_corpus.txt", teacher, tmp_path / "four", *sampled, "--concurrency", "4")
    assert one.exit_code == 0 and four.exit_code == 0, one.output + four.output
    replies = [(tmp_path / name / "replies.jsonl").read_text() for name in ("one", "four")]
    assert len(replies[0].splitlines()) == 4 and replies[0] == replies[1]


def test_a_local_teachers_prompt_past_its_context_is_refused_before_the_first_request(
    tiny_dir, tmp_path, tracking_uri, monkeypatch
):
    """A local teacher's longest prompt (the instructions and its passage, as its chat template sends them) and a
    reply of --max-tokens must lie within its stated context: past it a model with learned positions fails and a
    rotary one writes where it never read. Refused in one line before any request, with the
    --max-tokens-per-passage that fits (the passage's tokens scaled to the room left), which then runs."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    corpus, short, instructions, tokens, counted = two_passages(tmp_path, tokenizer)
    limit = instructions + 16 + counted // 2  # the short passage fits, the long one does not
    teacher = reading(tiny_dir, tmp_path / "teacher", limit)

    def generate_with(out, *extra):
        return generate_local(corpus, teacher, out, *extra)

    from cctk.core.lm import models

    with monkeypatch.context() as weights:  # not yet needed (undone after: the store's variable stays set)
        weights.setattr(models, "load_model", lambda *a, **k: pytest.fail("its weights loaded"))
        result = generate_with(tmp_path / "out")
    assert result.exit_code == 1, result.output
    fits = counted * (limit - 16 - instructions) // (tokens - instructions)
    assert result.output == (
        f"Error: the passage at c.txt location {len(short) + 2} makes a prompt of {tokens} tokens ({instructions} of "
        f"them the instructions), and with a reply of up to 16 (--max-tokens) it is past {teacher}'s context of "
        f"{limit} tokens (its position embeddings): --max-tokens-per-passage {fits} splits passages at sentence ends "
        f"(this one is {counted} tokens as the tokenizer counts), or a teacher that reads more\n"
    )
    assert not (tmp_path / "out" / "replies.jsonl").exists() and not (tmp_path / "out" / "journal.jsonl").exists()
    # the line's suggestion runs: every passage's prompt and reply within the context
    done = generate_with(tmp_path / "split", "--max-tokens-per-passage", str(fits))
    assert done.exit_code == 0, done.output
    journal = [json.loads(line) for line in (tmp_path / "split" / "journal.jsonl").read_text().splitlines()]
    units = [line for line in journal if "unit" in line]
    assert len(units) > 2  # the long passage split
    for unit in units:  # cut at 16, asked again with 32: the second reply stops at the context where it ends
        assert unit["requests"] == 2 and unit["finish_reason"] == "length"
        each = unit["usage"]["prompt_tokens"] // 2
        assert unit["usage"]["completion_tokens"] - 16 == min(32, limit - each)
    assert any(limit - unit["usage"]["prompt_tokens"] // 2 < 32 for unit in units)  # one retry cut by the context
    # the instructions alone too long for the tiny model's own 256 positions: no passage split helps
    alone = generate_local(corpus, tiny_dir, tmp_path / "none")
    assert alone.exit_code == 1 and alone.output == (
        f"Error: the teacher's instructions ({instructions} tokens) and a reply of up to 16 (--max-tokens) are past "
        f"{tiny_dir}'s context of 256 tokens (its position embeddings): a smaller --max-tokens, or a teacher that "
        "reads more\n"
    )


def test_a_sentence_past_a_local_teachers_context_is_cut_by_token_windows_not_sentence_ends(
    tiny_dir, tmp_path, tracking_uri
):
    """A passage of one long sentence stays whole under --max-tokens-per-passage (it splits at sentence ends), so
    the line suggests --segment tokens:N, whose windows then run."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    sentence = ", ".join(f"stone {n} of the bridge was cut in {1800 + n}" for n in range(30)) + "."
    corpus = tmp_path / "c.txt"
    corpus.write_text(f"The bridge has five arches.\n\n{sentence}\n")
    instructions, tokens = chat_tokens(tokenizer, messages("", 1)), chat_tokens(tokenizer, messages(sentence, 1))
    counted = len(tokenizer(sentence, add_special_tokens=False)["input_ids"])
    limit = instructions + 16 + counted // 2
    teacher = reading(tiny_dir, tmp_path / "teacher", limit)
    fits = counted * (limit - 16 - instructions) // (tokens - instructions)
    for extra in ((), ("--max-tokens-per-passage", str(fits))):  # the bound given already: the same line
        result = generate_local(corpus, teacher, tmp_path / "out", *extra)
        assert result.exit_code == 1 and result.output.endswith(
            f"past {teacher}'s context of {limit} tokens (its position embeddings): --segment tokens:{fits} cuts "
            f"passages into windows of tokens (this one holds a sentence of {counted} tokens as the tokenizer counts, "
            "which --max-tokens-per-passage leaves whole), or a teacher that reads more\n"
        ), result.output
    done = generate_local(corpus, teacher, tmp_path / "windows", "--segment", f"tokens:{fits}")
    assert done.exit_code == 0, done.output
    assert json.loads((tmp_path / "windows" / "generation.json").read_text())["passages"] > 2  # the sentence cut


def test_a_local_teachers_request_past_the_memory_free_is_refused_before_the_first(
    tiny_dir, tmp_path, tracking_uri, monkeypatch
):
    """Once loaded, a local teacher's longest request (its key-value cache and prefill, ``memory.generating``, with
    a retry's reply of twice --max-tokens) past what the plan set aside must fit what is free where it runs (here a
    CPU whose free memory is faked between the short passage's request and the long one's): one line naming the
    passage and the --max-tokens-per-passage that fits, which then runs."""
    from transformers import AutoTokenizer

    from cctk.core.lm import device, memory
    from cctk.core.lm.models import model_config

    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    corpus, short, instructions, tokens, counted = two_passages(tmp_path, tokenizer)
    brief = chat_tokens(tokenizer, messages(short, 1))
    teacher = reading(tiny_dir, tmp_path / "teacher", 4096)
    shape = memory.Shape.of_config(model_config(str(teacher)))
    beside = memory.CPU_FIRST_STEP + 4 * shape.params  # the first step's runtime and the weights, not loaded yet
    free = beside + memory.generating(shape, (brief + tokens) // 2, 32)
    monkeypatch.setattr(memory, "PLANNED_PROMPT", 0)  # the plan sets a reply's cache alone aside for a request
    monkeypatch.setattr(device, "room", lambda where: memory.Room(free, free, "cpu", "cpu"))
    most = next(p for p in range(tokens, 0, -1) if beside + memory.generating(shape, p, 32) <= free)
    fits = counted * (most - instructions) // (tokens - instructions)

    def generate_with(out, *extra):
        return generate_local(corpus, teacher, out, *extra)

    result = generate_with(tmp_path / "out")
    assert result.exit_code == 1, result.output
    need = memory.gib(beside + memory.generating(shape, tokens, 32))
    assert result.output == (
        f"Error: the passage at c.txt location {len(short) + 2} makes a prompt of {tokens} tokens ({instructions} of "
        f"them the instructions), and with a reply of up to 16 (--max-tokens) it is past the memory free: a request "
        f"of {tokens} prompt tokens and a reply of up to 32 needs about {need} in host memory with {teacher}'s "
        f"weights ({memory.gib(4 * shape.params)}) (its key-value cache and the prompt's activations), "
        f"{memory.gib(free)} free now: "
        f"--max-tokens-per-passage {fits} splits passages at sentence ends (this one is {counted} tokens as the "
        "tokenizer counts), or --dtype bfloat16 (its cache at half), or a device with more free\n"
    )
    assert not (tmp_path / "out" / "journal.jsonl").exists()
    done = generate_with(tmp_path / "split", "--max-tokens-per-passage", str(fits))
    assert done.exit_code == 0, done.output


def test_a_local_teachers_retry_stops_at_its_context(tiny_dir, tmp_path):
    """A reply cut by --max-tokens is asked again with twice the limit: a local teacher's stops where its
    context ends (the prompt's tokens and the reply's within it), cut there."""
    from cctk.krtest.generation.teacher import make_teacher

    chat = messages("The bridge has five arches.", 1)
    teacher = make_teacher(str(reading(tiny_dir, tmp_path / "teacher", 560)), max_tokens=16, device="cpu")
    teacher.connect()
    prompt = teacher.prompt_tokens(chat)
    assert 500 < prompt < 544  # 16 tokens fit
    reply = teacher.complete(chat, 0, 200)
    assert (reply.prompt_tokens, reply.completion_tokens, reply.finish_reason) == (prompt, 560 - prompt, "length")
    # a prompt past the context (an oracle's, not checked before its first request): one line, nothing generated
    short = make_teacher(str(reading(tiny_dir, tmp_path / "short", 400)), max_tokens=16, device="cpu")
    short.connect()
    with pytest.raises(CctkError) as error:
        short.complete(chat, 3)
    assert str(error.value) == (
        f"{tmp_path / 'short'}'s request 3 is a prompt of {prompt} tokens, past its context of 400 tokens (its "
        "position embeddings)"
    )


def test_a_local_teacher_in_bfloat16_loads_plans_and_records_half_its_weights(tiny_dir, tmp_path, monkeypatch):
    """--dtype bfloat16: the weights load and generate in bfloat16, planned at 2 bytes a parameter, recorded in
    generation.json's teacher; refused where the device has no bf16 arithmetic (the CPU's flags stand in for one
    with and one without)."""
    import torch

    from cctk.core.lm import compute
    from cctk.krtest.generation.teacher import make_teacher

    monkeypatch.setattr(compute, "bf16_missing", lambda device, flags=None: None)
    tiny_dir = reading(tiny_dir, tmp_path / "teacher", 2048)  # the instructions alone are 496 tokens
    teacher = make_teacher(str(tiny_dir), max_tokens=16, device="cpu", dtype="bfloat16")
    full = make_teacher(str(tiny_dir), max_tokens=16, device="cpu")
    assert 2 * teacher.plan.estimate.weights == full.plan.estimate.weights == 4 * teacher.plan.shape.params
    teacher.connect()
    assert teacher._model is None  # its tokenizer and configuration read; its weights load at the first request
    reply = teacher.complete(messages("The bridge has five arches.", 1), 0)
    assert {p.dtype for p in teacher._model.parameters()} == {torch.bfloat16}
    assert reply.completion_tokens == 16 and teacher.describe()["dtype"] == "bfloat16"
    assert full.describe()["dtype"] == "float32"
    monkeypatch.setattr(compute, "bf16_missing", lambda device, flags=None: "this CPU (x86_64) lacks AVX512_BF16")
    with pytest.raises(CctkError) as error:
        make_teacher(str(tiny_dir), device="cpu", dtype="bfloat16")
    assert str(error.value) == (
        "--dtype bfloat16 needs native bf16 arithmetic: this CPU (x86_64) lacks AVX512_BF16; use --dtype float32"
    )


def test_a_local_teacher_too_large_for_its_device_is_refused_before_it_loads(tmp_path, tracking_uri, monkeypatch):
    """A local teacher's memory is planned on its ``--device`` before it loads (float32 weights, a request of 1,024
    prompt tokens and a retry's reply, ``memory.generation``): on 0.5 GiB free the bundled model is refused in one
    line, no model loaded, nothing written."""
    from cctk.core.lm import device, models
    from cctk.core.lm.memory import GIB, Room

    monkeypatch.setattr(device, "room", lambda where: Room(GIB // 2, GIB // 2, "cpu", "cpu"))
    monkeypatch.setattr(models, "load_model", lambda *a, **k: pytest.fail("loaded"))
    out = tmp_path / "out"
    args = ["--corpus", str(DATA / "kr_corpus.txt"), "--teacher", "smollm2-135m-bundled", "--device", "cpu"]
    result = CliRunner().invoke(cli, ["krtest", "generate", *args, "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert result.output == (
        "Error: smollm2-135m-bundled generating in float32 needs about 1.0 GiB in host memory (weights 0.5 GiB, "
        "a request 0.2 GiB, runtime 0.2 GiB), 0.5 GiB free; or a machine with at least 1.0 GiB of free memory\n"
    )
    assert not out.exists()


def test_a_local_teacher_and_oracle_that_fit_apart_and_not_together_are_refused_before_either_loads(
    tmp_path, tracking_uri, monkeypatch
):
    """Both load at once on ``--device``: on 1.25 GiB free each fits alone (1.0 GiB) and both do not (their
    weights and one request: 1.5 GiB); one line before either loads, nothing written."""
    from cctk.core.lm import device, models
    from cctk.core.lm.memory import GIB, Room

    monkeypatch.setattr(device, "room", lambda where: Room(5 * GIB // 4, 5 * GIB // 4, "cpu", "cpu"))
    monkeypatch.setattr(models, "load_model", lambda *a, **k: pytest.fail("loaded"))
    out = tmp_path / "out"
    local = "smollm2-135m-bundled"
    args = ["--corpus", str(DATA / "kr_corpus.txt"), "--teacher", local, "--oracle", local, "--device", "cpu"]
    result = CliRunner().invoke(cli, ["krtest", "generate", *args, "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert result.output == (
        "Error: smollm2-135m-bundled (0.5 GiB of weights) and smollm2-135m-bundled (0.5 GiB of weights), "
        "generating in float32 at once, need about 1.5 GiB in host memory, 1.2 GiB free; each fits alone: make "
        "one of them an endpoint (http://host:port/v1), or use a machine with at least 1.5 GiB of free memory\n"
    )
    assert not out.exists()


def test_from_python_a_local_teacher_and_oracle_are_checked_together_before_any_work(tmp_path, monkeypatch):
    """``from_corpus.run`` called from Python checks the pair as the command does (the check is the library's):
    the same line, before the store is read or anything written."""
    from cctk.core.lm import device, models
    from cctk.core.lm.memory import GIB, Room
    from cctk.krtest.generation import from_corpus
    from cctk.krtest.generation.gate import Gate
    from cctk.krtest.generation.oracle import make_oracle
    from cctk.krtest.generation.teacher import make_teacher

    monkeypatch.setattr(device, "room", lambda where: Room(5 * GIB // 4, 5 * GIB // 4, "cpu", "cpu"))
    monkeypatch.setattr(models, "load_model", lambda *a, **k: pytest.fail("loaded"))
    local, out = "smollm2-135m-bundled", tmp_path / "out"
    teacher, gate = make_teacher(local, device="cpu"), Gate(make_oracle(local, device="cpu"), 0)
    request = from_corpus.Request(
        DATA / "kr_corpus.txt", local, from_corpus.GenerationOptions(), out, tracking="http://127.0.0.1:9"
    )
    with pytest.raises(CctkError, match=r"^smollm2-135m-bundled \(0.5 GiB of weights\) and smollm2-135m-bundled "):
        from_corpus.run(request, teacher, gate=gate)
    assert not out.exists()


def test_an_endpoint_that_fails_mid_way_stops_in_one_line(tiny_dir, tmp_path, tracking_uri):
    """A stand-in server (not a teacher) that lists one model and fails every chat request."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # /v1/models
            body = json.dumps(
                {"object": "list", "data": [{"id": "only-model", "object": "model", "created": 0, "owned_by": "test"}]}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        result = CliRunner().invoke(
            cli,
            [
                "krtest",
                "generate",
                "--corpus",
                str(DATA / "kr_corpus.txt"),
                "--teacher",
                f"http://127.0.0.1:{server.server_port}/v1",
                "--tokenizer",
                str(tiny_dir),
                "--retries",
                "0",
                "--out",
                str(tmp_path / "out"),
            ],
        )
    finally:
        server.shutdown()
    assert result.exit_code == 1
    assert (
        f"Error: the teacher endpoint http://127.0.0.1:{server.server_port}/v1 failed on request 1 after 0 "
        "retries: InternalServerError"
        in result.output
        and "run the same command again" in result.output
    )
    journal = (tmp_path / "out" / "journal.jsonl").read_text().splitlines()
    assert len(journal) == 1 and "header" in json.loads(journal[0])  # the header only: nothing was answered
    record = json.loads((tmp_path / "out" / "generation.json").read_text())
    assert (record["answered"], record["finished"], record["requests"]) == (0, False, 0)
    run = MlflowClient(tracking_uri).get_run(record["mlflow_run_id"])
    assert run.info.status == "FAILED" and "InternalServerError" in run.data.tags["cctk.error"]


def test_every_worked_example_item_passes_the_checks(tokenizer):
    from cctk.krtest.generation.from_corpus import checker_for
    from cctk.krtest.generation.teacher import EXAMPLES

    for passage, items in EXAMPLES:
        checker = checker_for(segment(passage)[0], "char", tokenizer)
        assert [checker.reason(i["context"], i["sentence_true"], i["sentence_false"], 0) for i in items] == [None] * 4
