"""Generation through a real endpoint's faults, over real HTTP on loopback (no model: the fault server of
``fault_server.py`` writes the items), and a kill -9 of ``cctk krtest generate`` during a request."""

import builtins
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from builders import chat_tokens, reading
from click.testing import CliRunner
from fault_server import FaultServer
from mlflow import MlflowClient

from cctk.cli.main import cli

DATA = Path(__file__).parents[2] / "data"
CORPUS = DATA / "kr_recorded_corpus.txt"  # 8 passages of two sentences
ROOT = Path(__file__).parents[3]


def generate(url: str, out: Path, tokenizer: Path, *extra: str) -> list[str]:
    return [
        "krtest",
        "generate",
        "--corpus",
        str(CORPUS),
        "--teacher",
        url,
        "--tokenizer",
        str(tokenizer),
        "--per-passage",
        "2",
        "--out",
        str(out),
        *extra,
    ]


def test_generation_survives_every_fault_and_counts_what_was_billed(tiny_dir, tmp_path, tracking_uri):
    faults = {0: ["429"], 1: ["500"], 2: ["length"], 3: ["slow"], 4: ["drop"], 5: ["length", "length"]}
    out = tmp_path / "out"
    with FaultServer(CORPUS.read_text(), faults) as server:
        result = CliRunner().invoke(
            cli,
            generate(
                server.url,
                out,
                tiny_dir,
                "--timeout",
                "1.5",
                "--retries",
                "3",
                "--concurrency",
                "3",
                "--max-tokens",
                "100",
            ),
        )
    assert result.exit_code == 0, result.output
    record = json.loads((out / "generation.json").read_text())
    # every passage answered once, the two cut ones twice (passage 2 whole the second time, 5 cut again): 10
    assert (record["passages"], record["answered"], record["requests"]) == (8, 8, 10) == (8, 8, server.delivered)
    assert record["usage"] == server.usage  # what the endpoint billed, cut replies included
    assert record["kept"] + sum(record["rejected"].values()) == record["proposed"] == 16
    # each reply repeats its one item: 7 kept, 7 duplicates, and the twice-cut passage's 2 items truncated
    assert (record["kept"], record["rejected"]["duplicate"], record["rejected"]["truncated"]) == (7, 7, 2)
    assert record["finished"] is True and record["teacher"]["token_limit_parameter"] == "max_completion_tokens"
    assert record["teacher"]["structured_output"] is False  # refused by this server: plain JSON parsing
    assert "temperature" not in server.sent and "seed" not in server.sent  # sampling parameters only when given
    limits = {}
    for passage, limit, _ in server.asked:
        limits.setdefault(passage, []).append(limit)
    assert limits[2] == [100, 200] and limits[5] == [100, 200]  # cut: asked again once with twice the limit
    assert limits[3] == [100, 100] and limits[4] == [100, 100]  # slow, dropped: retried by the client
    times = [t for p, _, t in server.asked if p == 0]
    assert times[1] - times[0] >= 0.9  # Retry-After: 1 honoured
    questions = [json.loads(line) for line in (out / "questions.jsonl").read_text().splitlines()]
    assert [q["location"] for q in questions] == sorted(q["location"] for q in questions)  # passage order
    assert len(questions) == 7 and questions[0]["sentence_false"] == "It has 312 inhabitants and one castles."
    run = MlflowClient(tracking_uri).get_run(record["mlflow_run_id"])
    assert run.info.status == "FINISHED" and run.data.metrics["rejected_truncated"] == 2
    assert run.data.metrics["prompt_tokens"] == server.usage["prompt_tokens"]
    assert run.data.params["prompt_version"] == "kr-items-2" and run.data.params["teacher_url"] == server.url


def test_kill_during_a_request_then_the_same_command_asks_only_the_rest(tiny_dir, tmp_path, tracking_uri):
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    out = tmp_path / "out"
    with FaultServer(CORPUS.read_text(), {3: ["hang"]}) as server:
        argv = [sys.executable, "-m", "cctk", *generate(server.url, out, tiny_dir)]
        process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while 3 not in server.passages_asked() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
        assert server.passages_asked() == [0, 1, 2, 3], process.stdout.read().decode()[-2000:]
        process.send_signal(signal.SIGKILL)  # during the request of passage 3
        process.wait(30)
    answered = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()[1:]]
    assert [a["unit"] for a in answered] == [0, 1, 2]

    with FaultServer(CORPUS.read_text()) as again:
        result = CliRunner().invoke(cli, generate(again.url, out, tiny_dir))
    assert result.exit_code == 0, result.output
    assert again.passages_asked() == [3, 4, 5, 6, 7]  # nothing answered before the kill is asked again
    with FaultServer(CORPUS.read_text()) as whole:
        result = CliRunner().invoke(cli, generate(whole.url, tmp_path / "whole", tiny_dir))
    assert result.exit_code == 0, result.output
    assert (out / "questions.jsonl").read_text() == (tmp_path / "whole" / "questions.jsonl").read_text()
    assert len((out / "questions.jsonl").read_text().splitlines()) == 8
    record = json.loads((out / "generation.json").read_text())
    run = MlflowClient(tracking_uri).get_run(record["mlflow_run_id"])
    assert run.info.status == "FINISHED" and run.data.metrics["answered"] == 8  # the killed run, continued

    refused = CliRunner().invoke(cli, generate("http://127.0.0.1:9/v1", out, tiny_dir))
    assert refused.exit_code == 1 and "holds a finished generation; --overwrite replaces it" in refused.output
    assert len(refused.output.strip().splitlines()) == 1


@pytest.mark.parametrize(("status", "named"), [(401, None), (403, "MY_TEACHER_KEY")])
def test_a_refused_key_says_authentication_failed_and_names_the_variable(
    tiny_dir, tmp_path, tracking_uri, monkeypatch, status, named
):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-openai-variable")
    monkeypatch.setenv("MY_TEACHER_KEY", "sk-from-my-variable")
    extra = ["--api-key-env", named] if named else []
    with FaultServer(CORPUS.read_text(), status=status) as server:
        result = CliRunner().invoke(cli, generate(server.url, tmp_path / "out", tiny_dir, *extra))
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1
    variable = named or "OPENAI_API_KEY"
    assert f"authentication failed at {server.url} (HTTP {status}) with the key from ${variable}" in result.output
    key = "sk-from-my-variable" if named else "sk-from-openai-variable"
    assert server.keys == [f"Bearer {key}"]  # one request: a refused key is not retried
    assert "sk-" not in result.output


def test_a_named_model_needs_no_models_and_a_missing_extra_says_how_to_install(
    tiny_dir, tmp_path, tracking_uri, monkeypatch
):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FaultServer(CORPUS.read_text(), models=False) as server:
        result = CliRunner().invoke(
            cli, generate(server.url, tmp_path / "out", tiny_dir, "--teacher-model", "gw-x", "--max-passages", "2")
        )
    assert result.exit_code == 0, result.output
    assert server.models_asked == 1 and server.passages_asked() == [0, 1]  # a gateway without /models works
    assert set(server.keys) == {"Bearer not-needed"}
    unreachable = generate("http://127.0.0.1:9/v1", tmp_path / "gone", tiny_dir, "--teacher-model", "gw-x")
    result = CliRunner().invoke(cli, unreachable)  # named or not, an endpoint that does not answer: before any work
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1
    assert "cannot reach the teacher endpoint http://127.0.0.1:9/v1" in result.output
    assert not (tmp_path / "gone").exists()
    real_import = builtins.__import__

    def no_openai(name, *args, **kwargs):
        if name == "openai" or name.startswith("openai."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_openai)
    result = CliRunner().invoke(cli, generate("http://127.0.0.1:9/v1", tmp_path / "other", tiny_dir))
    assert result.exit_code == 1 and "pip install 'cctk[teacher]'" in result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "other").exists()


# Issue #41's kind of run: a five-passage corpus the code was not written against, three items asked per
# passage, a scripted teacher that proposes 13 valid items and 2 invalid ones. Each item's context is the
# sentence before its true sentence.
FIVE = [
    [
        "The Harlow lighthouse stands on Vell Island.",
        "It was built in 1864 by the engineer Mara Quist.",
        "Its lamp can be seen from 18 nautical miles away.",
        "The tower is painted with red and white bands.",
    ],
    [
        "Kelby is a village on the river Calder.",
        "It has 312 inhabitants and one school.",
        "Its church was rebuilt in 1911 after a fire.",
        "A weekly market is held there on Thursdays.",
    ],
    [
        "Tobias Wren was a clockmaker in Ostmere.",
        "He opened his first shop in 1791.",
        "His clocks were cased in walnut.",
        "He trained eleven apprentices.",
    ],
    [
        "The Dunholt ferry crosses the Ouse.",
        "It carries 40 passengers at a time.",
        "The crossing takes twelve minutes.",
        "The ferry was first licensed in 1820.",
    ],
    [
        "Mara Quist was an engineer from Leith.",
        "She designed nine lighthouses.",
        "Her first design was lit in 1858.",
        "She retired to the town of Elgin.",
    ],
]
FALSE = [  # the false side of each passage's items, true side = sentences 2 to 4 (None: an invalid item below)
    ["It was built in 1891 by the engineer Mara Quist.", None, "The tower is painted with black and white bands."],
    [
        "It has 480 inhabitants and one school.",
        "Its church was rebuilt in 1911 after a flood.",
        "A weekly market is held there on Mondays.",
    ],
    ["He opened his first shop in 1802.", "His clocks were cased in oak.", "He trained four apprentices."],
    ["It carries 10 passengers at a time.", "The crossing takes twenty minutes.", None],
    ["She designed six lighthouses.", "Her first design was lit in 1872.", "She retired to the town of Perth."],
]
INVALID = {  # (passage, item) -> the item the teacher writes instead, and the reason it is rejected for
    (0, 1): (
        {
            "context": FIVE[0][1],
            "sentence_true": FIVE[0][2],
            "sentence_false": "Its lamp can be seen from 18 nautical miles away in fog.",
        },
        "no_fact_replaced",
    ),
    (3, 2): (
        {
            "context": FIVE[3][2],
            "sentence_true": "The ferry was first licensed in 1830.",  # a year misquoted
            "sentence_false": "The ferry was first licensed in 1850.",
        },
        "true_not_supported",
    ),
}


def scripted_items() -> dict[int, list[dict]]:
    """Passage index -> the three items the scripted teacher's reply holds."""
    script = {}
    for p, (sentences, falses) in enumerate(zip(FIVE, FALSE, strict=True)):
        script[p] = [
            INVALID[p, k][0]
            if (p, k) in INVALID
            else {"context": sentences[k], "sentence_true": sentences[k + 1], "sentence_false": false}
            for k, false in enumerate(falses)
        ]
    return script


def five_passages(tmp_path: Path) -> Path:
    corpus = tmp_path / "five.txt"
    corpus.write_text("\n\n".join(" ".join(sentences) for sentences in FIVE) + "\n")
    return corpus


def generate_five(url: str, corpus: Path, out: Path, tokenizer: Path, *extra: str) -> list[str]:
    return [
        "krtest",
        "generate",
        "--corpus",
        str(corpus),
        "--teacher",
        url,
        "--tokenizer",
        str(tokenizer),
        "--per-passage",
        "3",
        "--out",
        str(out),
        *extra,
    ]


def test_fifteen_proposed_thirteen_valid_kept_both_invalid_rejected_through_faults(tiny_dir, tmp_path, tracking_uri):
    corpus, out = five_passages(tmp_path), tmp_path / "out"
    faults = {0: ["429"], 1: ["500"], 2: ["length"], 4: ["429", "429"]}
    with FaultServer(corpus.read_text(), faults, items=scripted_items()) as server:
        result = CliRunner().invoke(cli, generate_five(server.url, corpus, out, tiny_dir, "--max-tokens", "300"))
    assert result.exit_code == 0, result.output
    assert server.passages_asked() == [0, 0, 1, 1, 2, 2, 3, 4, 4, 4]  # every fault retried, the cut reply asked again
    record = json.loads((out / "generation.json").read_text())
    assert (record["passages"], record["proposed"], record["kept"]) == (5, 15, 13)
    assert {k: v for k, v in record["rejected"].items() if v} == {"no_fact_replaced": 1, "true_not_supported": 1}
    assert record["usage"] == server.usage and record["requests"] == server.delivered == 6  # the cut reply twice
    assert not {"kept_by_oracle", "oracle", "oracle_check"} & set(record) and not (out / "rejected.jsonl").exists()
    valid = [item for p, items in scripted_items().items() for k, item in enumerate(items) if (p, k) not in INVALID]
    questions = [json.loads(line) for line in (out / "questions.jsonl").read_text().splitlines()]
    assert [{k: q[k] for k in ("context", "sentence_true", "sentence_false")} for q in questions] == valid
    verdicts = {
        p["sentence_false"]: p["verdict"] for p in map(json.loads, (out / "proposals.jsonl").read_text().splitlines())
    }
    assert [verdicts[item["sentence_false"]] for item, _ in INVALID.values()] == [r for _, r in INVALID.values()]
    run = MlflowClient(tracking_uri).get_run(record["mlflow_run_id"])
    assert run.data.metrics["rejected_no_fact_replaced"] == 1 and run.data.metrics["kept"] == 13
    assert run.data.metrics["completion_tokens"] == server.usage["completion_tokens"]


def test_the_oracle_gate_rejects_what_it_answers_wrong_and_a_failed_check_continues(tiny_dir, tmp_path, tracking_uri):
    from scipy.stats import binomtest

    corpus, out = five_passages(tmp_path), tmp_path / "out"
    with (
        FaultServer(corpus.read_text(), items=scripted_items()) as teacher,
        FaultServer(corpus.read_text(), {3: ["500"]}) as oracle,
    ):
        oracle.wrong = {"cased in walnut"}  # the context of one item only: "He trained eleven apprentices."
        argv = generate_five(teacher.url, corpus, out, tiny_dir, "--oracle", oracle.url, "--retries", "0")
        failed = CliRunner().invoke(cli, argv)
        assert failed.exit_code == 1 and f"the oracle endpoint {oracle.url} failed on request 4" in failed.output
        assert teacher.passages_asked() == [0, 1, 2, 3, 4] and oracle.passages_asked() == [0, 1, 2, 3]
        half = json.loads((out / "generation.json").read_text())
        # the oracle's third group said wrong already; the groups not yet asked stay kept until they are
        assert (half["finished"], half["kept_by_validation"], half["kept"], half["oracle_check"]["n"]) == (
            False,
            13,
            12,
            8,
        )
        other = CliRunner().invoke(cli, generate_five(teacher.url, corpus, out, tiny_dir, "--retries", "0"))
        assert other.exit_code == 1 and "other settings (oracle:" in other.output  # the gate cannot be dropped
        again = CliRunner().invoke(cli, argv)
        assert again.exit_code == 0, again.output
        assert teacher.passages_asked() == [0, 1, 2, 3, 4]  # nothing asked twice: the teacher not at all
        assert oracle.passages_asked() == [0, 1, 2, 3, 3, 4]  # the oracle only what it had not answered
        billed = (dict(teacher.usage), dict(oracle.usage), oracle.delivered)
        # the gate asks what `krtest oracle --generation` asks of the same items with the same seed
        alone = CliRunner().invoke(cli, generate_five(teacher.url, corpus, tmp_path / "alone", tiny_dir))
        checked = CliRunner().invoke(
            cli,
            [
                "krtest",
                "oracle",
                "--generation",
                str(tmp_path / "alone"),
                "--oracle",
                oracle.url,
                "--seed",
                "0",
                "--out",
                str(tmp_path / "checked"),
            ],
        )
    assert alone.exit_code == 0 and checked.exit_code == 0, alone.output + checked.output

    def requests(journal: Path, stage: str | None) -> list:
        lines = [json.loads(line) for line in journal.read_text().splitlines()]
        return [line["request"] for line in lines if "unit" in line and line.get("stage") == stage]

    gated = requests(out / "journal.jsonl", "oracle")
    assert len(gated) == 5 and gated == requests(tmp_path / "checked" / "journal.jsonl", None)
    assert "temperature" in oracle.sent and "the oracle confirmed 12 of the 13 items" in again.output
    *_, said, link = again.output.strip().splitlines()
    assert said.startswith("5 passages, 5 requests")
    record = json.loads((out / "generation.json").read_text())
    assert link == f"MLflow UI: cctk ui {record['mlflow_run_id']}"  # the run the continuation reopened
    assert (record["proposed"], record["kept_by_validation"], record["kept_by_oracle"], record["kept"]) == (
        15,
        13,
        12,
        12,
    )
    assert {k: v for k, v in record["rejected"].items() if v} == {
        "no_fact_replaced": 1,
        "true_not_supported": 1,
        "oracle_disagrees": 1,
    }
    check = record["oracle_check"]
    exact = binomtest(12, 13).proportion_ci(0.95, method="exact")
    assert (check["n"], check["correct"], check["accuracy"]) == (13, 12, 12 / 13)
    assert (check["lo"], check["hi"]) == pytest.approx((exact.low, exact.high), abs=1e-12)
    assert (record["usage"], check["usage"], check["requests"]) == billed and billed[2] == 5
    assert record["oracle"]["model"] == "fault-model"
    rejected = [json.loads(line) for line in (out / "rejected.jsonl").read_text().splitlines()]
    assert [(r["reason"], r["sentence_true"], r["oracle_answer"]) for r in rejected] == [
        ("oracle_disagrees", "He trained eleven apprentices.", {"A": "B", "B": "A"}[rejected[0]["true_option"]])
    ]
    questions = [json.loads(line)["sentence_true"] for line in (out / "questions.jsonl").read_text().splitlines()]
    valid = [
        i["sentence_true"]
        for p, items in scripted_items().items()
        for k, i in enumerate(items)
        if (p, k) not in INVALID
    ]
    assert questions == [t for t in valid if t != "He trained eleven apprentices."]
    verdicts = [json.loads(line)["verdict"] for line in (out / "proposals.jsonl").read_text().splitlines()]
    assert verdicts.count("kept") == 12 and verdicts[8] == "oracle_disagrees"  # passage 2's third item
    stages = [json.loads(line).get("stage") for line in (out / "journal.jsonl").read_text().splitlines()][1:-1]
    assert stages == [None] * 5 + ["oracle"] * 5  # one journal: the teacher's five lines, then the oracle's
    run = MlflowClient(tracking_uri).get_run(record["mlflow_run_id"])
    assert run.info.status == "FINISHED" and run.data.params["oracle_url"] == oracle.url
    assert (run.data.metrics["kept_by_validation"], run.data.metrics["kept_by_oracle"]) == (13, 12)
    assert run.data.metrics["oracle_accuracy"] == 12 / 13 and run.data.metrics["rejected_oracle_disagrees"] == 1
    assert run.data.metrics["oracle_lo"] == pytest.approx(exact.low)


def test_kill_during_an_oracle_request_then_the_same_command_asks_only_the_rest(tiny_dir, tmp_path, tracking_uri):
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    corpus, out = five_passages(tmp_path), tmp_path / "out"
    with (
        FaultServer(corpus.read_text(), items=scripted_items()) as teacher,
        FaultServer(corpus.read_text(), {2: ["hang"]}) as oracle,
    ):
        oracle.wrong = {"cased in walnut"}
        argv = [
            sys.executable,
            "-m",
            "cctk",
            *generate_five(teacher.url, corpus, out, tiny_dir, "--oracle", oracle.url),
        ]
        process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while 2 not in oracle.passages_asked() and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.1)
        assert oracle.passages_asked() == [0, 1, 2], process.stdout.read().decode()[-2000:]
        process.send_signal(signal.SIGKILL)  # during the oracle's request about passage 2
        process.wait(30)
    lines = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()[1:]]
    assert [(line["unit"], line.get("stage")) for line in lines] == [(n, None) for n in range(5)] + [
        (0, "oracle"),
        (1, "oracle"),
    ]

    def gated(folder: Path) -> tuple[FaultServer, FaultServer]:
        with FaultServer(corpus.read_text(), items=scripted_items()) as t, FaultServer(corpus.read_text()) as o:
            o.wrong = {"cased in walnut"}
            result = CliRunner().invoke(cli, generate_five(t.url, corpus, folder, tiny_dir, "--oracle", o.url))
        assert result.exit_code == 0, result.output
        return t, o

    teacher, oracle = gated(out)
    assert teacher.passages_asked() == [] and oracle.passages_asked() == [2, 3, 4]  # nothing asked twice
    gated(tmp_path / "whole")
    for name in ("questions.jsonl", "rejected.jsonl", "proposals.jsonl"):
        assert (out / name).read_text() == (tmp_path / "whole" / name).read_text(), name
    assert len((out / "rejected.jsonl").read_text().splitlines()) == 1
    record = json.loads((out / "generation.json").read_text())
    assert (record["kept"], record["oracle_check"]["n"], record["finished"]) == (12, 13, True)
    run = MlflowClient(tracking_uri).get_run(record["mlflow_run_id"])
    assert run.info.status == "FINISHED" and run.data.metrics["kept_by_oracle"] == 12  # the killed run, continued


def test_a_model_the_server_refuses_says_why_and_the_mended_command_starts_afresh(tiny_dir, tmp_path, tracking_uri):
    """transformers serve refuses another model with HTTP 400 and FastAPI's ``detail``: the line said `failed on
    request 1 after 5 retries: BadRequestError: Error code: 400` (no retry happened, the reason was lost), and the
    same command with the right model was refused for its other settings though nothing had been answered."""
    out = tmp_path / "out"
    with FaultServer(CORPUS.read_text(), pinned="fault-model") as server:
        wrong = CliRunner().invoke(cli, generate(server.url, out, tiny_dir, "--teacher-model", "gpt-4o"))
        assert wrong.exit_code == 1 and len(wrong.output.strip().splitlines()) == 1
        assert wrong.output.strip() == (
            f"Error: the teacher endpoint {server.url} refused request 1 (HTTP 400): Error code: 400 - Server is "
            "pinned to 'fault-model'; requested 'gpt-4o'.; mend what it names (--teacher-model?) and run again "
            "(passages answered are kept)"
        )
        assert server.refused == 2  # once more without response_format, which a 400 may be about
        mended = CliRunner().invoke(cli, generate(server.url, out, tiny_dir, "--teacher-model", "fault-model"))
    assert mended.exit_code == 0, mended.output
    record = json.loads((out / "generation.json").read_text())
    assert record["finished"] and record["teacher"]["model"] == "fault-model" and record["answered"] == 8
    runs = MlflowClient(tracking_uri).search_runs(
        [e.experiment_id for e in MlflowClient(tracking_uri).search_experiments()]
    )
    assert sorted(r.info.status for r in runs) == ["FAILED", "FINISHED"]  # the refused run stays what it was


def test_a_local_oracle_gate_past_its_context_is_refused_before_it_is_asked(tiny_dir, tmp_path, tracking_uri):
    """A local oracle's requests hold a passage and its kept items: each passage alone past its context is
    refused before the teacher is asked; the passages within it and a passage's questions past it, after the
    teacher (its replies journaled) and before the oracle's first request."""
    from transformers import AutoTokenizer

    from cctk.krtest.generation.oracle import Group, oracle_messages
    from cctk.krtest.measurement.passages import segment

    corpus = five_passages(tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    bare = max(
        chat_tokens(tokenizer, oracle_messages(Group("", p.start, p.text, ()))) for p in segment(corpus.read_text())
    )

    with FaultServer(corpus.read_text(), items=scripted_items()) as teacher:
        early = CliRunner().invoke(
            cli,
            generate_five(
                teacher.url,
                corpus,
                tmp_path / "early",
                tiny_dir,
                "--oracle",
                str(reading(tiny_dir, tmp_path / "a", bare + 15)),
                "--max-tokens",
                "16",
            ),
        )
        assert early.exit_code == 1 and teacher.passages_asked() == []
        assert early.output.startswith("Error: the oracle's request about the passage at five.txt location ")
        assert f"(the passage alone, before its questions) is a prompt of {bare} tokens" in early.output
        late = CliRunner().invoke(
            cli,
            generate_five(
                teacher.url,
                corpus,
                tmp_path / "late",
                tiny_dir,
                "--oracle",
                str(reading(tiny_dir, tmp_path / "b", bare + 16)),
                "--max-tokens",
                "16",
            ),
        )
        assert late.exit_code == 1 and teacher.passages_asked() == [0, 1, 2, 3, 4]
    assert late.output.startswith("Error: the oracle's request about the passage at five.txt location ")
    assert "questions) is a prompt of" in late.output and f"context of {bare + 16} tokens" in late.output
    assert late.output.endswith(
        f"; the teacher's replies are kept in {tmp_path / 'late'}: the same command with another --oracle continues\n"
    )
    lines = [json.loads(x) for x in (tmp_path / "late" / "journal.jsonl").read_text().splitlines()]
    assert len([x for x in lines if "unit" in x]) == 5  # the teacher's five replies kept, the oracle asked nothing
    # the teacher's replies are kept: another oracle (one that reads more) continues the generation, the teacher
    # asked nothing again; dropping the oracle instead is refused (its items would pass unchecked)
    with FaultServer(corpus.read_text(), items=scripted_items()) as teacher:
        dropped = CliRunner().invoke(
            cli, generate_five(teacher.url, corpus, tmp_path / "late", tiny_dir, "--max-tokens", "16")
        )
        assert dropped.exit_code == 1 and "other settings (oracle: {'kind': 'local'" in dropped.output
        wider = str(reading(tiny_dir, tmp_path / "c", 4096))
        argv = generate_five(teacher.url, corpus, tmp_path / "late", tiny_dir, "--oracle", wider, "--max-tokens", "16")
        again = CliRunner().invoke(cli, argv)
        assert again.exit_code == 0, again.output
        assert teacher.passages_asked() == []
    lines = [json.loads(x) for x in (tmp_path / "late" / "journal.jsonl").read_text().splitlines()]
    headers = [x["header"] for x in lines if "header" in x]
    assert [h["settings"]["oracle"]["model"] for h in headers] == [str(tmp_path / "b"), wider]
    assert len({h["run_id"] for h in headers}) == 1 and lines[-1] == {"finished": True}
    record = json.loads((tmp_path / "late" / "generation.json").read_text())
    assert record["finished"] and record["oracle"]["model"] == wider and record["oracle_check"]["passages"] > 0
    params = MlflowClient(tracking_uri).get_run(headers[0]["run_id"]).data.params
    assert (params["oracle_model"], params["oracle_model.resolved"]) == (str(tmp_path / "b"), wider)
    # once the new oracle has answered, it cannot change again
    refused = CliRunner().invoke(cli, generate_five("http://127.0.0.1:9/v1", corpus, tmp_path / "late", tiny_dir))
    assert refused.exit_code == 1 and "holds a finished generation" in refused.output
