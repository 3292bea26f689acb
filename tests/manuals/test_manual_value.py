"""A manual travels as a value: its name is resolved to its ``Manual`` once, where a name comes in (the command
line, the library's entries ``pipeline.run`` and ``make_config``, run_info.json's reader, a resume's and a sweep's
MLflow tags), and nowhere else; compare reads each run by its manual, never by the run's Python type. A manual is a
class implementing a small abstract base (a spec and ten methods) and optional capabilities, and pickles as
itself."""

import abc
import pickle
import re
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from cctk.manuals import registry
from cctk.manuals.manual import AnyManual, Comparable, Curves, Manual, Parts, Resumable
from cctk.manuals.v1.manual import V1, NotebookManual
from cctk.manuals.v2.manual import V2, StudyManual

PACKAGE = Path(__file__).resolve().parents[2] / "cctk"
EDGES = {
    ("cli/main.py", "run_command"),  # the command line's --protocol
    ("cli/main.py", "_grid"),  # cctk sweep's --protocol
    ("manuals/configure.py", "make_config"),  # the library's entry: a configuration by the manual's name
    ("pipeline/stages.py", "run"),  # the library's entry: a Config names its manual
    ("pipeline/stages.py", "resume"),  # a resume's MLflow tags
    ("pipeline/sweep.py", "parse_grid"),  # the library's entry of a sweep: the manual its cells run, by name
    ("pipeline/sweep.py", "from_params"),  # a resumed sweep's MLflow parameters
    ("pipeline/sweep.py", "_resumable"),  # a cell's MLflow tags
    ("store/session.py", "_decode"),  # run_info.json's "protocol"
}


def _lookups() -> list[tuple[str, str]]:
    """(file, enclosing function) of every ``registry.get(`` in the package but the resolver's own module."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "manuals" / "registry.py":
            continue
        function = ""
        for line in path.read_text().splitlines():
            defined = re.match(r"\s*def (\w+)", line)
            function = defined.group(1) if defined else function
            if "registry.get(" in line or re.search(r"\bBY_NAME\b", line):
                found.append((path.relative_to(PACKAGE).as_posix(), function))
    return found


def test_a_manual_is_looked_up_by_name_only_at_the_edges():
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


SCIENCE = {"models", "draw", "rows", "results", "tables", "headline", "readings", "figures", "design"}


def test_a_manual_is_a_spec_and_ten_methods_about_its_science():
    """Options, draws and results: three type parameters; its one attribute is its spec; nine abstract methods and
    ``describe`` (a default from its models); every other thing a manual does is a capability it opts into."""
    assert abc.ABC in Manual.__mro__ and len(Manual.__parameters__) == 3
    assert Manual.__annotations__ == {"spec": "ClassVar[ManualSpec]"}
    assert Manual.__abstractmethods__ == SCIENCE
    own = {n for n, v in vars(Manual).items() if callable(v) and not n.startswith("__")}
    assert own == SCIENCE | {"describe"}
    assert isinstance(V2, StudyManual) and isinstance(V1, NotebookManual)
    assert all(isinstance(V2, c) for c in (Resumable, Parts, Curves, Comparable))
    assert isinstance(V1, Comparable) and not any(isinstance(V1, c) for c in (Resumable, Parts, Curves))


def test_the_resolver_gives_each_value_and_the_legacy_one_for_none():
    assert registry.get("v1") is V1 and registry.get(None) is V2 and registry.default() is V2
    assert registry.names()[:2] == ("v2", "v1")  # cctk's own first; a manual registered elsewhere after them


def _manual_in_a_worker(manual: AnyManual) -> tuple[str, str, str]:
    return manual.spec.name, type(manual).__qualname__, manual.spec.model_name("base")


def test_a_manual_pickles_as_itself_into_another_process():
    """No ``__reduce__`` standing in for it: the instance itself travels (a Ray worker, a spawned process)."""
    assert "__reduce__" not in vars(Manual) and "__reduce__" not in vars(StudyManual)
    assert pickle.loads(pickle.dumps(V1)) == V1 and type(pickle.loads(pickle.dumps(V2))) is StudyManual
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        assert list(pool.map(_manual_in_a_worker, [V2, V1])) == [
            ("v2", "StudyManual", "base model"),
            ("v1", "NotebookManual", "base model"),
        ]


def _code_of(folder: Path) -> tuple[set[str], set[str]]:
    """(string constants but docstrings, names and attributes) of every module under ``folder``."""
    import ast

    strings, names = set(), set()
    for path in folder.rglob("*.py"):
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and ast.get_docstring(node) is not None
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                strings.add(node.value)
            elif isinstance(node, (ast.Name, ast.arg)):
                names.add(getattr(node, "id", None) or node.arg)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
    return strings, names


def test_the_core_holds_no_manual_and_no_default_one():
    """docs/design.md: nothing below the registry defaults to either manual, and the core knows nothing of their
    designs: no manual's name, parts, held-out share, design fields or profiles in cctk/core or cctk/figures."""
    for folder in (PACKAGE / "core", PACKAGE / "figures"):
        strings, names = _code_of(folder)
        assert not {"v1", "v2"} & strings, folder
        manual_words = {"PARTS", "HOLDOUT", "holdout", "heldout_additions", "DEFAULT_PROTOCOL", "PROTOCOLS", "PROFILES"}
        assert not manual_words & names, (folder, manual_words & names)
        assert not [n for n in names if "manuals" in n], folder


def test_no_module_outside_the_manuals_names_one():
    """``grep -rn "manuals\\.v[12]\\|PROTOCOLS" cctk --include=*.py`` outside cctk/manuals/: nothing."""
    found = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if PACKAGE / "manuals" not in path.parents
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if re.search(r"manuals\.v[12]|PROTOCOLS", line)
    ]
    assert found == []


def test_every_tables_caption_in_a_paper_and_report_html_is_in_the_words_of_its_headers():
    """Before: manual 1.0.0 had no paper captions, so report.html and `cctk export --latex` printed its data
    captions, which name the CSV's columns (pre_ft_true_prob) above headers that read P(true sum), before. And
    both manuals' runs tables left their peak RSS column out of the caption."""
    for manual in (V1, V2):  # the shipped ones (a test's toy manual may be installed beside them)
        for table in manual.spec.tables:
            assert table.paper_caption, (manual.spec.name, table.key)
            assert not re.search(r"\b[a-z]+_[a-z_]+\b", table.paper_caption), (manual.spec.name, table.key)
        runs = {t.key: t for t in manual.spec.tables}[{"v1": "table03", "v2": "table11"}[manual.spec.name]]
        assert "peak RSS" in runs.paper_caption and "peak_cpu_memory_bytes" not in runs.caption
        assert "resident memory in bytes" in runs.caption
    from cctk.manuals.v2.compare import CAPTIONS  # cctk compare's, printed over plain headers too

    assert not [name for name, text in CAPTIONS.items() if re.search(r"\b[a-z]+_[a-z_]+\b", text)]
