"""A real OpenAI-compatible teacher: ``transformers serve`` on the bundled SmolLM2-135M-Instruct (exported to a
plain folder), on a free loopback port; items generated from a small shipped corpus through it, checked by the
paper's oracle through the same server (``krtest oracle --generation``), then scored.

The bundled model is a weak teacher: greedy, on this WikiText-style corpus, it copies the true sentence into the
false one or drops a fact on two passages (rejected) and writes two good items (kept), as recorded in
tests/data/kr_recorded_replies.jsonl for a corpus of the same sentences.
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

from cctk.cli import cli
from cctk.krtest.items import read_items
from cctk.krtest.passages import segment
from cctk.models import export_bundled

pytestmark = pytest.mark.integration
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


def test_generate_through_transformers_serve_then_eval(tmp_path, tracking_uri):
    folder = export_bundled(tmp_path / "smollm2")
    port, log = free_port(), tmp_path / "serve.log"
    command = [str(Path(sys.executable).with_name("transformers")), "serve", "--host", "127.0.0.1", "--port", str(port),
               "--device", "cpu", str(folder)]
    with open(log, "w") as sink:
        server = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", server, log)
        out = tmp_path / "generated"
        result = CliRunner().invoke(cli, ["krtest", "generate", "--corpus", str(CORPUS), "--teacher",
                                          f"http://127.0.0.1:{port}/v1", "--per-passage", "1", "--max-tokens", "80",
                                          "--out", str(out)])
        checked = CliRunner().invoke(cli, ["krtest", "oracle", "--generation", str(out), "--oracle",
                                           f"http://127.0.0.1:{port}/v1", "--max-tokens", "80", "--seed", "0",
                                           "--out", str(tmp_path / "oracle")]) if result.exit_code == 0 else None
    finally:
        stop(server)
    with pytest.raises(ProcessLookupError):
        os.killpg(server.pid, 0)  # no process of the server's group is left
    assert result.exit_code == 0, result.output
    print(result.output)
    assert checked.exit_code == 0, checked.output
    print(checked.output)

    record = json.loads((out / "generation.json").read_text())
    assert record["teacher"]["kind"] == "endpoint" and record["teacher"]["model"] == str(folder)  # its only model
    assert record["passages"] == 4 and record["proposed"] == 4 and record["finished"] is True
    assert record["kept"] + sum(record["rejected"].values()) == record["proposed"]
    assert record["requests"] >= 4 and record["usage"]["prompt_tokens"] > 1000  # what the server reported
    assert record["usage"]["completion_tokens"] > 0
    replies = [json.loads(line) for line in (out / "replies.jsonl").read_text().splitlines()]
    passages = segment(CORPUS.read_text())
    assert [r["location"] for r in replies] == [p.start for p in passages] and all(r["reply"] for r in replies)
    items = read_items(out / "questions.jsonl")
    assert len(items) == record["kept"] >= 1
    corpus = CORPUS.read_text()
    for item in items:
        assert corpus[item.location :].startswith(item.context.split()[0])  # the passage it came from

    oracle = json.loads((tmp_path / "oracle" / "oracle.json").read_text())
    assert oracle["n"] == len(items) and oracle["correct"] + (oracle["n"] - oracle["correct"]) == len(items)
    assert oracle["lo"] <= oracle["accuracy"] <= oracle["hi"] and oracle["requests"] >= 1
    validated = (tmp_path / "oracle" / "questions.validated.jsonl").read_text().splitlines()
    assert len(validated) == oracle["correct"]

    scored = CliRunner().invoke(cli, ["krtest", "eval", "--model", str(folder), "--questions",
                                      str(out / "questions.jsonl"), "--corpus", str(CORPUS), "--open-book",
                                      "--out", str(tmp_path / "eval")])
    assert scored.exit_code == 0, scored.output
    assert json.loads((tmp_path / "eval" / "summary.json").read_text())["n"] == len(items)
