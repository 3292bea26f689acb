"""``cctk krtest oracle``: the paper's Golden Standard prompt, seeded A/B positions, the reply read back,
an exact interval, resumable; over real HTTP against the loopback server of ``fault_server.py``."""

import csv
import json
from pathlib import Path

import pytest
from builders import chat_tokens, reading
from click.testing import CliRunner
from fault_server import FaultServer, item_for
from mlflow import MlflowClient

from cctk.cli.main import cli
from cctk.krtest.generation.oracle import Group, Question, oracle_messages, parse_answers, read_questions
from cctk.krtest.measurement.items import read_items
from cctk.krtest.measurement.passages import segment

CORPUS = Path(__file__).parents[2] / "data" / "kr_recorded_corpus.txt"


def write_questions(path: Path) -> list[dict]:
    """One item per passage, two for the first (9 in all), locations = passage starts."""
    found = segment(CORPUS.read_text())
    rows = [{**item_for(p.text), "location": p.start} for p in found]
    extra = {
        "context": "Kelby is a village.",
        "sentence_true": "It is on the river Calder.",
        "sentence_false": "It is on the river Tees.",
        "location": 0,
    }
    rows.insert(1, extra)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def test_prompt_is_the_papers_and_positions_are_seeded(tmp_path):
    write_questions(tmp_path / "q.jsonl")
    drawn = [t for *_, t in read_questions(tmp_path / "q.jsonl", 0)]
    assert (
        drawn
        == [t for *_, t in read_questions(tmp_path / "q.jsonl", 0)]
        != [t for *_, t in read_questions(tmp_path / "q.jsonl", 1)]
    )
    assert set(drawn) == {"A", "B"}
    item = read_items(tmp_path / "q.jsonl")[0]
    group = Group("", 0, "Kelby is a village.", (Question(item, "", "", 1, "B"),))
    chat = oracle_messages(group)
    assert chat[0]["content"].startswith("Instruction: You are an expert reading comprehension system.")
    assert chat[1]["content"] == (
        "*** Reference Paragraph ***\nKelby is a village.\n\n*** Questions ***\n\n"
        f"[Question ID: 1]\nContext: {item.context}\nOption A: {item.sentence_false}\n"
        f"Option B: {item.sentence_true}"
    )
    assert parse_answers('Sure:\n```json\n{"1": "A", "Question ID: 2": "b", "3": "C"}\n```') == {1: "A", 2: "B"}
    assert parse_answers("no json") == {}


def test_a_questions_file_with_a_byte_order_mark_reads_as_without(tmp_path):
    """Editors on Windows write a BOM: eval took such a file, the oracle failed on its first line's JSON."""
    rows = write_questions(tmp_path / "q.jsonl")
    marked = tmp_path / "marked.jsonl"
    marked.write_bytes(b"\xef\xbb\xbf" + (tmp_path / "q.jsonl").read_bytes())
    read = read_questions(marked, 0)
    assert [(item, raw, option) for item, raw, _, option in read] == [
        (item, raw, option) for item, raw, _, option in read_questions(tmp_path / "q.jsonl", 0)
    ]
    assert json.loads(read[0][1]) == rows[0]


def test_oracle_scores_writes_and_continues(tiny_dir, tmp_path, tracking_uri):
    rows = write_questions(tmp_path / "q.jsonl")
    argv = [
        "krtest",
        "oracle",
        "--questions",
        str(tmp_path / "q.jsonl"),
        "--corpus",
        str(CORPUS),
        "--tokenizer",
        str(tiny_dir),
        "--seed",
        "3",
        "--retries",
        "0",
        "--out",
        str(tmp_path / "o"),
    ]
    with FaultServer(CORPUS.read_text(), {4: ["500"]}) as server:
        server.wrong, server.skip = {"Dunholt"}, {"Brenmoor"}
        failed = CliRunner().invoke(cli, [*argv, "--oracle", server.url])
        assert failed.exit_code == 1 and "failed on request 5" in failed.output
        assert server.passages_asked() == [0, 1, 2, 3, 4]  # the first passage's two questions in one request
        again = CliRunner().invoke(cli, [*argv, "--oracle", server.url])
    assert again.exit_code == 0, again.output
    assert server.passages_asked() == [0, 1, 2, 3, 4, 4, 5, 6, 7]  # continued: only what was not answered
    record = json.loads((tmp_path / "o" / "oracle.json").read_text())
    assert (record["n"], record["correct"], record["unanswered"], record["passages"]) == (9, 7, 1, 8)
    assert record["accuracy"] == 7 / 9 and 0.39 < record["lo"] < 0.41 and 0.97 < record["hi"] < 0.98
    assert record["usage"] == server.usage and record["requests"] == server.delivered == 8
    table = list(csv.DictReader((tmp_path / "o" / "oracle.csv").read_text().splitlines()))
    assert [int(r["line"]) for r in table] == list(range(1, 10)) and [r["id"] for r in table[:2]] == ["1", "2"]
    wrong = [r for r in table if r["correct"] == "False"]
    assert [rows[int(r["line"]) - 1]["context"].split()[1] for r in wrong] == ["Brenmoor", "Dunholt"]
    assert next(r for r in table if "Brenmoor" in rows[int(r["line"]) - 1]["context"])["answer"] == ""
    validated = (tmp_path / "o" / "questions.validated.jsonl").read_text().splitlines()
    assert len(validated) == 7 and all("Dunholt" not in v and "Brenmoor" not in v for v in validated)
    assert validated[0] == json.dumps(rows[0])  # the lines as they were
    run = MlflowClient(tracking_uri).get_run(record["mlflow_run_id"])
    assert run.info.status == "FINISHED" and run.data.metrics["accuracy"] == 7 / 9
    assert run.data.tags["cctk.kind"] == "krtest-oracle"


def test_oracle_takes_a_generations_questions_corpus_and_segmentation(tiny_dir, tmp_path, tracking_uri):
    with FaultServer(CORPUS.read_text()) as server:
        made = CliRunner().invoke(
            cli,
            [
                "krtest",
                "generate",
                "--corpus",
                str(CORPUS),
                "--teacher",
                server.url,
                "--tokenizer",
                str(tiny_dir),
                "--per-passage",
                "1",
                "--location",
                "line",
                "--out",
                str(tmp_path / "g"),
            ],
        )
        assert made.exit_code == 0, made.output
        checked = CliRunner().invoke(
            cli,
            [
                "krtest",
                "oracle",
                "--generation",
                str(tmp_path / "g"),
                "--oracle",
                server.url,
                "--out",
                str(tmp_path / "o"),
            ],
        )
        both = CliRunner().invoke(
            cli,
            [
                "krtest",
                "oracle",
                "--generation",
                str(tmp_path / "g"),
                "--questions",
                str(tmp_path / "g" / "questions.jsonl"),
                "--oracle",
                server.url,
                "--out",
                str(tmp_path / "x"),
            ],
        )
    assert checked.exit_code == 0, checked.output
    *_, said, link = checked.output.strip().splitlines()
    assert said.startswith("oracle: 8/8 = 100.0% [63.1-100.0], 0 unanswered")
    record = json.loads((tmp_path / "o" / "oracle.json").read_text())
    assert link == f"MLflow UI: cctk ui {record['mlflow_run_id']}"  # before: the run was not named
    assert record["location"] == "line" and record["passages"] == 8  # line locations, as the generation's
    assert both.exit_code == 1 and "not both" in both.output


def test_device_is_for_a_local_oracle(tmp_path):
    """``krtest oracle --device`` says where a local oracle generates; with an endpoint it is refused in one line,
    before the endpoint is asked or anything is written."""
    write_questions(tmp_path / "q.jsonl")
    args = ["--questions", str(tmp_path / "q.jsonl"), "--corpus", str(CORPUS), "--out", str(tmp_path / "o")]
    result = CliRunner().invoke(
        cli, ["krtest", "oracle", *args, "--oracle", "http://127.0.0.1:9/v1", "--device", "cpu"]
    )
    assert result.exit_code == 1 and result.output == (
        "Error: --device cpu is where a local model generates; an endpoint's server chooses its own\n"
    )
    assert not (tmp_path / "o").exists()


def test_a_location_out_of_the_corpus_names_the_questions_file(tmp_path):
    """krtest eval named the file with the line; the oracle said only `questions line 3`."""
    from cctk.core.errors import CctkError
    from cctk.krtest.generation.oracle import group_questions

    rows = write_questions(tmp_path / "q.jsonl")
    rows[2]["location"] = 10**6
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    passages = {"": segment(CORPUS.read_text())}
    found = read_questions(tmp_path / "q.jsonl", 0)
    with pytest.raises(CctkError) as refused:
        group_questions(found, passages, "char", str(tmp_path / "q.jsonl"))
    assert str(refused.value).startswith(f"{tmp_path / 'q.jsonl'} line 3: location 1000000 points at no passage")


def test_a_local_oracles_longest_request_past_its_context_is_refused_before_its_first(tiny_dir, tmp_path, tracking_uri):
    """Its longest request (a passage and every question of it, as its chat template sends them) and a reply of
    --max-tokens within its stated context, else one line before any request; one token more of context, and
    it runs, every request within it."""
    from transformers import AutoTokenizer

    from cctk.krtest.generation.oracle import OracleRequest, plan

    write_questions(tmp_path / "q.jsonl")
    groups = plan(
        OracleRequest(tmp_path / "q.jsonl", CORPUS, tmp_path / "unused", seed=0, tokenizer_name=str(tiny_dir))
    )
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    sizes = [chat_tokens(tokenizer, oracle_messages(g)) for g in groups]
    longest = groups[sizes.index(max(sizes))]

    def check(name, positions):
        argv = ["krtest", "oracle", "--questions", str(tmp_path / "q.jsonl"), "--corpus", str(CORPUS)]
        argv += [
            "--oracle",
            str(reading(tiny_dir, tmp_path / name, positions)),
            "--device",
            "cpu",
            "--max-tokens",
            "16",
        ]
        return CliRunner().invoke(cli, [*argv, "--seed", "0", "--out", str(tmp_path / f"{name}_out")])

    refused = check("short", max(sizes) + 15)
    assert refused.exit_code == 1
    assert refused.output == (
        f"Error: the oracle's request about the passage at location {longest.location} (the passage and "
        f"{len(longest.questions)} question{'s' if len(longest.questions) > 1 else ''}) is a prompt of {max(sizes)} "
        f"tokens, and with a reply of up to 16 (--max-tokens) it is past {tmp_path / 'short'}'s context of "
        f"{max(sizes) + 15} tokens (its position embeddings): an oracle that reads more, or an endpoint\n"
    )
    assert not (tmp_path / "short_out" / "journal.jsonl").exists()  # nothing asked, nothing to continue
    done = check("enough", max(sizes) + 16)
    assert done.exit_code == 0, done.output
    lines = [json.loads(x) for x in (tmp_path / "enough_out" / "journal.jsonl").read_text().splitlines()]
    asked = [line for line in lines if "unit" in line]
    assert len(asked) == len(groups) and max(
        line["usage"]["prompt_tokens"] // line["requests"] for line in asked
    ) == max(sizes)
