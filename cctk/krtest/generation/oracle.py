"""``cctk krtest oracle``: the paper's Golden Standard check of a question set (appendix B).

Per source passage, one request: the reference paragraph, then each of its questions as
``[Question ID: n]`` / ``Context:`` / ``Option A:`` / ``Option B:``, the true side's position drawn per
question (in file order) from ``--seed``; temperature 0; the reply is read as a JSON object mapping
question ids to "A" or "B". A question the reply does not answer (or answers with anything else)
is unanswered and counts as wrong. Replies are journaled and a run continues as a generation does
(``cctk.krtest.generation.journal``).

The folder it writes::

    journal.jsonl               the exchanges, as they arrived
    oracle.json                 n, correct, accuracy, lo, hi (exact Clopper-Pearson 95%), unanswered,
                                passages, requests, usage, seed, settings, MLflow run
    oracle.csv                  line, document, location, id, true_option, answer, correct (file order)
    questions.validated.jsonl   the lines of the items the oracle answered correctly, as they were
"""

from __future__ import annotations

import csv
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ... import __version__
from ...core.errors import CctkError
from ...core.labels import counted
from ...core.stats import clopper_pearson
from ..measurement.items import Item, read_items
from .corpora import cut, read_documents
from .journal import JOURNAL, Journal, open_journal
from .teacher import LocalTeacher, ask

if TYPE_CHECKING:
    from ..measurement.passages import Passage
    from .teacher import EndpointTeacher, Teacher

ORACLE_JSON, ORACLE_CSV, VALIDATED = "oracle.json", "oracle.csv", "questions.validated.jsonl"
OWNED = (ORACLE_JSON, ORACLE_CSV, VALIDATED)
ORACLE_RUN = "krtest-oracle"  # tag cctk.kind of an oracle's MLflow run
# The paper's system prompt, word for word (appendix B, "Oracle Prompt (Example)").
SYSTEM = (
    "Instruction: You are an expert reading comprehension system. You will be provided with one Reference "
    "Paragraph and a list of Questions related to it. For each Question ID, determine which Option (A or B) "
    "is FACTUALLY CONSISTENT with the Reference Paragraph. Output strictly in JSON format where keys are "
    "Question IDs and values are the choice strings 'A' or 'B'."
)
OBJECT = re.compile(r"\{.*?\}", re.DOTALL)


@dataclass(frozen=True)
class Question:
    """An item as the oracle sees it: its id within its passage and where its true side is."""

    item: Item
    raw: str  # the item's line as it was (questions.validated.jsonl keeps it)
    document: str
    id: int
    true_option: str  # "A" or "B"

    def options(self) -> tuple[str, str]:
        true, false = self.item.sentence_true, self.item.sentence_false
        return (true, false) if self.true_option == "A" else (false, true)


@dataclass(frozen=True)
class Group:
    """One request: a passage and its questions."""

    document: str
    location: int
    paragraph: str
    questions: tuple[Question, ...]


def oracle_messages(group: Group) -> list[dict[str, str]]:
    """The paper's prompt: the reference paragraph, then every question of it."""
    blocks = []
    for q in group.questions:
        a, b = q.options()
        blocks.append(f"[Question ID: {q.id}]\nContext: {q.item.context}\nOption A: {a}\nOption B: {b}")
    user = f"*** Reference Paragraph ***\n{group.paragraph}\n\n*** Questions ***\n\n" + "\n\n".join(blocks)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def make_oracle(
    name: str,
    model: str | None = None,
    api_key_env: str | None = None,
    max_tokens: int = 400,
    seed: int = 0,
    timeout: float = 120.0,
    retries: int = 5,
    key_flag: str = "--api-key-env",
    device: str | None = None,
    dtype: str | None = None,
) -> EndpointTeacher | LocalTeacher:
    """The oracle as the paper ran it: an endpoint (``http(s)://...``) or a local model, at temperature 0
    (the seed of request n sent with it, as a teacher's), asked for one JSON object where the server takes it."""
    from .teacher import make_teacher

    chosen = make_teacher(
        name, model, api_key_env, 0.0, max_tokens, seed, timeout, retries, "oracle", key_flag, device, dtype
    )
    if hasattr(chosen, "response_format"):
        chosen.response_format = {"type": "json_object"}  # the paper's reply: one object of ids to "A"/"B"
    return chosen


def parse_answers(text: str) -> dict[int, str]:
    """Question id -> "A"/"B" from the first JSON object of a reply (ids as "1", "Question ID: 1", 1)."""
    text = text.replace("```json", "").replace("```", "")
    for match in OBJECT.finditer(text):
        try:
            value = json.loads(match.group(0))
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            found = {}
            for key, choice in value.items():
                digits = re.findall(r"\d+", str(key))
                if digits and str(choice).strip().upper() in ("A", "B"):
                    found[int(digits[-1])] = str(choice).strip().upper()
            return found
    return {}


def positions(count: int, seed: int) -> list[str]:
    """Where the true side goes ("A" or "B") for each of ``count`` questions in file order, drawn from ``seed``."""
    draw = random.Random(seed)
    return ["A" if draw.random() < 0.5 else "B" for _ in range(count)]


def read_questions(path: Path, seed: int) -> list[tuple[Item, str, str, str]]:
    """(item, raw line, document, true option) in file order; the true side's position drawn per question."""
    items = read_items(path)
    lines = Path(path).read_text(encoding="utf-8-sig").split("\n")  # a BOM, as read_items takes one
    out = []
    for item, option in zip(items, positions(len(items), seed), strict=True):
        raw = lines[item.line - 1]
        out.append((item, raw, json.loads(raw).get("document", ""), option))
    return out


def group_questions(
    found: list[tuple[Item, str, str, str]], passages: dict[str, list[Passage]], unit: str, source: str = "questions"
) -> list[Group]:
    """The questions grouped by their source passage, in order of first appearance; a one-line error
    for an item whose location points at no passage, naming ``source`` (the questions file) and its line."""
    groups: dict[tuple[str, int], list[tuple[Item, str, str, str, Passage]]] = {}
    for item, raw, document, true_option in found:
        passage = _passage_of(passages, document, item.location, unit)
        if passage is None:
            raise CctkError(
                f"{source} line {item.line}: location {item.location} points at no passage of "
                f"{document or 'the corpus'}"
            )
        groups.setdefault((document, passage.location(unit)), []).append((item, raw, document, true_option, passage))
    out = []
    for (document, location), members in groups.items():
        questions = tuple(Question(i, r, d, k + 1, t) for k, (i, r, d, t, _) in enumerate(members))
        out.append(Group(document, location, members[0][4].text, questions))
    return out


def _passage_of(passages: dict[str, list[Passage]], document: str, location: int, unit: str) -> Passage | None:
    from ..measurement.passages import passage_at

    if document not in passages:
        if document or len(passages) != 1:
            return None
        document = next(iter(passages))
    return passage_at(passages[document], location, unit)


@dataclass(frozen=True)
class OracleRequest:
    questions: Path
    corpus: Path
    out: Path
    seed: int = 0
    segment: str = "blank-lines"
    location: str = "char"
    min_tokens: int = 0
    max_passage_tokens: int | None = None
    text_field: str = "text"
    tokenizer_name: str = "smollm2-135m-bundled"
    overwrite: bool = False
    tracking: str | None = None

    def settings(self, oracle: dict[str, Any]) -> dict[str, Any]:
        return {
            "questions": str(Path(self.questions).resolve()),
            "corpus": str(Path(self.corpus).resolve()),
            **{k: getattr(self, k) for k in ("seed", "segment", "location", "min_tokens", "max_passage_tokens")},
            "oracle": oracle,
        }


def from_generation(folder: Path) -> dict[str, Any]:
    """The questions, corpus and segmentation of a generation folder (its generation.json)."""
    path = Path(folder) / "generation.json"
    if not path.is_file():
        raise CctkError(f"--generation {folder}: no generation.json there")
    record = json.loads(path.read_text(encoding="utf-8"))
    return {
        "questions": Path(folder) / "questions.jsonl",
        "corpus": Path(record["corpus"]),
        "segment": record["segment"],
        "location": record["location"],
        "min_tokens": record.get("min_tokens", 0),
        "max_passage_tokens": record.get("max_tokens_per_passage"),
        "text_field": record.get("text_field", "text"),
        "tokenizer_name": record["tokenizer"],
    }


def plan(request: OracleRequest) -> list[Group]:
    """Read and check everything, before any request: the groups to ask about."""
    from ..measurement.passages import check_segment
    from .from_corpus import load_tokenizer

    check_segment(request.segment, request.location)
    found = read_questions(request.questions, request.seed)
    documents = read_documents(request.corpus, request.text_field)
    tokenizer = load_tokenizer(request.tokenizer_name)
    located = cut(documents, request.segment, tokenizer, request.min_tokens, request.max_passage_tokens)
    passages = {d.name: [f.passage for f in located if f.document == k] for k, d in enumerate(documents)}
    return group_questions(found, passages, request.location, str(request.questions))


def run_oracle(request: OracleRequest, oracle: Teacher, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """The command: plan, connect, ask every group not yet journaled, write, track; returns oracle.json."""
    from ...store import tracking

    tracking.check_reachable(tracking.resolve(request.tracking))
    groups = plan(request)
    about = oracle.describe()
    settings = request.settings({k: about.get(k) for k in ("kind", "model")})
    journal = open_journal(request.out, settings, OWNED, request.overwrite, "oracle check")
    oracle.connect()
    check_context(oracle, groups)  # a local oracle's longest request, before its first
    store, out = tracking.connect(request.tracking), Path(request.out)
    name = f"krtest oracle {Path(request.questions).parent.name}"
    with journal.run(store, ORACLE_RUN, name, "cctk krtest oracle") as run:
        if journal.header is None:
            out.mkdir(parents=True, exist_ok=True)
            journal.start({"settings": settings, "run_id": run.run_id})
            run.params(
                {
                    "questions": str(request.questions),
                    "corpus": str(request.corpus),
                    "seed": request.seed,
                    "segment": request.segment,
                    "oracle_url": about.get("url", ""),
                    "oracle_model": about.get("model") or "",
                    "cctk_version": __version__,
                }
            )
        try:
            for n, group in enumerate(groups):
                if n not in journal.entries:
                    journal.add(n, ask_group(oracle, group, n))
                    write_oracle(groups, journal, out, request, oracle.describe(), run.run_id)  # as it grows
                    echo(f"passage {n + 1}/{len(groups)}: {counted(len(group.questions), 'question')}")
        finally:
            summary = write_oracle(groups, journal, out, request, oracle.describe(), run.run_id)
            run.metrics({k: summary[k] for k in ("n", "correct", "accuracy", "lo", "hi", "unanswered", "requests")})
        journal.finish()
        summary = write_oracle(groups, journal, out, request, oracle.describe(), run.run_id, finished=True)
        for name in (*OWNED, JOURNAL):
            run.files(out / name)
    echo(
        f"oracle: {summary['correct']}/{summary['n']} = {100 * summary['accuracy']:.1f}% "
        f"[{100 * summary['lo']:.1f}-{100 * summary['hi']:.1f}], {summary['unanswered']} unanswered "
        f"(the paper's oracle: 99.56%): {out / ORACLE_JSON}"
    )
    echo(store.link(run.run_id))
    return summary


def check_context(oracle: Teacher, groups: list[Group]) -> None:
    """A local oracle's longest request (a passage and every question of it, as its chat template sends them)
    and a reply of ``--max-tokens`` within its stated context (its position embeddings) and the memory free
    (``LocalTeacher.most_prompt``), one line before its first request; an endpoint's server answers for its own."""
    if not isinstance(oracle, LocalTeacher) or not groups:
        return
    n, tokens = oracle.longest([oracle_messages(group) for group in groups])
    most, past, instead = oracle.most_prompt(tokens)
    if most >= tokens:
        return
    group = groups[n]
    asked = f"and {counted(len(group.questions), 'question')}" if group.questions else "alone, before its questions"
    where = " ".join(filter(None, (group.document, f"location {group.location}")))  # a document named where several
    raise CctkError(
        f"the oracle's request about the passage at {where} (the passage {asked}) is a prompt of {tokens} tokens, "
        f"and with a reply of up to {oracle.max_tokens} (--max-tokens) it is {past}: {instead}, or an endpoint"
    )


def ask_group(oracle: Teacher, group: Group, n: int) -> dict[str, Any]:
    """Ask ``oracle`` about ``group`` (request ``n``): the journal line of its request, reply and answers."""
    chat = oracle_messages(group)
    reply = ask(oracle, chat, n)
    answers = {} if reply.truncated else parse_answers(reply.text)
    return reply.line(group.document, group.location, chat, answers=answers)


def tally(groups: list[Group], entries: dict[int, dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every question's row (in file order: its line, answer, whether it is correct, whether its group was
    asked yet) and the figures of those asked: n, correct, accuracy with its exact 95% interval,
    unanswered, passages, requests, usage. ``entries``: the journal's lines by group index."""
    rows = []
    for n, group in enumerate(groups):
        answers = entries.get(n, {}).get("answers", {})  # int ids as asked, str ids as read back from JSON
        for q in group.questions:
            answer = answers.get(str(q.id), answers.get(q.id))
            rows.append(
                {
                    "line": q.item.line,
                    "document": q.document,
                    "location": group.location,
                    "id": q.id,
                    "true_option": q.true_option,
                    "answer": answer or "",
                    "correct": answer == q.true_option,
                    "raw": q.raw,
                    "answered": n in entries,
                }
            )
    rows.sort(key=lambda r: r["line"])
    done = [r for r in rows if r["answered"]]
    correct = sum(r["correct"] for r in done)
    lo, hi = clopper_pearson(correct, len(done)) if done else (float("nan"), float("nan"))
    figures = {
        "n": len(done),
        "correct": correct,
        "accuracy": correct / len(done) if done else float("nan"),
        "lo": lo,
        "hi": hi,
        "unanswered": sum(not r["answer"] for r in done),
        "passages": len(groups),
        "passages_answered": len(entries),
        "requests": sum(e["requests"] for e in entries.values()),
        "usage": {k: sum(e["usage"][k] for e in entries.values()) for k in ("prompt_tokens", "completion_tokens")},
    }
    return rows, figures


def write_oracle(
    groups: list[Group],
    journal: Journal,
    out: Path,
    request: OracleRequest,
    oracle: dict[str, Any],
    run_id: str,
    finished: bool = False,
) -> dict[str, Any]:
    """oracle.json, oracle.csv and questions.validated.jsonl from the journal (questions in file order)."""
    rows, figures = tally(groups, journal.entries)
    done = [r for r in rows if r["answered"]]
    summary = {
        **figures,
        "seed": request.seed,
        "questions": str(request.questions),
        "corpus": str(request.corpus),
        "segment": request.segment,
        "location": request.location,
        "oracle": oracle,
        "mlflow_run_id": run_id,
        "finished": finished,
        "cctk_version": __version__,
    }
    (out / ORACLE_JSON).write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")
    with open(out / ORACLE_CSV, "w", newline="", encoding="utf-8") as sink:
        writer = csv.DictWriter(
            sink, ["line", "document", "location", "id", "true_option", "answer", "correct"], extrasaction="ignore"
        )
        writer.writeheader()
        writer.writerows(done)
    (out / VALIDATED).write_text("".join(r["raw"] + "\n" for r in done if r["correct"]), encoding="utf-8")
    return summary
