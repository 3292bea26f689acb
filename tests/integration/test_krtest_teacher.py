"""A real OpenAI-compatible teacher: ``transformers serve`` on the bundled SmolLM2-135M-Instruct (exported to a
plain folder), on a free loopback port; items generated from a small shipped corpus through it, checked by the
paper's oracle through the same server (``krtest oracle --generation``), then scored.

The bundled model is a weak teacher: greedy, on this WikiText-style corpus, it copies the true sentence into the
false one, drops a fact or restates the answer in the context, and may keep nothing (recorded replies of an
earlier prompt: tests/data/kr_recorded_replies.jsonl). So the oracle checks four hand-made items (one per
passage) and whatever the teacher kept, and eval scores the same file.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from cctk.cli.main import cli
from cctk.core.lm.models import export_bundled
from cctk.krtest.measurement.items import FIELDS, read_items
from cctk.krtest.measurement.passages import segment

pytestmark = [pytest.mark.integration, pytest.mark.slow]
CORPUS = Path(__file__).parents[1] / "data" / "kr_corpus.txt"
START_TIMEOUT = 300  # seconds for the server to answer /health (it loads 135M parameters)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"transformers serve exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(1)
    pytest.fail(f"transformers serve did not answer within {START_TIMEOUT} s:\n{log.read_text()[-3000:]}")


def stop(process: subprocess.Popen) -> None:
    """SIGTERM to the server's process group, SIGKILL after 30 s; then nothing of the group may be left."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    except ProcessLookupError:
        pass


HAND_MADE = [  # one item per passage of kr_corpus.txt, written by hand as the paper's teacher would
    (
        "Kelby is a village on the river Calder.",
        "It has 312 inhabitants and one school.",
        "It has 512 inhabitants and one school.",
    ),
    (
        "The Dunholt ferry crosses the Ouse.",
        "It carries 40 passengers at a time.",
        "It carries 10 passengers at a time.",
    ),
    ("Mara Quist was an engineer from Leith.", "She designed nine lighthouses.", "She designed four lighthouses."),
    (
        "The Brenmoor hills are covered in heather.",
        "Their highest point is 640 metres high.",
        "Their highest point is 910 metres high.",
    ),
]


def oracle_questions(generated: Path, path: Path) -> Path:
    """The hand-made items, then the teacher's kept ones (if any): the oracle checks both kinds."""
    found = segment(CORPUS.read_text())
    rows = [
        json.dumps({"context": c, "sentence_true": t, "sentence_false": f, "location": p.start})
        for (c, t, f), p in zip(HAND_MADE, found, strict=True)
    ]
    kept = generated.read_text().splitlines() if generated.is_file() else []
    path.write_text("".join(r + "\n" for r in rows + kept))
    return path


def test_generate_through_transformers_serve_then_eval(tmp_path, tracking_uri):
    folder = export_bundled(tmp_path / "smollm2")
    port, log = free_port(), tmp_path / "serve.log"
    command = [
        str(Path(sys.executable).with_name("transformers")),
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--device",
        "cpu",
        str(folder),
    ]
    # One thread: a decode step is a few small matrix products, and two OpenMP threads that spin at each of
    # its hundreds of barriers, on two cores shared with this process (or another job), made one 40-token reply
    # take 92 s of CPU instead of 2.8 s here; a reply then outlasted the client's 120 s timeout and the retries
    # queued up behind it (a run of this test took 16 minutes).
    with open(log, "w") as sink:
        server = subprocess.Popen(
            command,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
    try:
        wait_healthy(f"http://127.0.0.1:{port}", server, log)
        out = tmp_path / "generated"
        result = CliRunner().invoke(
            cli,
            [
                "krtest",
                "generate",
                "--corpus",
                str(CORPUS),
                "--teacher",
                f"http://127.0.0.1:{port}/v1",
                "--per-passage",
                "1",
                "--max-tokens",
                "80",
                "--temperature",
                "0",  # greedy: the exported model samples where a request sends no temperature
                "--out",
                str(out),
            ],
        )
        questions = oracle_questions(out / "questions.jsonl", tmp_path / "oracle_questions.jsonl")
        checked = CliRunner().invoke(
            cli,
            [
                "krtest",
                "oracle",
                "--questions",
                str(questions),
                "--corpus",
                str(CORPUS),
                "--oracle",
                f"http://127.0.0.1:{port}/v1",
                "--max-tokens",
                "80",
                "--seed",
                "0",
                "--out",
                str(tmp_path / "oracle"),
            ],
        )
    finally:
        stop(server)
    with pytest.raises(ProcessLookupError):
        os.killpg(server.pid, 0)  # no process of the server's group is left
    assert result.exit_code == 0, result.output
    print(result.output)
    assert checked.exit_code == 0, checked.output
    print(checked.output)
    print((tmp_path / "oracle" / "oracle.csv").read_text())

    record = json.loads((out / "generation.json").read_text())
    assert record["teacher"]["kind"] == "endpoint" and record["teacher"]["model"] == str(folder)  # its only model
    assert record["passages"] == 4 and record["proposed"] == 4 and record["finished"] is True
    assert record["kept"] + sum(record["rejected"].values()) == record["proposed"]
    assert record["requests"] >= 4 and record["usage"]["prompt_tokens"] > 1000  # what the server reported
    assert record["usage"]["completion_tokens"] > 0
    replies = [json.loads(line) for line in (out / "replies.jsonl").read_text().splitlines()]
    passages = segment(CORPUS.read_text())
    assert [r["location"] for r in replies] == [p.start for p in passages] and all(r["reply"] for r in replies)
    items = read_items(out / "questions.jsonl") if record["kept"] else []
    assert len(items) == record["kept"]
    answered = {r["location"]: r["reply"] for r in replies}
    for item in items:  # located at the passage whose reply it came from (a context may reword the passage's)
        assert item.context in answered[item.location]

    # the teacher may write a hand-made item word for word (the passage's one number changed as by hand): the
    # oracle and eval score each distinct item once (its four fields, FIELDS, make an item)
    distinct = {tuple(json.loads(line)[k] for k in FIELDS) for line in questions.read_text().splitlines()}
    assert len(HAND_MADE) <= len(distinct) <= len(HAND_MADE) + len(items)
    oracle = json.loads((tmp_path / "oracle" / "oracle.json").read_text())
    assert oracle["n"] == len(distinct) and oracle["passages"] == 4 and oracle["requests"] >= 4
    assert oracle["lo"] <= oracle["accuracy"] <= oracle["hi"] and oracle["usage"]["prompt_tokens"] > 0
    validated = (tmp_path / "oracle" / "questions.validated.jsonl").read_text().splitlines()
    assert len(validated) == oracle["correct"]

    scored = CliRunner().invoke(
        cli,
        [
            "krtest",
            "eval",
            "--model",
            str(folder),
            "--questions",
            str(tmp_path / "oracle_questions.jsonl"),
            "--corpus",
            str(CORPUS),
            "--open-book",
            "--out",
            str(tmp_path / "eval"),
        ],
    )
    assert scored.exit_code == 0, scored.output
    assert json.loads((tmp_path / "eval" / "summary.json").read_text())["n"] == len(distinct)
