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
from click.testing import CliRunner
from mlflow import MlflowClient

from cctk.cli import cli
from fault_server import FaultServer

DATA = Path(__file__).parents[1] / "data"
CORPUS = DATA / "kr_recorded_corpus.txt"  # 8 passages of two sentences
ROOT = Path(__file__).parents[2]


def generate(url: str, out: Path, tokenizer: Path, *extra: str) -> list[str]:
    return ["krtest", "generate", "--corpus", str(CORPUS), "--teacher", url, "--tokenizer", str(tokenizer),
            "--per-passage", "2", "--out", str(out), *extra]


def test_generation_survives_every_fault_and_counts_what_was_billed(tiny_dir, tmp_path, tracking_uri):
    faults = {0: ["429"], 1: ["500"], 2: ["length"], 3: ["slow"], 4: ["drop"], 5: ["length", "length"]}
    out = tmp_path / "out"
    with FaultServer(CORPUS.read_text(), faults) as server:
        result = CliRunner().invoke(cli, generate(server.url, out, tiny_dir, "--timeout", "1.5", "--retries", "3",
                                                  "--concurrency", "3", "--max-tokens", "100"))
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
def test_a_refused_key_says_authentication_failed_and_names_the_variable(tiny_dir, tmp_path, tracking_uri,
                                                                           monkeypatch, status, named):
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


def test_a_named_model_skips_models_and_a_missing_extra_says_how_to_install(tiny_dir, tmp_path, tracking_uri,
                                                                             monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FaultServer(CORPUS.read_text()) as server:
        result = CliRunner().invoke(cli, generate(server.url, tmp_path / "out", tiny_dir, "--teacher-model", "gw-x",
                                                  "--max-passages", "2"))
    assert result.exit_code == 0, result.output
    assert server.models_asked == 0 and server.passages_asked() == [0, 1]  # a gateway without /models works
    assert set(server.keys) == {"Bearer not-needed"}
    real_import = builtins.__import__

    def no_openai(name, *args, **kwargs):
        if name == "openai" or name.startswith("openai."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_openai)
    result = CliRunner().invoke(cli, generate("http://127.0.0.1:9/v1", tmp_path / "other", tiny_dir))
    assert result.exit_code == 1 and "pip install 'cctk[teacher]'" in result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "other").exists()
