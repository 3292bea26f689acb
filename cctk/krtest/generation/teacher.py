"""The teacher that writes contrastive items from a passage: its prompt, its reply, and two kinds of teacher.

The prompt (``PROMPT_VERSION``) asks for the paper's tuples (section 3, "Contrastive Generation")
under its two constraints, correctness (the true sentence is grounded in the passage) and
adversarial similarity (the false sentence has the true one's length, syntax and style and differs
in one fact), with a shared context that sets the scene without giving the answer; two worked
examples show the JSON wanted, with as many items as are asked. The reply is read as JSON: the first
array (or object) in the text, code fences and chatter around it ignored.

Two teachers, one method ``complete(messages, n, limit) -> Reply`` (``ask`` adds the one retry of a
reply cut by the token limit):

    EndpointTeacher   an OpenAI-compatible chat endpoint (``http://host:port/v1``) through the
                      ``openai`` client; the API key is read from the environment variable named by
                      ``api_key_env`` (else ``OPENAI_API_KEY``) and never written anywhere
    LocalTeacher      a model key or folder, generated in-process with Transformers ``generate``:
                      greedy at temperature 0, else sampled, request n seeded with ``seed + n``
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from ...core.errors import CctkError
from ...core.redaction import redact, variable_name
from ..measurement.items import TEXT_FIELDS

if TYPE_CHECKING:
    import torch
    from openai import OpenAI
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

    from ...core.lm.memory import Plan

PROMPT_VERSION = "kr-items-2"  # 2: examples show as many items as asked, each on another fact
SYSTEM = (
    "You write test items that check whether a reader remembers the facts of a passage. "
    'Reply with JSON only: a list of objects with the keys "context", "sentence_true", "sentence_false".'
)
RULES = (
    "Rules. context: a sentence taken from the passage that sets the scene but does not give the answer. "
    "sentence_true: a sentence of the passage that follows the context and states one fact, in the passage's "
    "words. sentence_false: sentence_true with exactly one fact changed (a name, number, place or word), "
    "the same length and form, and false according to the passage. Each item tests a different fact. "
    "Prefer facts a reader could not guess without the passage."
)
# Two worked examples of four facts each, so that the reply shown has as many items as are asked (up to
# four; small teachers copy the length of the example reply) and no single example is copied.
EXAMPLES = [  # the first item of each is version 1's one example item: context = the sentence before
    (
        (
            "The Ouse bridge was built in 1821 by the mason Tom Hale. It has five arches of red stone. "
            "It carried a toll of two pence until 1870. A flood damaged its north pier in 1902."
        ),
        [
            {
                "context": "The Ouse bridge was built in 1821 by the mason Tom Hale.",
                "sentence_true": "It has five arches of red stone.",
                "sentence_false": "It has three arches of red stone.",
            },
            {
                "context": "The Ouse bridge has five arches of red stone.",
                "sentence_true": "It carried a toll of two pence until 1870.",
                "sentence_false": "It carried a toll of six pence until 1870.",
            },
            {
                "context": "The Ouse bridge carried a toll until 1870.",
                "sentence_true": "A flood damaged its north pier in 1902.",
                "sentence_false": "A fire damaged its north pier in 1902.",
            },
            {
                "context": "The Ouse bridge has five arches of red stone.",
                "sentence_true": "It was built in 1821 by the mason Tom Hale.",
                "sentence_false": "It was built in 1851 by the mason Tom Hale.",
            },
        ],
    ),
    (
        (
            "Mina Ray grew up in the port of Sandle. She sailed to Lisbon at the age of 19. "
            "There she worked for a wine merchant for six years. She later wrote a book about the Tagus estuary."
        ),
        [
            {
                "context": "Mina Ray grew up in the port of Sandle.",
                "sentence_true": "She sailed to Lisbon at the age of 19.",
                "sentence_false": "She sailed to Naples at the age of 19.",
            },
            {
                "context": "Mina Ray sailed to Lisbon at the age of 19.",
                "sentence_true": "There she worked for a wine merchant for six years.",
                "sentence_false": "There she worked for a silk merchant for six years.",
            },
            {
                "context": "Mina Ray worked for a wine merchant for six years.",
                "sentence_true": "She later wrote a book about the Tagus estuary.",
                "sentence_false": "She later wrote a book about the Douro valley.",
            },
            {
                "context": "Mina Ray sailed to Lisbon at the age of 19.",
                "sentence_true": "She grew up in the port of Sandle.",
                "sentence_false": "She grew up in the port of Harwick.",
            },
        ],
    ),
]
FENCE = re.compile(r"```(?:json)?", re.IGNORECASE)
# Structured output (OpenAI's response_format): the item list, wrapped in an object as strict schemas want.
ITEM_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": list(TEXT_FIELDS),
    "properties": {k: {"type": "string"} for k in TEXT_FIELDS},
}
RESPONSE_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "kr_items",
        "strict": True,
        "schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["items"],
            "properties": {"items": {"type": "array", "items": ITEM_SCHEMA}},
        },
    },
}


def messages(passage: str, k: int) -> list[dict[str, str]]:
    """The chat of one request: the rules, two worked examples of min(k, 4) items, then the passage."""
    chat = [{"role": "system", "content": f"{SYSTEM} {RULES}"}]
    shown = min(k, len(EXAMPLES[0][1]))
    for example, items in EXAMPLES:
        chat += [
            {"role": "user", "content": _ask(example, shown)},
            {"role": "assistant", "content": json.dumps(items[:shown], ensure_ascii=False)},
        ]
    return [*chat, {"role": "user", "content": _ask(passage, k)}]


def _ask(passage: str, k: int) -> str:
    return (
        f"Passage: {passage}\n\nWrite {k} item{'s' if k > 1 else ''}"
        f"{', each on a different fact' if k > 1 else ''}: context = a sentence of the passage, "
        "sentence_true = a later sentence, sentence_false = that sentence with one fact changed."
    )


def parse_reply(text: str) -> list[Any] | None:
    """The items of a reply: the first JSON array in it (an object holding one, or one item object,
    counts as well); None when there is no JSON value to read."""
    text = FENCE.sub("", text)
    decoder = json.JSONDecoder()
    for start in (m.start() for m in re.finditer(r"[\[{]", text)):
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, list):
            return value
        lists = [v for v in value.values() if isinstance(v, list)]
        return lists[0] if lists else [value]
    return None


@dataclass(frozen=True)
class Reply:
    """One answer of a teacher: its text, why it stopped, what the endpoint billed, how many requests it took."""

    text: str
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 1
    truncated: bool = False  # still cut by the token limit after the one retry with twice the limit

    def line(self, document: str, location: int, chat: list[dict[str, str]], **extra: Any) -> dict[str, Any]:
        """The journal line of request ``chat`` about a passage and this reply (``extra`` after its finish reason)."""
        return {
            "document": document,
            "location": location,
            "request": {"messages": chat},
            "reply": self.text,
            "finish_reason": self.finish_reason,
            **extra,
            "usage": {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens},
            "requests": self.requests,
        }


def ask(teacher: Teacher, chat: list[dict[str, str]], n: int) -> Reply:
    """Ask ``teacher`` (request ``n``: its seed is ``seed + n``); a reply cut by the token limit is asked
    again once with twice the limit, and both replies' usage counts (the endpoint billed both)."""
    first = _as_reply(teacher.complete(chat, n, teacher.max_tokens))
    if first.finish_reason != "length":
        return first
    second = _as_reply(teacher.complete(chat, n, 2 * teacher.max_tokens))
    return Reply(
        second.text,
        second.finish_reason,
        first.prompt_tokens + second.prompt_tokens,
        first.completion_tokens + second.completion_tokens,
        first.requests + second.requests,
        second.finish_reason == "length",
    )


def _as_reply(value: Reply | str) -> Reply:
    return value if isinstance(value, Reply) else Reply(str(value))


def _first_line(error: Exception) -> str:
    text = str(error)
    return text.splitlines()[0][:300] if text else ""


RETRIED = (408, 409, 429)  # the statuses below 500 the openai client tries again (with 5xx and lost connections)


def _reason(error: Exception) -> str:
    """The first line of the error with what the server said: the openai client keeps only a JSON body's
    ``error.message`` in its text, so a FastAPI server's ``detail`` (transformers serve's ``Server is pinned to
    ...``) or a plain-text body was lost (``Error code: 400``)."""
    text, body = _first_line(error), getattr(error, "body", None)
    said = body.get("message") or body.get("detail") if isinstance(body, dict) else body
    said = " ".join(str(said).split())[:300] if said else ""
    return f"{text} - {said}" if said and said not in text else text


def require_openai() -> None:
    """The ``teacher`` extra is installed, or one line that says how to get it."""
    try:
        import openai  # noqa: F401 (imported to learn that it imports, as the endpoint's client will)
    except ImportError:
        raise CctkError("an endpoint teacher needs the openai client: pip install 'cctk[teacher]'") from None


class Teacher(Protocol):
    """What a generation asks of its teacher, and ``krtest oracle`` or a generation's gate of its oracle:
    ``EndpointTeacher`` or ``LocalTeacher`` (``make_teacher``)."""

    max_tokens: int

    def connect(self) -> None: ...

    def complete(self, chat: list[dict[str, str]], n: int = 0, limit: int | None = None) -> Reply: ...

    def describe(self) -> dict[str, Any]: ...


@dataclass
class EndpointTeacher:
    """An OpenAI-compatible chat endpoint, through the ``openai`` client (its retries honour Retry-After
    on 408/409/429/5xx and connection errors, with exponential backoff)."""

    url: str
    model: str | None = None  # None: the endpoint's only model (asked of /models)
    api_key_env: str | None = None  # None: OPENAI_API_KEY when set, else a dummy (local servers)
    temperature: float | None = None  # None: not sent (reasoning models refuse it); seed sent with it
    max_tokens: int = 400
    seed: int = 0
    timeout: float = 120.0
    retries: int = 5
    response_format: dict[str, Any] | None = field(default_factory=lambda: RESPONSE_FORMAT)  # None: plain JSON asked
    role: str = "teacher"  # or "oracle": what its errors call it (a generation with --oracle talks to both)
    key_flag: str = "--api-key-env"  # the option that names its key variable, for its errors
    _client: OpenAI | None = field(default=None, repr=False)  # built by connect()
    _limit_key: str = "max_tokens"  # max_completion_tokens where the server refuses max_tokens
    _structured: bool = True  # response_format sent, until the server refuses it

    def key_variable(self) -> str | None:
        """The environment variable the key comes from (None: no key, a dummy is sent)."""
        if self.api_key_env:
            return self.api_key_env
        return "OPENAI_API_KEY" if os.environ.get("OPENAI_API_KEY") else None

    def api_key(self) -> str:
        variable = self.key_variable()
        if variable is None:
            return "not-needed"
        key = os.environ.get(variable, "")
        if not key:
            raise CctkError(f"{self.key_flag} {variable}: that environment variable is not set")
        return key

    def connect(self) -> None:
        """Build the client and ask /models: an endpoint that does not answer, or refuses the key, fails here,
        before any work; with no model named, its only model is the one. With a model named, any other
        refusal of /models is no error (gateways may lack it): the model is asked for directly."""
        from openai import APIConnectionError, AuthenticationError, OpenAI, OpenAIError, PermissionDeniedError

        self._client = OpenAI(base_url=self.url, api_key=self.api_key(), timeout=self.timeout, max_retries=self.retries)
        try:
            listed = [m.id for m in self._client.with_options(max_retries=min(self.retries, 1)).models.list()]
        except OpenAIError as error:
            unanswered = (APIConnectionError, AuthenticationError, PermissionDeniedError)  # nothing would work
            if self.model is None or isinstance(error, unanswered):
                self._fail(error, "listing its models")
            return
        if self.model is not None:
            return
        if len(listed) != 1:
            raise CctkError(
                f"the endpoint {redact(self.url)} serves {len(listed)} models ({', '.join(listed) or 'none'}); "
                f"name one with --{self.role}-model"
            )
        self.model = listed[0]

    def complete(self, chat: list[dict[str, str]], n: int = 0, limit: int | None = None) -> Reply:
        """One reply; a parameter the server refuses (max_tokens, response_format) is dropped and asked again."""
        from openai import BadRequestError, OpenAIError, UnprocessableEntityError

        assert self._client is not None, "connect() builds the client before any request"
        while True:
            arguments = self._arguments(chat, n, limit)
            try:
                reply = self._client.chat.completions.create(**arguments)
                break
            except (BadRequestError, UnprocessableEntityError) as error:
                if not self._adapt(_reason(error), arguments):
                    self._fail(error, f"request {n + 1}")
            except OpenAIError as error:
                self._fail(error, f"request {n + 1}")
        choice, usage = reply.choices[0], reply.usage
        return Reply(
            choice.message.content or "",
            choice.finish_reason or "stop",
            getattr(usage, "prompt_tokens", 0) or 0,
            getattr(usage, "completion_tokens", 0) or 0,
        )

    def _arguments(self, chat: list[dict[str, str]], n: int, limit: int | None) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create``."""
        arguments: dict[str, Any] = {"model": self.model, "messages": chat, self._limit_key: limit or self.max_tokens}
        if self.temperature is not None:  # sampling parameters only when asked for
            arguments.update(temperature=self.temperature, seed=self.seed + n)
        if self._structured and self.response_format:
            arguments["response_format"] = self.response_format
        return arguments

    def _adapt(self, message: str, sent: dict[str, Any]) -> bool:
        """Drop what a 400 names as refused from what was ``sent`` (another thread may have dropped it
        already); False when there is nothing left to drop."""
        if "max_tokens" in message and "max_tokens" in sent:
            self._limit_key = "max_completion_tokens"
            return True
        if "response_format" in sent:  # servers without structured output say so in many ways
            self._structured = False
            return True
        return False

    def _fail(self, error: Exception, what: str) -> NoReturn:
        from openai import APIConnectionError, APIStatusError, AuthenticationError, PermissionDeniedError

        if isinstance(error, (AuthenticationError, PermissionDeniedError)):
            variable = self.key_variable()
            raise CctkError(
                f"authentication failed at {redact(self.url)} (HTTP {error.status_code}) with the key from "
                + (f"${variable}" if variable else f"no variable (set OPENAI_API_KEY or {self.key_flag})")
            )
        if isinstance(error, APIConnectionError) and what.startswith("listing"):
            raise CctkError(
                f"cannot reach the {self.role} endpoint {redact(self.url)} ({type(error).__name__}); "
                "is the server running?"
            ) from None
        status = error.status_code if isinstance(error, APIStatusError) else None
        if status is not None and status < 500 and status not in RETRIED:  # refused, not retried: say why
            raise CctkError(
                f"the {self.role} endpoint {redact(self.url)} refused {what} (HTTP {status}): {_reason(error)}; "
                f"mend what it names (--{self.role}-model?) and run again (passages answered are kept)"
            ) from None
        raise CctkError(
            f"the {self.role} endpoint {redact(self.url)} failed on {what} after {self.retries} retries: "
            f"{type(error).__name__}: {_reason(error)}; run the same command again to "
            "continue"
        ) from None

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "endpoint",
            "url": redact(self.url),
            "model": self.model,
            "api_key_env": self.key_variable() or "",
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "token_limit_parameter": self._limit_key,
            "structured_output": bool(self._structured and self.response_format),
            "seeds": "seed + passage index" if self.temperature is not None else "none sent (no temperature sent)",
            "retries": self.retries,
            "timeout": self.timeout,
        }


@dataclass
class LocalTeacher:
    """A model key or folder, generating in-process on ``device`` (``make_teacher`` resolves ``--device``, CUDA
    where there is one, and checks ``plan``, its memory there, before any work)."""

    model_name: str
    device: torch.device
    plan: Plan = field(repr=False)
    temperature: float | None = None  # None or 0: greedy
    max_tokens: int = 400
    seed: int = 0
    dtype: str = "float32"  # its weights' (--dtype)
    role: str = "teacher"  # or "oracle", as lines name it
    _read: tuple[PreTrainedTokenizerBase, PretrainedConfig] | None = field(default=None, repr=False)  # connect()
    _model: PreTrainedModel | None = field(default=None, repr=False)  # its weights, loaded at the first request
    # one request at a time (--concurrency sends several): each drawn from its own seed, one cache on the device
    _turn: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def connect(self) -> None:
        """Its tokenizer and configuration, no weights: what its requests are checked with (``most_prompt``)
        before the weights load, at the first request."""
        from ...core.lm.models import load_tokenizer, model_config

        self._read = load_tokenizer(self.model_name), model_config(self.model_name)

    def _weights(self) -> PreTrainedModel:
        """The model on its device, loaded at the first request (under the turn's lock) and kept."""
        import torch

        from ...core.lm.device import placed
        from ...core.lm.models import load_model

        if self._model is None:
            model, _ = load_model(self.model_name, getattr(torch, self.dtype), keep=False)  # the only copy
            with placed(model, self.plan, self.device, f"loading {self.model_name}") as moved:
                self._model = moved
        return self._model

    def complete(self, chat: list[dict[str, str]], n: int = 0, limit: int | None = None) -> Reply:
        import torch
        from transformers import GenerationMixin

        from ...core.lm.device import out_of_memory_as_line

        tokenizer = self._tokenizer
        ids = self._prompt(chat)
        sample = bool(self.temperature)
        options = {"do_sample": True, "temperature": self.temperature, "top_p": 1.0} if sample else {"do_sample": False}
        limit = limit or self.max_tokens
        context = self.context
        if context is not None:  # a retry's doubled limit stops at the context (generate checks the first fits)
            if ids.shape[1] >= context:  # an oracle's prompt (not checked before its first request)
                raise CctkError(
                    f"{self.model_name}'s request {n} is a prompt of {ids.shape[1]} tokens, past its context of "
                    f"{context} tokens (its position embeddings)"
                )
            limit = min(limit, context - ids.shape[1])
        ids = ids.to(self.device)
        # request n draws from seed + n: a continued run draws the same (the CUDA generator forked too)
        cuda: list[int] = []
        if self.device.type == "cuda":  # "cuda" alone is the current device
            cuda = [self.device.index if self.device.index is not None else torch.cuda.current_device()]
        with self._turn:
            model = self._weights()
            assert isinstance(model, GenerationMixin), type(model)  # load_model's AutoModelForCausalLM generates
            with (
                torch.random.fork_rng(devices=cuda),
                out_of_memory_as_line(self.plan, self.device, f"{self.model_name}'s reply {n}"),
            ):
                torch.manual_seed(self.seed + n)
                out = model.generate(
                    ids,
                    attention_mask=torch.ones_like(ids),
                    max_new_tokens=limit,
                    pad_token_id=tokenizer.pad_token_id,
                    **options,
                )
        new = out[0, ids.shape[1] :].cpu()
        cut = len(new) >= limit and int(new[-1]) != tokenizer.eos_token_id
        said = tokenizer.decode(new, skip_special_tokens=True)
        assert isinstance(said, str), type(said)  # one sequence of ids decodes to one string
        return Reply(said, "length" if cut else "stop", int(ids.shape[1]), len(new))

    def _prompt(self, chat: list[dict[str, str]]) -> torch.Tensor:
        """The prompt's ids (one row) as ``complete`` sends them: the chat template's, or a base model's plain
        text."""
        from transformers import BatchEncoding

        tokenizer = self._tokenizer
        if tokenizer.chat_template:
            encoded = tokenizer.apply_chat_template(
                chat, add_generation_prompt=True, return_dict=True, return_tensors="pt"
            )
            assert isinstance(encoded, BatchEncoding), type(encoded)  # return_dict=True
            ids: torch.Tensor = encoded["input_ids"]
            return ids
        text = "".join(f"{m['role']}: {m['content']}\n" for m in chat) + "assistant:"
        plain: torch.Tensor = tokenizer(text, return_tensors="pt")["input_ids"]
        return plain

    @property
    def _tokenizer(self) -> PreTrainedTokenizerBase:
        assert self._read is not None, "connect() reads the tokenizer before any request"
        return self._read[0]

    @property
    def context(self) -> int | None:
        """The longest sequence the model reads (its position embeddings); None where it states none."""
        from ...core.lm.models import stated_context

        assert self._read is not None, "connect() reads the configuration before any request"
        return stated_context(self._read[1])

    def most_prompt(self, tokens: int) -> tuple[int, str, str]:
        """The most prompt tokens a request may hold, up to ``tokens``, beside a reply of up to ``max_tokens``
        (in memory, its retry's twice that): ``tokens`` where they fit, else the most that do, what ``tokens`` is
        past, and what else the user may do (as words; empty where they fit)."""
        from ...core.lm.device import room

        assert self._read is not None, "connect() reads the configuration before any request"
        context, most = self.context, tokens
        past, instead = "", ""
        if context is not None and tokens + self.max_tokens > context:
            most = context - self.max_tokens
            past = f"past {self.model_name}'s context of {context} tokens (its position embeddings)"
            instead = f"{'an' if self.role[0] in 'aeiou' else 'a'} {self.role} that reads more"
        now, reply = room(self.device), 2 * self.max_tokens
        from ...core.lm.models import eager_attention

        # attention that writes out the prompt's scores: as the loaded model runs it, or as it will load
        eager = eager_attention(self._read[1] if self._model is None else self._model.config)
        loaded = self._model is not None  # else its weights are to load beside the request

        def short(prompt: int) -> str | None:
            return self.plan.request_shortfall(prompt, reply, now, eager, loaded)

        said = short(most) if most > 0 else None
        if said is None:
            return most, past, instead
        low, high = 0, most  # the most that fits lies in [low, high); 0 where the reply alone does not
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if short(middle) is None else (low, middle)
        more = "--dtype bfloat16 (its cache at half)" if self.dtype == "float32" else ""
        return low, f"past the memory free: {said}", ", or ".join(filter(None, (more, "a device with more free")))

    def prompt_tokens(self, chat: list[dict[str, str]]) -> int:
        return int(self._prompt(chat).shape[1])

    def longest(self, chats: Sequence[list[dict[str, str]]], candidates: int = 8) -> tuple[int, int]:
        """Which of ``chats`` makes the longest prompt, and its tokens as sent: the ``candidates`` longest by
        their last message alone (one batch through the tokenizer) each put through the template."""
        alone = self._tokenizer([c[-1]["content"] for c in chats], add_special_tokens=False)["input_ids"]
        first = sorted(range(len(chats)), key=lambda i: -len(alone[i]))[:candidates]
        return max(((i, self.prompt_tokens(chats[i])) for i in first), key=lambda found: found[1])

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "local",
            "model": self.model_name,
            "device": str(self.device),
            "dtype": self.dtype,
            "decoding": "sampled" if self.temperature else "greedy",
            "temperature": self.temperature or 0.0,
            "max_tokens": self.max_tokens,
        }


def check_together(*chosen: Teacher | None) -> None:
    """A local teacher and a local oracle load at once on one ``--device`` (``make_teacher`` checked each
    alone): both weights and the larger request checked together, before either loads; one line where they do not
    fit."""
    from ...core.lm.memory import together

    plans = [t.plan for t in chosen if isinstance(t, LocalTeacher)]
    short = together(plans) if len(plans) > 1 else None
    if short:
        raise CctkError(short)


def make_teacher(
    teacher: str,
    teacher_model: str | None = None,
    api_key_env: str | None = None,
    temperature: float | None = None,
    max_tokens: int = 400,
    seed: int = 0,
    timeout: float = 120.0,
    retries: int = 5,
    role: str = "teacher",
    key_flag: str = "--api-key-env",
    device: str | None = None,
    dtype: str | None = None,
) -> EndpointTeacher | LocalTeacher:
    """An endpoint for ``http(s)://...``, else a local model (checked available and its memory on ``device``
    planned, not yet loaded); ``role`` and ``key_flag`` name it and its key option in errors ("oracle",
    "--oracle-api-key-env"). ``device`` and ``dtype``: where a local model generates and its weights' dtype
    (``--device``, ``--dtype``, None: float32; an endpoint's server chooses its own)."""
    if temperature is not None and not (math.isfinite(temperature) and temperature >= 0):  # nan and inf too
        raise CctkError(f"--temperature must be a number >= 0 (0: greedy), got {temperature}")
    if max_tokens < 16:
        raise CctkError(f"--max-tokens must be >= 16, got {max_tokens}")
    if not timeout > 0 or retries < 0:  # a nan timeout too
        raise CctkError(f"--timeout must be > 0 and --retries >= 0, got {timeout} and {retries}")
    if api_key_env is not None:
        variable_name(api_key_env, key_flag)
    if teacher.startswith(("http://", "https://")):
        require_openai()
        endpoint = EndpointTeacher(
            teacher,
            teacher_model,
            api_key_env,
            temperature,
            max_tokens,
            seed,
            timeout,
            retries,
            role=role,
            key_flag=key_flag,
        )
        endpoint.api_key()  # an unset key variable fails here, before any work
        return endpoint
    if teacher_model or api_key_env:
        raise CctkError(f"--{role}-model and {key_flag} are for an endpoint {role} (--{role} http://...)")
    from ...core.lm.device import check_dtype, generation_plan, resolve
    from ...core.lm.models import check_available, model_config

    check_available(teacher)
    where = resolve(device)
    dtype = dtype or "float32"
    check_dtype(dtype, where)
    # before it is loaded: its weights and a request with a retry's reply (twice --max-tokens)
    plan = generation_plan(teacher, model_config(teacher), where, 2 * max_tokens, dtype)
    return LocalTeacher(teacher, where, plan, temperature, max_tokens, seed, dtype, role)
