"""``cctk krtest generate --corpus FILE --teacher ...``: KR-Test items from the user's own corpus.

The paper's pipeline (figure 1): the corpus is cut into passages (``cctk.krtest.passages``), the
teacher is asked for ``per_passage`` contrastive items per passage (``cctk.krtest.teacher``), and
every proposed item is checked (``cctk.krtest.validate``); the items kept are ``questions.jsonl``.

Counting, so that ``kept + sum(rejected) == proposed`` always holds: each request *proposes*
``per_passage`` items. A reply with fewer readable items (or none: not JSON) leaves the missing ones
rejected as ``no_item``; an entry that is not an object with three strings is ``malformed``;
entries beyond ``per_passage`` are counted as ``surplus`` and not checked.

The folder it writes::

    questions.jsonl    the items kept, the paper's fields (location in the unit asked for)
    generation.json    passages, proposed, kept, rejected by reason, surplus, teacher, prompt version,
                       seed, segmentation, location unit, scoring tokenizer, thresholds, seconds
    proposals.jsonl    every proposed item with its passage's location and its verdict ("kept" or a reason)
    replies.jsonl      every raw reply of the teacher, with its passage's location
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..errors import CctkError
from .items import Item
from .passages import Passage, check_segment, segment
from .scoring import encode_continuation
from .teacher import PROMPT_VERSION, messages, parse_reply
from .validate import FIELDS, MAX_SPANS, REASONS, SUPPORT, Checker, key

QUESTIONS, GENERATION, PROPOSALS, REPLIES = "questions.jsonl", "generation.json", "proposals.jsonl", "replies.jsonl"


@dataclass(frozen=True)
class Options:
    segment: str = "blank-lines"
    per_passage: int = 3
    location: str = "char"
    max_passages: int | None = None  # the first N passages only (a quick look at a big corpus)

    def check(self) -> None:
        check_segment(self.segment, self.location)
        if self.per_passage < 1:
            raise CctkError(f"--per-passage must be >= 1, got {self.per_passage}")
        if self.max_passages is not None and self.max_passages < 1:
            raise CctkError(f"--max-passages must be >= 1, got {self.max_passages}")


@dataclass
class Generation:
    """What one generation did: the counts of generation.json, and the items and records behind them."""

    passages: int = 0
    proposed: int = 0
    kept: int = 0
    rejected: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))
    surplus: int = 0
    items: list[Item] = field(default_factory=list)
    proposals: list[dict] = field(default_factory=list)
    replies: list[dict] = field(default_factory=list)

    def judge(self, verdict: str, location: int, record: dict) -> None:
        self.proposed += 1
        self.proposals.append({"location": location, "verdict": verdict, **record})
        if verdict == "kept":
            self.kept += 1
        else:
            self.rejected[verdict] += 1


def generate(corpus: str, teacher, tokenizer, options: Options, echo=print) -> Generation:
    """Ask the teacher about every passage and keep the items that pass every check."""
    options.check()
    found = segment(corpus, options.segment, tokenizer)[: options.max_passages]
    if not found:
        raise CctkError("the corpus has no passage (only blank lines?)")
    done, seen = Generation(passages=len(found)), set()
    for n, passage in enumerate(found, start=1):
        location = passage.location(options.location)
        reply = teacher.complete(messages(passage.text, options.per_passage))
        done.replies.append({"location": location, "reply": reply})
        _judge_reply(done, reply, location, checker_for(passage, options.location, tokenizer), seen, options.per_passage)
        echo(f"passage {n}/{len(found)} (location {location}): {done.kept} kept of {done.proposed} proposed so far")
    return done


def checker_for(passage: Passage, unit: str, tokenizer) -> Checker:
    """The rules for the items of ``passage``, sides encoded as ``tokenizer``'s scoring sees them."""

    def sides(context, true, false):
        return encode_continuation(tokenizer, context, true), encode_continuation(tokenizer, context, false)

    def holds(location):
        return location == passage.location(unit)

    return Checker(passage.text, sides, holds)


def _judge_reply(done: Generation, reply: str, location: int, checker: Checker, seen: set, k: int) -> None:
    """The reply's first ``k`` entries judged; the ones it lacks are ``no_item``, extra ones ``surplus``."""
    entries = parse_reply(reply) or []
    done.surplus += max(0, len(entries) - k)
    for entry in entries[:k]:
        if not (isinstance(entry, dict) and all(isinstance(entry.get(f), str) for f in FIELDS)):
            done.judge("malformed", location, {"entry": entry})
            continue
        texts = [entry[f].strip() for f in FIELDS]
        record = dict(zip(FIELDS, texts))
        verdict = checker.reason(*texts, location) or ("duplicate" if key(*texts) in seen else "kept")
        done.judge(verdict, location, record)
        if verdict == "kept":
            seen.add(key(*texts))
            done.items.append(Item(len(done.items) + 1, *texts, location))
    for _ in range(k - min(len(entries), k)):
        done.judge("no_item", location, {})


def write_generation(done: Generation, folder: Path, about: dict) -> dict[str, Path]:
    """The four files in ``folder`` (created); ``about`` (teacher, seed, options, ...) goes into generation.json."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {name: folder / name for name in (QUESTIONS, GENERATION, PROPOSALS, REPLIES)}
    lines = [json.dumps({"context": i.context, "sentence_true": i.sentence_true, "sentence_false": i.sentence_false,
                         "location": i.location}, ensure_ascii=False) for i in done.items]
    paths[QUESTIONS].write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    record = {"passages": done.passages, "proposed": done.proposed, "kept": done.kept, "rejected": done.rejected,
              "surplus": done.surplus, "prompt_version": PROMPT_VERSION, **about,
              "thresholds": {"support": SUPPORT, "max_changed_spans": MAX_SPANS}, "cctk_version": __version__}
    paths[GENERATION].write_text(json.dumps(record, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    for name, rows in ((PROPOSALS, done.proposals), (REPLIES, done.replies)):
        paths[name].write_text("".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows),
                               encoding="utf-8")
    return paths


def run(corpus_path: Path, teacher, tokenizer_name: str, options: Options, out: Path, seed: int, echo=print) -> Generation:
    """Check, connect, generate, write: the command, with ``teacher`` from ``teacher.make_teacher``."""
    from .items import read_corpus

    from ..models import check_available

    options.check()
    corpus = read_corpus(corpus_path)
    check_available(tokenizer_name)
    teacher.connect()  # an endpoint that does not answer fails here, before the tokenizer loads
    tokenizer = load_tokenizer(tokenizer_name)
    started = time.perf_counter()
    done = generate(corpus, teacher, tokenizer, options, echo)
    about = {"teacher": teacher.describe(), "seed": seed, "corpus": str(corpus_path), "segment": options.segment,
             "location": options.location, "per_passage": options.per_passage, "max_passages": options.max_passages,
             "tokenizer": tokenizer_name, "seconds": round(time.perf_counter() - started, 1)}
    write_generation(done, out, about)
    return done


def load_tokenizer(name: str):
    """The tokenizer of a roster key, folder or Hub id: the bundled one from its converted folder (or its
    GGUF), a folder's own, else the model's (loaded)."""
    from transformers import AutoTokenizer

    from ..models import BUNDLED, bundled_folder, bundled_gguf, check_available, load_model

    check_available(name)
    if name == BUNDLED:
        converted = bundled_folder()
        folder, file = (converted, None) if converted else bundled_gguf()
        tokenizer = AutoTokenizer.from_pretrained(folder, **({"gguf_file": file} if file else {}))
    elif Path(name).is_dir():
        tokenizer = AutoTokenizer.from_pretrained(name)
    else:
        return load_model(name)[1]
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def summary_line(done: Generation) -> str:
    reasons = ", ".join(f"{k} {v}" for k, v in done.rejected.items() if v)
    return (f"{done.passages} passages, {done.proposed} items proposed, {done.kept} kept, "
            f"{done.proposed - done.kept} rejected" + (f" ({reasons})" if reasons else "")
            + (f"; {done.surplus} surplus items ignored" if done.surplus else ""))
