"""A fault-injecting OpenAI-compatible chat server on loopback (stdlib only), for the generation's fault tests.

It answers ``POST /v1/chat/completions`` as a teacher with one valid KR-Test item per asked item, written
from the passage it is asked about (context: the first sentence; true: the second; false: the second
with its last word replaced), or with the items ``items`` scripts for that passage (a scripted teacher);
and as the paper's oracle (``judge``) when the request is the oracle's prompt. ``faults`` maps a
passage's index to what its first attempts get, in order, teacher and oracle alike::

    "429"      HTTP 429 with Retry-After: 1
    "500"      HTTP 500
    "slow"     the reply after ``slow_seconds`` (past the client's timeout: never received)
    "drop"     the connection closed without an answer
    "length"   a reply cut by the token limit (finish_reason "length", half a JSON array)
    "hang"     no answer until ``release`` is set (a request in flight when the client is killed)

``pinned``: chat requests for another model are refused with HTTP 400 and FastAPI's ``{"detail": ...}``, as
``transformers serve`` refuses them; ``models=False``: ``/v1/models`` answers 404. Like strict endpoints, it
refuses ``max_tokens`` (asks for ``max_completion_tokens``) and ``response_format`` with HTTP 400. It records
every request (passage, limit, time) and the usage it reported in every reply the client received.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cctk.krtest.measurement.passages import segment

QUESTION = re.compile(r"\[Question ID: (\d+)\]\nContext: (.*)\nOption A: (.*)\nOption B: (.*)")


class FaultServer:
    def __init__(
        self,
        corpus: str,
        faults: dict[int, list[str]] | None = None,
        slow_seconds: float = 3.0,
        status: int | None = None,
        items: dict[int, list[dict]] | None = None,
        pinned: str | None = None,
        models: bool = True,
    ):
        self.passages = [p.text for p in segment(corpus)]
        self.items = items or {}  # passage index -> the items its reply holds (else item_for, once per asked item)
        self.faults = {k: list(v) for k, v in (faults or {}).items()}
        self.slow_seconds = slow_seconds
        self.status = status  # every request answered with this HTTP status (401: a bad key)
        self.pinned = pinned  # chat requests for another model: HTTP 400 with FastAPI's {"detail": ...}
        self.models = models  # False: /v1/models answers 404 (a gateway without it)
        self.models_asked = 0
        self.refused = 0  # chat requests refused for their model
        self.sent: set[str] = set()  # every parameter any chat request carried
        self.wrong: set[str] = set()  # oracle: questions with these words in their context answered wrong
        self.skip: set[str] = set()  # oracle: and these left unanswered
        self.keys: list[str] = []  # the Authorization header of every request
        self.asked: list[tuple[int, int, float]] = []  # (passage, token limit, time) of every chat request
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0}
        self.delivered = 0  # replies with HTTP 200 the client received
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}/v1"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def passages_asked(self) -> list[int]:
        return [p for p, _, _ in self.asked]

    def answer(self, handler, body: dict) -> None:
        self.sent |= set(body)
        if self.pinned and body["model"] != self.pinned:  # as transformers serve refuses it
            self.refused += 1
            return _send(handler, 400, {"detail": f"Server is pinned to '{self.pinned}'; requested '{body['model']}'."})
        if "max_tokens" in body:
            return _send(
                handler,
                400,
                {
                    "error": {
                        "message": "Unsupported parameter: 'max_tokens' is not supported "
                        "with this model. Use 'max_completion_tokens' instead."
                    }
                },
            )
        if "response_format" in body:
            return _send(handler, 400, {"error": {"message": "response_format is not supported"}})
        if body["messages"][0]["content"].startswith("Instruction:"):  # the oracle's prompt
            return self.judge(handler, body)
        text = body["messages"][-1]["content"].removeprefix("Passage: ").split("\n\nWrite ")[0]
        passage = self.passages.index(text)
        fault = self._fault(passage, body["max_completion_tokens"])
        k = int(body["messages"][-1]["content"].split("\n\nWrite ")[1].split()[0])
        items = self.items.get(passage) or [item_for(text)] * k
        self._respond(handler, fault, json.dumps(items), 100 + len(items[0]["context"]))

    def _fault(self, passage: int, limit: int) -> str | None:
        """Record a chat request about ``passage``; the fault its attempt gets (None: a good reply)."""
        with self.lock:
            self.asked.append((passage, limit, time.monotonic()))
            return self.faults.get(passage, []).pop(0) if self.faults.get(passage) else None

    def judge(self, handler, body: dict) -> None:
        """As an oracle: the option found word for word in the paragraph, except for questions whose context
        holds a word of ``self.wrong`` (the other option) or of ``self.skip`` (left out of the reply)."""
        user = body["messages"][1]["content"]
        paragraph = user.split("*** Reference Paragraph ***\n")[1].split("\n\n*** Questions ***")[0]
        fault = self._fault(self.passages.index(paragraph), body["max_completion_tokens"])
        answers = {}
        for qid, context, a, _b in QUESTION.findall(user):
            right = "A" if a in paragraph else "B"
            if any(w in context for w in self.skip):
                continue
            answers[qid] = {"A": "B", "B": "A"}[right] if any(w in context for w in self.wrong) else right
        self._respond(handler, fault, "```json\n" + json.dumps(answers) + "\n```", len(user) // 4)

    def _respond(self, handler, fault: str | None, content: str, prompt: int) -> None:
        """``content`` as the reply (``prompt`` tokens billed for the request), or the fault instead."""
        if fault == "429":
            return _send(handler, 429, {"error": {"message": "rate limited"}}, {"Retry-After": "1"})
        if fault == "500":
            return _send(handler, 500, {"error": {"message": "boom"}})
        if fault == "drop":
            handler.close_connection = True
            return handler.connection.close()
        if fault == "hang":
            self.release.wait(120)
            return _send(handler, 500, {"error": {"message": "released"}})
        if fault == "length":
            content = content[: len(content) // 2]
        completion = len(content) // 4
        if fault == "slow":
            time.sleep(self.slow_seconds)  # the client gave up: what follows is never received
        else:
            with self.lock:
                self.usage["prompt_tokens"] += prompt
                self.usage["completion_tokens"] += completion
                self.delivered += 1
        _send(
            handler,
            200,
            {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "fault-model",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "length" if fault == "length" else "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                },
            },
        )

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # /v1/models
                server.models_asked += 1
                server.keys.append(self.headers.get("Authorization", ""))
                if server.status:
                    return _send(self, server.status, {"error": {"message": "no"}})
                if not server.models:
                    return _send(self, 404, {"detail": "Not Found"})
                _send(
                    self,
                    200,
                    {
                        "object": "list",
                        "data": [{"id": "fault-model", "object": "model", "created": 0, "owned_by": "test"}],
                    },
                )

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.keys.append(self.headers.get("Authorization", ""))
                if server.status:
                    return _send(self, server.status, {"error": {"message": "invalid key"}})
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    server.answer(self, body)

            def log_message(self, *args):
                pass

        return Handler


def item_for(passage: str) -> dict:
    """A valid item about ``passage`` (two sentences): its last word changed in the second sentence."""
    first, second = passage.split(". ", 1)
    words = second.rstrip(".").split()
    return {"context": first + ".", "sentence_true": second, "sentence_false": " ".join([*words[:-1], "castles"]) + "."}


def _send(handler, status: int, payload: dict, headers: dict | None = None) -> None:
    body = json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.end_headers()
    handler.wfile.write(body)
    handler.wfile.flush()
