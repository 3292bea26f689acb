"""The teacher that writes contrastive items from a passage: its prompt, its reply, and two kinds of teacher.

The prompt (``PROMPT_VERSION``) asks for the paper's tuples (section 3, "Contrastive Generation")
under its two constraints, correctness (the true sentence is grounded in the passage) and
adversarial similarity (the false sentence has the true one's length, syntax and style and differs
in one fact), with a shared context that sets the scene without giving the answer; one worked
example shows the JSON wanted. The reply is read as JSON: the first array (or object) in the text,
code fences and chatter around it ignored.

Two teachers, one method ``complete(messages) -> str``:

    EndpointTeacher   an OpenAI-compatible chat endpoint (``http://host:port/v1``) through the
                      ``openai`` client; the API key is read from the environment variable named by
                      ``api_key_env`` and never written anywhere
    LocalTeacher      a model key or folder, generated in-process with Transformers ``generate``:
                      greedy at temperature 0, else sampled from a generator seeded once with ``seed``
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field

from ..errors import CctkError

PROMPT_VERSION = "kr-items-1"
SYSTEM = ("You write test items that check whether a reader remembers the facts of a passage. "
          "Reply with JSON only: a list of objects with the keys \"context\", \"sentence_true\", \"sentence_false\".")
RULES = ("Rules. context: a sentence taken from the passage that sets the scene but does not give the answer. "
         "sentence_true: a sentence of the passage that follows the context and states one fact, in the passage's "
         "words. sentence_false: sentence_true with exactly one fact changed (a name, number, place or word), "
         "the same length and form, and false according to the passage.")
EXAMPLES = [  # (passage, one item): two worked examples, so that no single one is copied
    ("The Ouse bridge was built in 1821 by the mason Tom Hale. It has five arches of red stone.",
     {"context": "The Ouse bridge was built in 1821 by the mason Tom Hale.",
      "sentence_true": "It has five arches of red stone.", "sentence_false": "It has three arches of red stone."}),
    ("Mina Ray grew up in the port of Sandle. She sailed to Lisbon at the age of 19.",
     {"context": "Mina Ray grew up in the port of Sandle.", "sentence_true": "She sailed to Lisbon at the age of 19.",
      "sentence_false": "She sailed to Naples at the age of 19."}),
]
FENCE = re.compile(r"```(?:json)?", re.IGNORECASE)


def messages(passage: str, k: int) -> list[dict]:
    """The chat of one request: the rules, two worked examples, then the passage and how many items."""
    chat = [{"role": "system", "content": f"{SYSTEM} {RULES}"}]
    for example, item in EXAMPLES:
        chat += [{"role": "user", "content": _ask(example, 1)},
                 {"role": "assistant", "content": json.dumps([item], ensure_ascii=False)}]
    return chat + [{"role": "user", "content": _ask(passage, k)}]


def _ask(passage: str, k: int) -> str:
    return (f"Passage: {passage}\n\nWrite {k} item{'s' if k > 1 else ''}: context = a sentence of the passage, "
            "sentence_true = a later sentence, sentence_false = that sentence with one fact changed.")


def parse_reply(text: str) -> list | None:
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


@dataclass
class EndpointTeacher:
    """An OpenAI-compatible chat endpoint."""

    url: str
    model: str | None = None  # None: the endpoint's only model
    api_key_env: str | None = None
    temperature: float = 0.0
    max_tokens: int = 400
    seed: int = 0
    timeout: float = 600.0
    _client: object = field(default=None, repr=False)
    _requests: int = 0

    def connect(self) -> None:
        """Reach the endpoint and settle the model name, or fail in one line (before any work)."""
        from openai import OpenAI, OpenAIError

        self._client = OpenAI(base_url=self.url, api_key=self.api_key(), timeout=self.timeout, max_retries=0)
        try:
            listed = [m.id for m in self._client.models.list()]
        except OpenAIError as error:
            raise CctkError(f"cannot reach the teacher endpoint {self.url} ({type(error).__name__}); "
                            "is the server running?") from None
        if self.model is None:
            if len(listed) != 1:
                raise CctkError(f"the endpoint {self.url} serves {len(listed)} models ({', '.join(listed) or 'none'}); "
                                "name one with --teacher-model")
            self.model = listed[0]

    def api_key(self) -> str:
        """The key from the environment variable named by ``api_key_env`` (servers without keys get a dummy)."""
        if not self.api_key_env:
            return "not-needed"
        key = os.environ.get(self.api_key_env, "")
        if not key:
            raise CctkError(f"--api-key-env {self.api_key_env}: that environment variable is not set")
        return key

    def complete(self, chat: list[dict]) -> str:
        from openai import OpenAIError

        self._requests += 1  # request n asks with seed + n: reproducible, yet not one stream for all
        try:
            reply = self._client.chat.completions.create(model=self.model, messages=chat, temperature=self.temperature,
                                                         max_tokens=self.max_tokens, seed=self.seed + self._requests - 1)
        except OpenAIError as error:
            raise CctkError(f"the teacher endpoint {self.url} failed on request {self._requests}: "
                            f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}") from None
        return reply.choices[0].message.content or ""

    def describe(self) -> dict:
        return {"kind": "endpoint", "url": self.url, "model": self.model, "api_key_env": self.api_key_env or "",
                "temperature": self.temperature, "max_tokens": self.max_tokens, "seeds": "seed + request number"}


@dataclass
class LocalTeacher:
    """A model key or folder, generating in-process."""

    model_name: str
    temperature: float = 0.0
    max_tokens: int = 400
    seed: int = 0
    _loaded: tuple | None = field(default=None, repr=False)
    _generator: object = field(default=None, repr=False)

    def connect(self) -> None:
        import torch

        from ..models import load_model

        self._loaded = load_model(self.model_name)
        self._generator = torch.Generator().manual_seed(self.seed)

    def complete(self, chat: list[dict]) -> str:
        import torch

        model, tokenizer = self._loaded
        if tokenizer.chat_template:
            ids = tokenizer.apply_chat_template(chat, add_generation_prompt=True, return_dict=True,
                                                return_tensors="pt")["input_ids"]
        else:  # a base model: the chat as plain text
            text = "".join(f"{m['role']}: {m['content']}\n" for m in chat) + "assistant:"
            ids = tokenizer(text, return_tensors="pt")["input_ids"]
        sample = self.temperature > 0
        options = {"do_sample": True, "temperature": self.temperature, "top_p": 1.0} if sample else {"do_sample": False}
        with torch.random.fork_rng(devices=[]):  # sampling draws from our seeded stream, not the global one
            if sample:
                torch.manual_seed(int(torch.randint(2**62, (1,), generator=self._generator)))
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=self.max_tokens,
                                 pad_token_id=tokenizer.pad_token_id, **options)
        return tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)

    def describe(self) -> dict:
        return {"kind": "local", "model": self.model_name, "decoding": "sampled" if self.temperature > 0 else "greedy",
                "temperature": self.temperature, "max_tokens": self.max_tokens}


def make_teacher(teacher: str, teacher_model: str | None = None, api_key_env: str | None = None,
                 temperature: float = 0.0, max_tokens: int = 400, seed: int = 0):
    """An endpoint for ``http(s)://...``, else a local model (checked available, not yet loaded)."""
    if temperature < 0:
        raise CctkError(f"--temperature must be >= 0, got {temperature}")
    if max_tokens < 16:
        raise CctkError(f"--max-tokens must be >= 16, got {max_tokens}")
    if teacher.startswith(("http://", "https://")):
        endpoint = EndpointTeacher(teacher, teacher_model, api_key_env, temperature, max_tokens, seed)
        endpoint.api_key()  # an unset key variable fails here, before any work
        return endpoint
    if teacher_model or api_key_env:
        raise CctkError("--teacher-model and --api-key-env are for an endpoint teacher (--teacher http://...)")
    from ..models import check_available

    check_available(teacher)
    return LocalTeacher(teacher, temperature, max_tokens, seed)
