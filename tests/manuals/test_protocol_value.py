"""The protocol travels as a value: its name is resolved to the ``Protocol`` once, where a name comes in
(the library's entry ``pipeline.run``, run_info.json's reader, a resume's MLflow tags), and nowhere else;
compare reads each run by its protocol value, never by the run's Python type."""

import re
import typing
from pathlib import Path

from cctk.manuals import registry as protocols
from cctk.manuals.v1.manual import V1
from cctk.manuals.v2.manual import V2

PACKAGE = Path(__file__).resolve().parents[2] / "cctk"
EDGES = {("pipeline/stages.py", "run"), ("pipeline/stages.py", "resume"), ("store/session.py", "_decode")}


def _lookups() -> list[tuple[str, str]]:
    """(file, enclosing function) of every ``protocols.get(`` in the package but the resolver's own module."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "protocols.py":
            continue
        function = ""
        for line in path.read_text().splitlines():
            defined = re.match(r"def (\w+)", line)
            function = defined.group(1) if defined else function
            if "protocols.get(" in line or re.search(r"\bBY_NAME\b", line):
                found.append((path.relative_to(PACKAGE).as_posix(), function))
    return found


def test_a_protocol_is_looked_up_by_name_only_at_the_edges():
    lookups = _lookups()
    assert sorted(lookups) == sorted(EDGES), lookups
    assert len([x for x in lookups if x not in EDGES]) == 0


def test_no_dispatch_on_run_kinds():
    text = "\n".join(p.read_text() for p in PACKAGE.rglob("*.py"))
    assert (
        re.findall(
            r"isinstance\([^)]*,\s*\(?\s*(?:V1Run|PooledRun|experiments\.StudyResults|v1_experiment\.ComparisonResults)\b",
            text,
        )
        == []
    )
    assert "RUN_TYPES" not in text and "V1Run" not in text


def test_protocol_is_generic_and_no_field_is_typed_object():
    assert typing.Generic in protocols.Protocol.__mro__ and len(protocols.Protocol.__parameters__) == 3
    annotations = protocols.Protocol.__annotations__
    assert not [name for name, kind in annotations.items() if re.search(r"\bobject\b", str(kind))]


def test_the_resolver_gives_each_value_and_the_default_for_none():
    assert protocols.get("v1") is V1 and protocols.get(None) is V2
    assert set(V2.compare_tables).isdisjoint(V1.compare_tables)
