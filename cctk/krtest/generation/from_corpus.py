"""``cctk krtest generate --corpus PATH --teacher ...``: KR-Test items from the user's own corpus.

The paper's pipeline (figure 1): the corpus is read as documents and cut into passages
(``cctk.krtest.generation.corpora``), the teacher is asked for ``per_passage`` contrastive items per passage
(``cctk.krtest.generation.teacher``), and every proposed item is checked (``cctk.krtest.generation.validate``); the
items kept are ``questions.jsonl``.

Nothing paid for is lost: each passage's exchange (request, reply, usage, verdicts) goes into the
journal (``cctk.krtest.generation.journal``) as it arrives, and the other files are rewritten from the journal
after every reply. The same command with the same ``--out`` continues an unfinished generation:
passages answered are not asked again, and since request n carries seed ``seed + n`` and items are
judged in passage order, the result equals an uninterrupted run's with a deterministic teacher.

Counting, so that ``kept + sum(rejected) == proposed`` always holds: each request *proposes*
``per_passage`` items. A reply with fewer readable items (or none: not JSON) leaves the missing ones
rejected as ``no_item``; an entry that is not an object with three strings is ``malformed``;
entries beyond ``per_passage`` are counted as ``surplus`` and not checked; a reply still cut by the
token limit after its retry with twice the limit counts all its items as ``truncated``.

With an oracle (``--oracle``), the items validation kept are then put to the paper's oracle
(``cctk.krtest.generation.gate``, journaled as the second stage): ``questions.jsonl`` becomes the items it answered
with their true side, the others are rejected as ``oracle_disagrees`` and listed in ``rejected.jsonl``.

The folder it writes::

    journal.jsonl      the exchanges, in the order they arrived (the source of truth)
    questions.jsonl    the items kept, in passage order, the paper's fields (+ "document" when the
                       corpus has more than one)
    generation.json    passages, answered, proposed, kept, rejected by reason, surplus, usage, requests,
                       teacher, prompt version, seed, corpus and its documents, segmentation, bounds,
                       location unit, scoring tokenizer, thresholds, MLflow run, finished
    proposals.jsonl    every proposed item with its passage's location and its verdict ("kept" or a reason)
    replies.jsonl      every raw reply of the teacher, with its passage's location
    rejected.jsonl     with --oracle only: the items validation kept and the oracle did not confirm, each
                       with its reason, the true side's option and the oracle's answer ("" unanswered);
                       generation.json then adds kept_by_validation, kept_by_oracle, oracle (the oracle
                       as the server accepted it) and oracle_check (n, correct, accuracy, exact lo/hi,
                       unanswered, passages, requests, the oracle's usage)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ... import __version__
from ...core.errors import CctkError
from ...core.labels import counted
from ..measurement.items import TEXT_FIELDS, Item, dataset_name, questions_text
from ..measurement.passages import Passage, check_segment
from ..measurement.scoring import encode_continuation
from .corpora import Document, Located, cut, read_documents, split_long, token_counter
from .journal import JOURNAL, ORACLE, Journal, open_journal
from .teacher import PROMPT_VERSION, LocalTeacher, Reply, Teacher, ask, check_together, messages, parse_reply
from .validate import MAX_SPANS, REASONS, SUPPORT, Checker, key

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from ...store.tracking import LiveRun

QUESTIONS, GENERATION, PROPOSALS, REPLIES = "questions.jsonl", "generation.json", "proposals.jsonl", "replies.jsonl"
REJECTED = "rejected.jsonl"  # with --oracle: the items the oracle did not confirm
OWNED = (QUESTIONS, GENERATION, PROPOSALS, REPLIES, REJECTED)
GENERATE_RUN = "krtest-generate"  # tag cctk.kind of a generation's MLflow run


@dataclass(frozen=True)
class GenerationOptions:
    segment: str = "blank-lines"
    per_passage: int = 3
    location: str = "char"
    max_passages: int | None = None  # the first N passages only (a quick look at a big corpus)
    min_tokens: int = 0  # a shorter passage is merged into the next one of its document
    max_passage_tokens: int | None = None  # a longer passage is split at sentence ends
    concurrency: int = 1  # requests in flight at once
    text_field: str = "text"  # the text of a .jsonl corpus's records

    def check(self) -> None:
        check_segment(self.segment, self.location)
        if self.per_passage < 1:
            raise CctkError(f"--per-passage must be >= 1, got {self.per_passage}")
        if self.max_passages is not None and self.max_passages < 1:
            raise CctkError(f"--max-passages must be >= 1, got {self.max_passages}")
        if self.min_tokens < 0:
            raise CctkError(f"--min-tokens must be >= 0, got {self.min_tokens}")
        if self.max_passage_tokens is not None and self.max_passage_tokens < 8:
            raise CctkError(f"--max-tokens-per-passage must be >= 8, got {self.max_passage_tokens}")
        if self.concurrency < 1:
            raise CctkError(f"--concurrency must be >= 1, got {self.concurrency}")


@dataclass(frozen=True)
class Verdict:
    """One proposed item judged against its own passage (``duplicate`` is decided across passages)."""

    verdict: str
    record: dict[str, Any]
    key: tuple[str, ...] | None = None


@dataclass
class Generation:
    """What one generation did: the counts of generation.json, and the items and records behind them."""

    passages: int = 0
    answered: int = 0
    proposed: int = 0
    kept: int = 0
    rejected: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))
    surplus: int = 0
    usage: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})
    requests: int = 0
    items: list[Item] = field(default_factory=list)
    documents: list[str] = field(default_factory=list)  # the document of each item
    sources: list[int] = field(default_factory=list)  # the index in ``proposals`` of each item
    proposals: list[dict[str, Any]] = field(default_factory=list)
    replies: list[dict[str, Any]] = field(default_factory=list)
    # with an oracle (Gate.apply): its figures so far, the items validation kept, those it did not confirm
    oracle: dict[str, Any] | None = None
    kept_by_validation: int | None = None
    dropped: list[dict[str, Any]] = field(default_factory=list)

    def judge(self, verdict: str, location: int, record: dict[str, Any]) -> None:
        self.proposed += 1
        self.proposals.append({"location": location, "verdict": verdict, **record})
        if verdict == "kept":
            self.kept += 1
        else:
            self.rejected[verdict] += 1


G = TypeVar("G")  # the groups a gate asks its oracle about (``oracle.Group``)


class OracleGate(Protocol[G]):
    """What a generation asks of its second gate, ``gate.Gate`` (given, as the teacher is: this module imports
    neither the gate nor the oracle, which import it, so the gate's groups are a type parameter)."""

    @property
    def stage(self) -> str: ...

    @property
    def oracle(self) -> Teacher: ...

    def connect(self) -> None: ...

    def describe(self) -> dict[str, Any]: ...

    def settings(self) -> dict[str, Any]: ...

    def groups(self, done: Generation, passages: dict[tuple[str, int], str]) -> list[G]: ...

    def check(self, groups: list[G]) -> None: ...

    def check_passages(self, passages: dict[tuple[str, int], str]) -> None: ...

    def ask(self, group: G, n: int) -> dict[str, Any]: ...

    def apply(self, done: Generation, groups: list[G], entries: dict[int, dict[str, Any]], several: bool) -> None: ...


def exchange(located: Located, document: str, n: int, teacher: Teacher, options: GenerationOptions) -> dict[str, Any]:
    """Ask about passage ``n``: the journal line of its request and reply."""
    passage = located.passage
    chat = messages(passage.text, options.per_passage)
    started = time.perf_counter()
    reply = ask(teacher, chat, n)
    line = reply.line(document, passage.location(options.location), chat, truncated=reply.truncated)
    return {**line, "seconds": round(time.perf_counter() - started, 3)}


def judge_reply(reply: Reply, checker: Checker, location: int, k: int) -> tuple[list[Verdict], int]:
    """The reply's first ``k`` entries judged, the missing ones ``no_item``; and the surplus count."""
    if reply.truncated:  # cut twice: what it holds is not what the teacher meant to say
        return [Verdict("truncated", {})] * k, 0
    entries = parse_reply(reply.text) or []
    verdicts = []
    for entry in entries[:k]:
        if not (isinstance(entry, dict) and all(isinstance(entry.get(f), str) for f in TEXT_FIELDS)):
            verdicts.append(Verdict("malformed", {"entry": entry}))
            continue
        texts = [entry[f].strip() for f in TEXT_FIELDS]
        context, true, false = texts
        verdicts.append(
            Verdict(
                checker.reason(context, true, false, location) or "kept",
                dict(zip(TEXT_FIELDS, texts, strict=True)),
                key(context, true, false),
            )
        )
    return verdicts + [Verdict("no_item", {})] * (k - len(verdicts)), max(0, len(entries) - k)


def checker_for(passage: Passage, unit: str, tokenizer: PreTrainedTokenizerBase) -> Checker:
    """The rules for the items of ``passage``, sides encoded as ``tokenizer``'s scoring sees them."""

    def sides(context: str, true: str, false: str) -> tuple[list[int], list[int]]:
        return encode_continuation(tokenizer, context, true), encode_continuation(tokenizer, context, false)

    def holds(location: int) -> bool:
        return location == passage.location(unit)

    return Checker(passage.text, sides, holds)


@dataclass
class Judged:
    """The verdicts of every answered passage, kept so that a rewrite judges each reply once."""

    found: list[Located]
    names: list[str]
    options: GenerationOptions
    tokenizer: PreTrainedTokenizerBase
    cache: dict[int, tuple[list[Verdict], int]] = field(default_factory=dict)

    def verdicts(self, n: int, line: dict[str, Any]) -> tuple[list[Verdict], int]:
        if n not in self.cache:
            passage = self.found[n].passage
            reply = Reply(line["reply"], line["finish_reason"], truncated=line["truncated"])
            checker = checker_for(passage, self.options.location, self.tokenizer)
            self.cache[n] = judge_reply(reply, checker, line["location"], self.options.per_passage)
        return self.cache[n]

    def texts(self) -> dict[tuple[str, int], str]:
        """Each passage's text by (document name, location): where an oracle reads an item's passage."""
        return {(self.names[f.document], f.passage.location(self.options.location)): f.passage.text for f in self.found}

    def assemble(self, entries: dict[int, dict[str, Any]]) -> Generation:
        """The generation so far, passage by passage in corpus order (whatever order the replies came in)."""
        done, seen = Generation(passages=len(self.found)), set()
        for n in sorted(entries):
            line = entries[n]
            verdicts, surplus = self.verdicts(n, line)
            _count(done, line, surplus, self.names)
            for v in verdicts:
                verdict = "duplicate" if v.verdict == "kept" and v.key in seen else v.verdict
                done.judge(verdict, line["location"], {**v.record, **_document(line, self.names)})
                if verdict == "kept":
                    seen.add(v.key)
                    context, true, false = (v.record[f] for f in TEXT_FIELDS)
                    done.items.append(Item(len(done.items) + 1, context, true, false, line["location"]))
                    done.documents.append(line["document"])
                    done.sources.append(len(done.proposals) - 1)
        return done


def _count(done: Generation, line: dict[str, Any], surplus: int, names: list[str]) -> None:
    done.answered += 1
    done.surplus += surplus
    done.requests += line["requests"]
    for name in done.usage:
        done.usage[name] += line["usage"][name]
    done.replies.append({"location": line["location"], "reply": line["reply"], **_document(line, names)})


def _document(line: dict[str, Any], names: list[str]) -> dict[str, str]:
    return {"document": line["document"]} if len(names) > 1 else {}


def generate(
    corpus: str,
    teacher: Teacher,
    tokenizer: PreTrainedTokenizerBase,
    options: GenerationOptions,
    echo: Callable[[str], None] = print,
) -> Generation:
    """Ask the teacher about every passage of one text and judge the items, in memory (no journal)."""
    options.check()
    found = passages_of([Document("corpus", corpus)], tokenizer, options)
    judged, entries = Judged(found, ["corpus"], options, tokenizer), {}
    for n, located in enumerate(found):
        entries[n] = exchange(located, "corpus", n, teacher, options)
        echo(f"passage {n + 1}/{len(found)} (location {entries[n]['location']})")
    return judged.assemble(entries)


def passages_of(
    documents: list[Document], tokenizer: PreTrainedTokenizerBase, options: GenerationOptions
) -> list[Located]:
    """The passages to ask about (the first ``max_passages``); a one-line error where there is none."""
    found = cut(documents, options.segment, tokenizer, options.min_tokens, options.max_passage_tokens)
    if not found:
        raise CctkError("the corpus has no passage (only blank lines?)")
    return found[: options.max_passages]


def write_generation(done: Generation, folder: Path, about: dict[str, Any]) -> dict[str, Path]:
    """The four files in ``folder`` (created), and rejected.jsonl where an oracle judged; ``about`` (teacher,
    seed, options, ...) goes into generation.json."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {name: folder / name for name in OWNED if name != REJECTED or done.oracle is not None}
    several = len(about.get("documents", ())) > 1  # a document's name only where there is a choice
    _write(paths[QUESTIONS], questions_text(done.items, done.documents if several else None))
    record = {
        **_counts(done),
        "prompt_version": PROMPT_VERSION,
        **about,
        "thresholds": {"support": SUPPORT, "max_changed_spans": MAX_SPANS},
        "cctk_version": __version__,
    }
    if done.oracle is not None:
        record["oracle_check"] = done.oracle
    _write(paths[GENERATION], json.dumps(record, indent=2, ensure_ascii=False, default=str) + "\n")
    written = [(PROPOSALS, done.proposals), (REPLIES, done.replies)]
    for name, rows in written + ([(REJECTED, done.dropped)] if done.oracle is not None else []):
        _write(paths[name], "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows))
    return paths


def _counts(done: Generation) -> dict[str, Any]:
    """The counts of generation.json; with an oracle, what each gate kept beside the final ``kept``."""
    names = ("passages", "answered", "proposed", "kept", "rejected", "surplus", "usage", "requests")
    counts = {k: getattr(done, k) for k in names}
    if done.oracle is None:
        return counts
    gates = {"kept_by_validation": done.kept_by_validation, "kept_by_oracle": done.oracle["correct"]}
    return {**{k: counts[k] for k in names[:4]}, **gates, **{k: counts[k] for k in names[4:]}}


def _write(path: Path, text: str) -> None:
    """Write through a temporary file and a rename: a kill leaves the old file or the new, never half."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)


@dataclass(frozen=True)
class Request:
    """What ``cctk krtest generate --corpus`` was asked (everything but the teacher and the oracle)."""

    corpus: Path
    tokenizer_name: str
    options: GenerationOptions
    out: Path
    seed: int = 0
    overwrite: bool = False
    dry_run: bool = False
    tracking: str | None = None

    def settings(self, teacher: dict[str, Any], oracle: dict[str, Any] | None = None) -> dict[str, Any]:
        """What makes a generation what it is: a continuation must be asked with the same (the oracle too,
        where there is one: without one, the settings are what they were before there could be one)."""
        return {
            "corpus": str(Path(self.corpus).resolve()),
            "tokenizer": self.tokenizer_name,
            "seed": self.seed,
            "prompt_version": PROMPT_VERSION,
            "teacher": teacher,
            **{k: v for k, v in asdict(self.options).items() if k != "concurrency"},
            **({ORACLE: oracle} if oracle is not None else {}),
        }


def teacher_settings(teacher: Teacher) -> dict[str, Any]:
    """The teacher as the user named it (before /models resolves a model). Not its URL: a server restarted
    on another port, or the same model behind another gateway, may continue a generation."""
    about = teacher.describe()
    return {k: about.get(k) for k in ("kind", "model", "temperature", "max_tokens")}


def run(
    request: Request,
    teacher: Teacher,
    echo: Callable[[str], None] = print,
    gate: OracleGate[G] | None = None,
) -> Generation | None:
    """Check, plan, connect, ask every unanswered passage (journaled), then the oracle about the items kept
    when there is a gate, write, track: the command. ``teacher`` from ``teacher.make_teacher``, ``gate`` a
    ``gate.Gate`` (or None: validation alone)."""
    from ...core.lm.models import check_available

    options = request.options
    options.check()
    check_together(teacher, gate.oracle if gate else None)  # a local teacher and a local oracle, both loaded
    documents = read_documents(request.corpus, options.text_field)
    check_available(request.tokenizer_name)
    settings = request.settings(teacher_settings(teacher), gate.settings() if gate else None)
    journal = None  # none for a dry run
    if not request.dry_run:
        from ...store import tracking

        tracking.check_reachable(tracking.resolve(request.tracking))  # an unreachable store fails before any work
        # the oracle may change until it has answered (after a local one's refusal, the teacher's replies kept)
        journal = open_journal(request.out, settings, OWNED, request.overwrite, "generation", {ORACLE: ORACLE})
        teacher.connect()  # an endpoint that does not answer fails here, before the tokenizer is loaded
        if gate is not None:
            gate.connect()  # and an oracle that does not, before the teacher is paid for anything
    tokenizer = load_tokenizer(request.tokenizer_name)
    found = passages_of(documents, tokenizer, options)
    if journal is None:
        dry_run(found, documents, tokenizer, options, echo)
        return None
    if isinstance(teacher, LocalTeacher):
        check_context(teacher, found, documents, tokenizer, options)
    if gate is not None:  # a local oracle's requests hold the passages at least, checked before the teacher's
        gate.check_passages(
            {(documents[f.document].name, f.passage.location(options.location)): f.passage.text for f in found}
        )
    return _generate(request, teacher, gate, journal, settings, documents, found, tokenizer, echo)


def check_context(
    teacher: LocalTeacher,
    found: list[Located],
    documents: list[Document],
    tokenizer: PreTrainedTokenizerBase,
    options: GenerationOptions,
) -> None:
    """A local teacher's longest prompt and a reply of ``--max-tokens`` within its context (its position
    embeddings) and the memory free (``LocalTeacher.most_prompt``), one line before the first request: past its
    context a model with learned positions fails and a rotary one writes where it never read (an endpoint's
    server answers for its own). ``tokenizer``: the one ``--max-tokens-per-passage`` counts in."""
    n, tokens = teacher.longest([messages(located.passage.text, options.per_passage) for located in found])
    most, past, instead = teacher.most_prompt(tokens)
    if most >= tokens:
        return
    located = found[n]
    instructions = teacher.prompt_tokens(messages("", options.per_passage))
    room = most - instructions
    if room < 8:  # --max-tokens-per-passage takes 8 at least
        raise CctkError(
            f"the teacher's instructions ({instructions} tokens) and a reply of up to {teacher.max_tokens} "
            f"(--max-tokens) are {past}: a smaller --max-tokens, or {instead}"
        )
    count = token_counter(tokenizer)
    counted = count(located.passage.text)
    fits = max(8, counted * room // (tokens - instructions))  # the two tokenizers' ratio on this passage
    where = f"{documents[located.document].name} location {located.passage.location(options.location)}"
    pieces = split_long(documents[located.document].text, located.passage, count, fits)
    longest = max(count(piece.text) for piece in pieces)
    split = (
        f"--max-tokens-per-passage {fits} splits passages at sentence ends (this one is {counted} tokens as the "
        "tokenizer counts)"
        if longest <= fits
        else f"--segment tokens:{fits} cuts passages into windows of tokens (this one holds a sentence of {longest} "
        "tokens as the tokenizer counts, which --max-tokens-per-passage leaves whole)"
    )
    raise CctkError(
        f"the passage at {where} makes a prompt of {tokens} tokens ({instructions} of them the instructions), and "
        f"with a reply of up to {teacher.max_tokens} (--max-tokens) it is {past}: {split}, or {instead}"
    )


def dry_run(
    found: list[Located],
    documents: list[Document],
    tokenizer: PreTrainedTokenizerBase,
    options: GenerationOptions,
    echo: Callable[[str], None],
) -> None:
    """Print the passages and the requests, and an estimate of the prompt tokens; send nothing."""
    total = 0
    for n, located in enumerate(found):
        chat = messages(located.passage.text, options.per_passage)
        tokens = sum(len(tokenizer(m["content"], add_special_tokens=False)["input_ids"]) + 4 for m in chat)
        total += tokens
        text = " ".join(located.passage.text.split())
        echo(
            f"passage {n + 1}: {documents[located.document].name} location "
            f"{located.passage.location(options.location)}, ~{tokens} prompt tokens: {text[:70]}"
        )
    echo(
        f"dry run: {counted(len(found), 'passage')} in {counted(len(documents), 'document')}, "
        f"{counted(len(found), 'request')}, {counted(len(found) * options.per_passage, 'item')} asked, "
        f"about {total} prompt tokens "
        "(counted with the scoring tokenizer; the teacher's may differ); nothing sent"
    )


def _generate(
    request: Request,
    teacher: Teacher,
    gate: OracleGate[G] | None,
    journal: Journal,
    settings: dict[str, Any],
    documents: list[Document],
    found: list[Located],
    tokenizer: PreTrainedTokenizerBase,
    echo: Callable[[str], None],
) -> Generation:
    """Ask every passage not yet in the journal, then the oracle (if any) about every group of kept items not
    yet in it, rewriting the files after each reply, in one MLflow run (a continuation reopens the run of the
    generation it continues); its figures, its files and its run said last."""
    from ...store import tracking

    store, out = tracking.connect(request.tracking), Path(request.out)
    names = [d.name for d in documents]
    judged = Judged(found, names, request.options, tokenizer)
    name = f"krtest generate {Path(request.corpus).name}"
    with journal.run(store, GENERATE_RUN, name, "cctk krtest generate") as run:
        if journal.header is None:
            out.mkdir(parents=True, exist_ok=True)
            journal.start({"settings": settings, "run_id": run.run_id})
            _log_start(run, request, teacher, gate, documents, found)
        elif gate is not None:  # a continuation: its oracle's params (under ``.resolved`` where it changed)
            _log_oracle(run, gate)
        about = _about(request, teacher, documents, found, run.run_id)
        rewrite = _rewriter(judged, gate, journal, out, about, teacher)
        try:
            _ask_stages(found, names, judged, gate, journal, teacher, request.options, rewrite)
        finally:
            done = rewrite()
            run.metrics(_metrics(done))
        journal.finish()
        done = rewrite(finished=True)
        for name in (QUESTIONS, GENERATION, PROPOSALS, REPLIES, *([REJECTED] if gate else []), JOURNAL):
            run.files(out / name)
    echo(f"{summary_line(done)}: {out / QUESTIONS}, {out / GENERATION}")
    if not done.kept:
        echo(f"WARNING: no item kept; every proposal and its reason is in {out / PROPOSALS}")
    echo(store.link(run.run_id))
    return done


class Rewrite(Protocol):
    """``_rewriter``'s function: the generation so far, its files written (``finished``: the last time)."""

    def __call__(self, finished: bool = False) -> Generation: ...


def _rewriter(
    judged: Judged, gate: OracleGate[G] | None, journal: Journal, out: Path, about: dict[str, Any], teacher: Teacher
) -> Rewrite:
    """``rewrite(finished=False)``: the generation so far assembled from the journal (the oracle's verdicts
    applied once every passage is answered) and its files written."""

    def rewrite(finished: bool = False) -> Generation:
        done = judged.assemble(journal.entries)
        if gate is not None and done.answered == done.passages:  # the items to ask the oracle about are known
            groups = gate.groups(done, judged.texts())
            gate.apply(done, groups, journal.units(gate.stage), len(judged.names) > 1)
        seconds = sum(line["seconds"] for line in journal.entries.values())
        asked = {"teacher": teacher.describe(), **({"oracle": gate.describe()} if gate else {})}  # as accepted so far
        write_generation(done, out, {**about, **asked, "finished": finished, "seconds": round(seconds, 1)})
        return done

    return rewrite


def _ask_stages(
    found: list[Located],
    names: list[str],
    judged: Judged,
    gate: OracleGate[G] | None,
    journal: Journal,
    teacher: Teacher,
    options: GenerationOptions,
    rewrite: Callable[[], Generation],
) -> None:
    """The teacher about every passage, then the oracle (if any) about the items kept, passage by passage."""

    def one(n: int) -> dict[str, Any]:
        return exchange(found[n], names[found[n].document], n, teacher, options)

    progress = _progress(len(found), len(journal.entries), "passages", rewrite)
    _ask_all(len(found), journal, one, options.concurrency, progress)
    if gate is None:
        return
    groups = gate.groups(judged.assemble(journal.entries), judged.texts())
    try:  # a local oracle's longest request within its context and memory, before its first
        gate.check(groups)
    except CctkError as refused:
        if journal.units(gate.stage):  # an oracle that answered already cannot change
            raise
        raise CctkError(
            f"{refused}; the teacher's replies are kept in {journal.path.parent}: the same command with another "
            "--oracle continues"
        ) from None
    progress = _progress(len(groups), len(journal.units(gate.stage)), "oracle", rewrite)
    _ask_all(len(groups), journal, lambda n: gate.ask(groups[n], n), options.concurrency, progress, gate.stage)


def _progress(total: int, initial: int, desc: str, rewrite: Callable[[], Generation]) -> Callable[[], None]:
    """After each reply: the files rewritten, and the bar moved on (kept and rejected so far, an ETA)."""
    from tqdm.auto import tqdm

    bar = tqdm(total=total, initial=initial, unit="passage", desc=desc, disable=None)

    def answered() -> None:
        done = rewrite()
        bar.update(1)
        bar.set_postfix(kept=done.kept, rejected=done.proposed - done.kept, refresh=False)
        if bar.n >= total:
            bar.close()

    return answered


def _ask_all(
    total: int,
    journal: Journal,
    one: Callable[[int], dict[str, Any]],
    concurrency: int,
    answered: Callable[[], None],
    stage: str | None = None,
) -> None:
    """Every unit of ``stage`` (0 to total - 1) not in the journal asked (``one(n)``: its journal line),
    ``concurrency`` at a time, each reply journaled as it arrives (in whatever order); on a failure the
    requests in flight still finish and are kept."""
    asked = journal.units(stage)
    pending = [n for n in range(total) if n not in asked]
    if concurrency == 1:  # no thread: Ctrl-C stops at once
        for n in pending:
            journal.add(n, one(n), stage)
            answered()
        return
    with ThreadPoolExecutor(concurrency) as pool:
        futures = {pool.submit(one, n): n for n in pending}
        try:
            for future in as_completed(futures):
                journal.add(futures[future], future.result(), stage)
                answered()
        except BaseException:
            for future in futures:
                future.cancel()
            for future in wait(futures).done:  # paid for: keep what the requests in flight bring
                if not future.cancelled() and future.exception() is None and futures[future] not in asked:
                    journal.add(futures[future], future.result(), stage)
            raise


def _about(
    request: Request, teacher: Teacher, documents: list[Document], found: list[Located], run_id: str
) -> dict[str, Any]:
    options = request.options
    per_document = [sum(1 for f in found if f.document == k) for k in range(len(documents))]
    return {
        "teacher": teacher.describe(),
        "seed": request.seed,
        "corpus": str(request.corpus),
        "documents": [
            {"name": d.name, "chars": len(d.text), "passages": p} for d, p in zip(documents, per_document, strict=True)
        ],
        "segment": options.segment,
        "min_tokens": options.min_tokens,
        "max_tokens_per_passage": options.max_passage_tokens,
        "location": options.location,
        "per_passage": options.per_passage,
        "max_passages": options.max_passages,
        "text_field": options.text_field,
        "concurrency": options.concurrency,
        "tokenizer": request.tokenizer_name,
        "mlflow_run_id": run_id,
    }


def _log_start(
    run: LiveRun,
    request: Request,
    teacher: Teacher,
    gate: OracleGate[G] | None,
    documents: list[Document],
    found: list[Located],
) -> None:
    """The params of the generation (the oracle's where there is one), and the corpus (as its passages) as a
    dataset input."""
    import pandas as pd

    about = teacher.describe()
    options = request.options
    if gate is not None:
        _log_oracle(run, gate)
    run.params(
        {
            "teacher_kind": about["kind"],
            "teacher_url": about.get("url", ""),
            "teacher_model": about.get("model") or "",
            "prompt_version": PROMPT_VERSION,
            "corpus": str(request.corpus),
            "documents": len(documents),
            "segment": options.segment,
            "min_tokens": options.min_tokens,
            "max_tokens_per_passage": options.max_passage_tokens or "",  # none: every passage whole
            "per_passage": options.per_passage,
            "location": options.location,
            "seed": request.seed,
            "tokenizer": request.tokenizer_name,
            "temperature": about.get("temperature"),
            "max_tokens": about.get("max_tokens"),
            "cctk_version": __version__,
        }
    )
    rows = [(documents[f.document].name, f.passage.location(options.location), f.passage.text) for f in found]
    table = pd.DataFrame(rows, columns=["document", "location", "passage"])
    run.dataset(table, dataset_name("corpus", request.corpus), str(request.corpus), context="training")


def _log_oracle(run: LiveRun, gate: OracleGate[G]) -> None:
    """The oracle's params: at the start, and again on a continuation (unchanged, nothing logged; another oracle
    that took over before the first answered, under ``.resolved``: MLflow never changes a logged param)."""
    judge = gate.describe()
    run.params(
        {"oracle_kind": judge["kind"], "oracle_url": judge.get("url", ""), "oracle_model": judge.get("model") or ""}
    )


def _metrics(done: Generation) -> dict[str, float]:
    found: dict[str, float] = {
        **{k: getattr(done, k) for k in ("passages", "answered", "proposed", "kept", "surplus", "requests")},
        **done.usage,
        **{f"rejected_{reason}": count for reason, count in done.rejected.items()},
    }
    if done.oracle is None:
        return found
    check = done.oracle
    assert done.kept_by_validation is not None  # Gate.apply sets it with the oracle's figures
    found.update(
        kept_by_validation=done.kept_by_validation,
        kept_by_oracle=check["correct"],
        oracle_n=check["n"],
        oracle_unanswered=check["unanswered"],
        oracle_requests=check["requests"],
        **{f"oracle_{k}": v for k, v in check["usage"].items()},
    )
    if check["n"]:  # no accuracy (NaN) before the oracle's first reply
        found.update({f"oracle_{k}": check[k] for k in ("accuracy", "lo", "hi")})
    return found


def load_tokenizer(name: str) -> PreTrainedTokenizerBase:
    """The tokenizer of a roster key, folder or Hub id (``cctk.core.lm.models.load_tokenizer``: no weights read;
    a Hub model's were loaded whole for it before)."""
    from ...core.lm import models

    return models.load_tokenizer(models.check_available(name))


def summary_line(done: Generation) -> str:
    reasons = ", ".join(f"{k} {v}" for k, v in done.rejected.items() if v)
    return (
        f"{counted(done.passages, 'passage')}, {counted(done.requests, 'request')}, "
        f"{done.usage['prompt_tokens']} prompt and {done.usage['completion_tokens']} completion tokens, "
        f"{counted(done.proposed, 'item')} proposed, {done.kept} kept, "
        f"{done.proposed - done.kept} rejected"
        + (f" ({reasons})" if reasons else "")
        + (f"; {done.surplus} surplus items ignored" if done.surplus else "")
        + _oracle_line(done)
    )


def _oracle_line(done: Generation) -> str:
    """The second gate's figures: what it was shown, what it confirmed, its accuracy with the exact interval."""
    check = done.oracle
    if check is None or not check["n"]:
        return ""
    return (
        f"; the oracle confirmed {check['correct']} of the {done.kept_by_validation} items validation kept "
        f"({100 * check['accuracy']:.1f}%, exact 95% interval {100 * check['lo']:.1f}-{100 * check['hi']:.1f}%"
        f", {check['unanswered']} unanswered; {counted(check['requests'], 'request')}, "
        f"{check['usage']['prompt_tokens']} prompt and {check['usage']['completion_tokens']} completion tokens)"
    )
