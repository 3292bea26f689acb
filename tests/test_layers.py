"""One direction of dependencies, for files and for folders: every module sits on a floor, and imports
only from its own floor or the floors below it (the command lines -> the pipeline -> KR-Test -> compare ->
results -> outputs -> the store -> the manuals -> the kernels); no import cycle between files, nor between
the folders of any folder (the sub-folders and modules of ``cctk``, of ``cctk/krtest``, of
``cctk/manuals``, ...: each one unit); the torch-free layers stay torch- and MLflow-free; only tracking.py
imports mlflow; nothing imports the pipeline but the CLI: the library's entry points (``pipeline.run``,
``pipeline.resume``, ``pipeline.sweep_cell``) live in the pipeline, the CLI parses options and calls them,
and a sweep runs its cells through the function its caller hands it; a manual (``cctk/manuals/vN/``) is
imported by the registry and its own folder only, and the kernels default to no manual."""

import ast
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "cctk"
LIGHT = [
    "cctk.results",
    "cctk.outputs",
    "cctk.manuals.v2.parts",
    "cctk.figures",
    "cctk.core.stats",
    "cctk.store.session",
    "cctk.manuals.v1.facts",
    "cctk.manuals.v1.experiment",
    "cctk.manuals.v1.catalog",
    "cctk.manuals.v2.catalog",
    "cctk.figures.spec",
    "cctk.manuals.v1.manual",
    "cctk.manuals.v2.manual",
    "cctk.manuals.v1.labels",
    "cctk.manuals.v2.labels",
    "cctk.manuals.registry",
    "cctk.cli",
]

# The floors, top to bottom, read from the folders: a module's floor is that of the longest name here it
# is or lies under (``cctk`` itself, the package's ``__init__``, only by that exact name); a new folder or
# top-level module must be given one. The middle floors are ordered as the code is, each a folder that
# uses those below it: KR-Test compares its runs with compare/'s helpers (its run splitting, t intervals)
# and writes with outputs/; compare gathers runs through cctk.results and writes its pages with outputs/;
# cctk.results renders a paper's tables through outputs/; outputs read and write a session through the
# store; the store reads a session's protocol through the manuals' registry. The manuals use the kernels
# alone: the registry names each manual's home and imports it when a name is resolved, as a plugin is.
FLOORS: dict[str, tuple[str, ...]] = {
    "command lines": ("cctk.__main__", "cctk.cli", "cctk.bench"),
    "pipeline": ("cctk.pipeline",),
    "KR-Test": ("cctk.krtest",),
    "compare": ("cctk.compare",),
    "results": ("cctk.results",),
    "outputs": ("cctk.outputs",),
    "store": ("cctk.store",),
    "manuals": ("cctk.manuals",),
    "kernels": ("cctk", "cctk.core", "cctk.figures"),
}
DIRECTION = " -> ".join(FLOORS)
DOOR = "cctk"  # the package's own __init__: left out of the check of cctk's folders (see there)
REGISTRY = "cctk.manuals.registry"
# The manuals' names, which are their folders' (cctk/manuals/v1/ is protocol v1)
MANUALS = sorted(p.name for p in (PACKAGE / "manuals").glob("v[0-9]*") if (p / "__init__.py").is_file())


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources() -> dict[str, str]:
    """Every module of the package by name, with its source text: what every check reads (a check's own
    test hands it a made-up tree in its place)."""
    return {module_name(p): p.read_text() for p in PACKAGE.rglob("*.py")}


def imports(name: str, text: str) -> set[str]:
    """Every module a file imports, anywhere in it (function-level imports included), resolved."""
    package = name if _is_package(name) else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            for alias in node.names:  # `from . import x` may name a module
                candidate = f"{base}.{alias.name}"
                found.add(candidate if _exists(candidate) else base)
    return found


def _exists(name: str) -> bool:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or _is_package(name)


def _is_package(name: str) -> bool:
    return (PACKAGE.parent.joinpath(*name.split(".")) / "__init__.py").is_file()


def graph() -> dict[str, set[str]]:
    files = sources()
    return {name: {m for m in imports(name, text) if m in files} - {name} for name, text in files.items()}


def test_light_layers_load_neither_torch_nor_mlflow():
    code = f"import sys, {', '.join(LIGHT)}; print('torch' in sys.modules, 'mlflow' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


def _acyclic(edges: dict[str, set[str]], message: str) -> None:
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            assert state.get(nxt) != 1, message + " -> ".join([*path, nxt])
            if nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])


def test_no_import_cycle():
    _acyclic(graph(), "import cycle: ")


def test_only_tracking_imports_mlflow_and_only_the_cli_imports_the_pipeline():
    files = {name: imports(name, text) for name, text in sources().items()}
    assert sorted(n for n, found in files.items() if any(m.split(".")[0] == "mlflow" for m in found)) == [
        "cctk.store.tracking"
    ]
    pipeline = sorted(
        n
        for n, found in files.items()
        if not n.startswith("cctk.pipeline")
        and any(m == "cctk.pipeline" or m.startswith("cctk.pipeline.") for m in found)
    )
    assert pipeline == ["cctk.cli.main"]


def test_only_kr_tests_generation_imports_the_endpoint_client():
    """The paid endpoint's client (openai) belongs to KR-Test's generation side: nothing that measures,
    trains or reports imports it."""
    files = {name: imports(name, text) for name, text in sources().items()}
    clients = sorted(n for n, found in files.items() if any(m.split(".")[0] == "openai" for m in found))
    assert clients and all(n.startswith("cctk.krtest.generation.") for n in clients), clients


def test_the_cycle_check_finds_a_cycle(monkeypatch):
    """The checker itself: a graph with a cycle fails."""
    monkeypatch.setattr(sys.modules[__name__], "graph", lambda: {"a": {"b"}, "b": {"c"}, "c": {"a"}})
    with pytest.raises(AssertionError, match="a -> b -> c -> a"):
        test_no_import_cycle()


def floor(module: str) -> int | None:
    """The index in FLOORS of a module's floor (0 the top); None where it has none."""
    best = None
    for level, names in enumerate(FLOORS.values()):
        for name in names:
            under = module == name or (name != "cctk" and module.startswith(name + "."))
            if under and (best is None or len(name) > len(best[1])):
                best = (level, name)
    return best[0] if best else None


def folders(modules: Iterable[str]) -> set[str]:
    """Every folder that holds a module: each module's packages (``cctk``, ``cctk.krtest``, ...)."""
    return {".".join(m.split(".")[:i]) for m in modules for i in range(1, len(m.split(".")))}


def unit(folder: str, module: str) -> str | None:
    """A module's unit in ``folder``: the sub-folder or module right under it that it is or lies in
    (``folder`` itself for the folder's ``__init__``); None outside the folder."""
    if module == folder:
        return folder
    if not module.startswith(folder + "."):
        return None
    return f"{folder}.{module[len(folder) + 1 :].split('.')[0]}"


def test_every_module_has_a_floor():
    assert [m for m in sorted(graph()) if floor(m) is None] == []


def test_imports_point_down_the_floors():
    names = list(FLOORS)
    upward = [
        f"{a} ({names[floor(a)]}) imports {b} ({names[floor(b)]})"
        for a, found in sorted(graph().items())
        for b in sorted(found)
        if floor(b) < floor(a)
    ]
    assert not upward, f"upward import, against {DIRECTION}: " + "; ".join(upward)


def test_no_import_cycle_between_folders():
    """In every folder, between what lies right under it (its sub-folders and modules, each one unit):
    ``compare/`` -> ``krtest/`` -> ``compare/`` is a cycle of cctk's folders even where no file imports
    itself back, ``krtest/generation/`` -> ``krtest/measurement/`` -> ``krtest/generation/`` one of
    krtest's. A folder's ``__init__`` is a unit of its own, over the modules it re-exports
    (``cctk.krtest.KRTestCallback``), which never import it. The package's own ``__init__`` alone is left
    out: it is the door (``__version__``, which every floor reads, and ``load_model``/``measure`` looked up
    on first use), not a room."""
    edges = graph()
    for folder in sorted(folders(edges)):
        units: dict[str, set[str]] = {}
        for a, found in edges.items():
            here = unit(folder, a)
            if here not in (None, DOOR):
                units.setdefault(here, set()).update(
                    there for b in found if (there := unit(folder, b)) not in (None, here, DOOR)
                )
        _acyclic(units, f"import cycle between the folders of {folder}: ")


@pytest.mark.parametrize(
    ("edges", "message"),
    [  # a kernel that imports an output module; the store that imports outputs, a floor up
        (
            {"cctk.core.stats": {"cctk.outputs.write"}, "cctk.outputs.write": {"cctk.core.stats"}},
            r"cctk.core.stats \(kernels\) imports cctk.outputs.write \(outputs\)",
        ),
        (
            {"cctk.store.session": {"cctk.outputs.tables"}, "cctk.outputs.tables": {"cctk.store.session"}},
            r"cctk.store.session \(store\) imports cctk.outputs.tables \(outputs\)",
        ),
    ],
)
def test_the_floor_check_finds_an_upward_import(monkeypatch, edges, message):
    """The checker itself: an import up a floor fails, and the message names both modules and floors."""
    monkeypatch.setattr(sys.modules[__name__], "graph", lambda: edges)
    with pytest.raises(AssertionError, match=message):
        test_imports_point_down_the_floors()


@pytest.mark.parametrize(
    ("edges", "cycle"),
    [
        (  # compare.gather -> krtest (its __init__), krtest.compare -> compare.tables: no cycle of files
            {
                "cctk.compare.gather": {"cctk.krtest"},
                "cctk.krtest": set(),
                "cctk.krtest.commands.compare": {"cctk.compare.tables"},
                "cctk.compare.tables": set(),
            },
            "of cctk: cctk.compare -> cctk.krtest -> cctk.compare",
        ),
        (  # KR-Test as it was: training checked its seed with generation's check, generation reads items
            {
                "cctk.krtest.measurement.train": {"cctk.krtest.generation.generate", "cctk.krtest.measurement.items"},
                "cctk.krtest.generation.generate": {"cctk.krtest.measurement.items"},
                "cctk.krtest.measurement.items": set(),
            },
            "of cctk.krtest: cctk.krtest.generation -> cctk.krtest.measurement -> cctk.krtest.generation",
        ),
        (  # and took its default budget from the package's __init__, which re-exports the callback
            {
                "cctk.krtest": {"cctk.krtest.measurement.callback"},
                "cctk.krtest.measurement.callback": set(),
                "cctk.krtest.measurement.train": {"cctk.krtest"},
            },
            "of cctk.krtest: cctk.krtest -> cctk.krtest.measurement -> cctk.krtest",
        ),
        (  # a manual's sub-folder and its folder's modules, a floor deeper still
            {
                "cctk.manuals.v2.parts.part_a": {"cctk.manuals.v2.design"},
                "cctk.manuals.v2.design": {"cctk.manuals.v2.parts.core"},
                "cctk.manuals.v2.parts.core": set(),
            },
            "of cctk.manuals.v2: cctk.manuals.v2.design -> cctk.manuals.v2.parts -> cctk.manuals.v2.design",
        ),
    ],
)
def test_the_folder_check_finds_a_cycle_no_file_check_sees(monkeypatch, edges, cycle):
    monkeypatch.setattr(sys.modules[__name__], "graph", lambda: edges)
    test_no_import_cycle()
    with pytest.raises(AssertionError, match=f"import cycle between the folders {re.escape(cycle)}"):
        test_no_import_cycle_between_folders()


def manual(module: str) -> str | None:
    """The manual's folder a module is or lies in (``cctk.manuals.v2``); None outside the manuals' folders."""
    found = re.match(r"cctk\.manuals\.v\d+(?=\.|$)", module)
    return found.group() if found else None


def code_strings(text: str) -> set[str]:
    """A file's string constants, its docstrings and other bare strings left out: what its code uses."""
    tree = ast.parse(text)
    bare = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in bare
    }


def references(name: str, text: str) -> set[str]:
    """The modules a file imports, and those its code names in strings (``import_module("cctk.x.y")``,
    the registry's ``"cctk.manuals.v2.manual:V2"``)."""
    named = {m for s in code_strings(text) for m in re.findall(r"\bcctk(?:\.\w+)+", s)}
    return imports(name, text) | named


def check_manuals(files: dict[str, str]) -> None:
    """A manual is one folder: only the registry and the manual's own folder import (or name) its modules,
    never the pipeline, the store, outputs, the CLI or another manual; and the kernels name no manual: no
    default (``DEFAULT_PROTOCOL = "v2"``, ``protocol: str = "v2"``) nor any other choice between them,
    which is the registry's and the command line's."""
    outside = [
        f"{a} imports {b}"
        for a, text in sorted(files.items())
        for b in sorted(references(a, text))
        if (home := manual(b)) and a != REGISTRY and manual(a) != home
    ]
    assert not outside, (
        "a manual imported from outside its folder (only the registry and cctk/manuals/vN/ import cctk.manuals.vN): "
        + "; ".join(outside)
    )
    kernels = list(FLOORS).index("kernels")
    named = [
        f"{name} names manual {value!r}"
        for name, text in sorted(files.items())
        if floor(name) == kernels
        for value in sorted(code_strings(text) & set(MANUALS))
    ]
    assert not named, "a manual named in the kernels (they default to none, and choose none): " + "; ".join(named)


def test_a_manual_is_imported_only_by_the_registry_and_its_folder_and_the_kernels_name_none():
    check_manuals(sources())


# A made-up tree that keeps both rules: the registry names each manual's home, a manual's modules import
# each other and the kernels, the pipeline asks the registry, the kernels name no manual.
KEEPS_THEM = {
    "cctk.manuals.registry": 'HOMES = {"v2": "cctk.manuals.v2.manual:V2", "v1": "cctk.manuals.v1.manual:V1"}\n',
    "cctk.manuals.v2.manual": "from . import design\nfrom ...core import config\n",
    "cctk.manuals.v2.parts.part_a": "from ..design import ARMS\n",
    "cctk.manuals.v2.design": "from ..registry import Protocol\n",
    "cctk.manuals.v1.manual": "from ..registry import Protocol\nfrom . import experiment\n",
    "cctk.pipeline.stages": "from ..manuals import registry\n\n\ndef run(name):\n    return registry.get(name)\n",
    "cctk.core.config": '"""What every manual shares (profiles of "v2" are manual 2.0.0\'s: its folder)."""\n'
    "SEED = 20260506\n",
}


def test_the_manual_checks_pass_a_tree_that_keeps_them():
    check_manuals(KEEPS_THEM)


@pytest.mark.parametrize(
    ("module", "text", "message"),
    [
        (
            "cctk.pipeline.stages",
            "from ..manuals.v2.design import curve_rows\n",
            "cctk.pipeline.stages imports cctk.manuals.v2.design",
        ),
        (
            "cctk.pipeline.stages",
            'from importlib import import_module\n\nV2 = import_module("cctk.manuals.v2.manual")\n',
            "cctk.pipeline.stages imports cctk.manuals.v2.manual",
        ),
        ("cctk.store.session", "from ..manuals import v2\n", "cctk.store.session imports cctk.manuals.v2"),
        (
            "cctk.manuals.v1.manual",
            "from ..v2.labels import FORMER\n",
            "cctk.manuals.v1.manual imports cctk.manuals.v2.labels",
        ),
        (
            "cctk.core.config",
            'DEFAULT_PROTOCOL = "v2"  # what `cctk run` runs without --protocol\n',
            "a manual named in the kernels (they default to none, and choose none): cctk.core.config names manual 'v2'",
        ),
        (
            "cctk.core.provenance",
            'def reproduce(protocol: str = "v1") -> list[str]:\n    return [protocol]\n',
            "cctk.core.provenance names manual 'v1'",
        ),
    ],
)
def test_the_manual_checks_find_a_manual_out_of_its_folder_and_a_default_in_the_kernels(module, text, message):
    with pytest.raises(AssertionError, match=re.escape(message)):
        check_manuals({**KEEPS_THEM, module: text})
