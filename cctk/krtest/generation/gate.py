"""The paper's oracle as the second gate of ``cctk krtest generate --oracle``.

Validation (``cctk.krtest.generation.validate``) judges an item by its words; the oracle
(``cctk.krtest.generation.oracle``, the paper's Golden Standard) judges it by its meaning: with the
passage in front of it, does a capable model pick the true side? An item it answers otherwise (or
leaves unanswered) is no item a model can be scored on, and leaves the kept items as ``oracle_disagrees``.

Once every passage has its teacher's reply, the items validation kept are grouped by passage and
asked about exactly as ``cctk krtest oracle --generation`` would ask about the same
``questions.jsonl`` with the same seed: one request per passage, in passage order, question ids
counted within it, the true side's position drawn per item in file order from the seed. The
oracle's replies go into the generation's journal as its stage ``"oracle"`` (unit = the group's
index), so a continued run asks neither the teacher nor the oracle anything twice. Until every group
is answered, items of groups not yet asked stay kept: ``kept + sum(rejected) == proposed`` holds at
every rewrite.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..measurement.items import Item, item_row
from .journal import ORACLE
from .oracle import Group, Question, ask_group, check_context, positions, tally
from .teacher import Teacher

if TYPE_CHECKING:
    from .from_corpus import Generation

STAGE = ORACLE  # the journal's stage of the oracle's lines
REASON = "oracle_disagrees"  # the verdict of an item the oracle did not answer with its true side


@dataclass(frozen=True)
class Gate:
    """The oracle and the seed of its A/B positions: what ``from_corpus.run`` is given for its second stage
    (as it is given its teacher; it imports nothing of this module, which sits above it)."""

    oracle: Teacher  # from oracle.make_oracle: an EndpointTeacher or LocalTeacher at temperature 0
    seed: int
    stage: str = STAGE

    def connect(self) -> None:
        self.oracle.connect()

    def describe(self) -> dict[str, Any]:
        return self.oracle.describe()

    def settings(self) -> dict[str, Any]:
        """The oracle as the user named it, as ``cctk krtest oracle`` journals it (a continuation must match)."""
        about = self.oracle.describe()
        return {k: about.get(k) for k in ("kind", "model")}

    def groups(self, done: Generation, passages: dict[tuple[str, int], str]) -> list[Group]:
        """The items ``done`` (a ``from_corpus.Generation``) kept, one group per passage in passage order;
        ``passages``: each passage's text by (document, location)."""
        members: dict[tuple[str, int], list[tuple[Item, str]]] = {}
        drawn = positions(len(done.items), self.seed)
        for item, document, option in zip(done.items, done.documents, drawn, strict=True):
            members.setdefault((document, item.location), []).append((item, option))
        return [
            Group(
                document,
                location,
                passages[document, location],
                tuple(Question(item, "", document, k + 1, option) for k, (item, option) in enumerate(found)),
            )
            for (document, location), found in members.items()
        ]

    def check(self, groups: list[Group]) -> None:
        """A local oracle's longest request within its context and memory, before its first (one line where not)."""
        check_context(self.oracle, groups)

    def check_passages(self, passages: dict[tuple[str, int], str]) -> None:
        """Before the teacher is asked: each passage (by document and location) alone as a local oracle's
        request, within its context and memory (its questions only add to it)."""
        check_context(
            self.oracle, [Group(document, location, text, ()) for (document, location), text in passages.items()]
        )

    def ask(self, group: Group, n: int) -> dict[str, Any]:
        """The journal line of group ``n``'s request and reply."""
        return ask_group(self.oracle, group, n)

    def apply(self, done: Generation, groups: list[Group], entries: dict[int, dict[str, Any]], several: bool) -> None:
        """The oracle's answers so far (``entries``: its journal lines by group) applied to ``done``: an item
        it did not answer with its true side leaves the kept items for ``done.dropped`` (rejected.jsonl) and
        its proposal's verdict becomes ``oracle_disagrees``; ``done.oracle`` gets the oracle's figures.
        ``several``: the corpus has several documents (each rejected line then names its own)."""
        rows, figures = tally(groups, entries)
        disagreed = {r["line"]: r for r in rows if r["answered"] and not r["correct"]}
        items: list[Item] = []
        documents: list[str] = []
        sources: list[int] = []
        for item, document, source in zip(done.items, done.documents, done.sources, strict=True):
            row = disagreed.get(item.line)
            if row is None:
                items.append(replace(item, line=len(items) + 1))
                documents.append(document)
                sources.append(source)
                continue
            done.proposals[source]["verdict"] = REASON
            done.dropped.append(
                {
                    "reason": REASON,
                    **item_row(item),
                    **({"document": document} if several else {}),
                    "true_option": row["true_option"],
                    "oracle_answer": row["answer"],
                }
            )
        done.kept_by_validation = len(done.items)
        done.items, done.documents, done.sources = items, documents, sources
        done.kept -= len(disagreed)
        done.rejected[REASON] = len(disagreed)
        done.oracle = figures
