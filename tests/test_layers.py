"""One direction of dependencies, for files and for folders: every module sits on a floor, and imports
only from its own floor or the floors below it (the command lines -> the pipeline -> experiments,
outputs, tracking, compare, KR-Test and the manuals -> the kernels); no import cycle between files, nor
between folders (a folder and a top-level module are one unit each); the torch-free layers stay torch-
and MLflow-free; only tracking.py imports mlflow; nothing imports the pipeline but the CLI: the
library's entry points (``pipeline.run``, ``pipeline.resume``, ``pipeline.sweep_cell``) live in the pipeline, the CLI
parses options and calls them, and a sweep runs its cells through the function its caller hands it."""

import ast
import subprocess
import sys
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
# top-level module must be given one.
FLOORS: dict[str, tuple[str, ...]] = {
    "command lines": ("cctk.__main__", "cctk.cli", "cctk.bench"),
    "pipeline": ("cctk.pipeline",),
    "the manuals, the store, outputs, compare, KR-Test": (
        "cctk.manuals",
        "cctk.store",
        "cctk.results",
        "cctk.outputs",
        "cctk.compare",
        "cctk.krtest",
    ),
    "kernels": ("cctk", "cctk.core", "cctk.figures"),
}
DIRECTION = " -> ".join(FLOORS)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every module a file imports, anywhere in it (function-level imports included), resolved."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
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
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: {m for m in imports(path) if m in files} - {name} for name, path in files.items()}


def test_light_layers_load_neither_torch_nor_mlflow():
    code = f"import sys, {', '.join(LIGHT)}; print('torch' in sys.modules, 'mlflow' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


def _acyclic(edges: dict[str, set[str]], message: str) -> None:
    state: dict[str, int] = {}

    def visit(node, path):
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
    files = {module_name(p): imports(p) for p in PACKAGE.rglob("*.py")}
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
    files = {module_name(p): imports(p) for p in PACKAGE.rglob("*.py")}
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


def unit(module: str) -> str:
    """A module's unit for the folder check: its folder under cctk/ (``cctk.compare``), or itself."""
    return ".".join(module.split(".")[:2])


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
    """Between folders (and top-level modules). The package's own ``__init__`` is left out: it is the door
    (``__version__``, which every floor reads, and ``load_model``/``measure`` looked up on first use), not a room."""
    folders: dict[str, set[str]] = {}
    for a, found in graph().items():
        if a == "cctk":
            continue
        folders.setdefault(unit(a), set()).update(unit(b) for b in found if unit(b) not in (unit(a), "cctk"))
    _acyclic(folders, "import cycle between folders: ")


def test_the_floor_check_finds_an_upward_import(monkeypatch):
    """The checker itself: a kernel that imports an output module fails, and the message names both."""
    monkeypatch.setattr(
        sys.modules[__name__],
        "graph",
        lambda: {"cctk.core.stats": {"cctk.outputs.write"}, "cctk.outputs.write": {"cctk.core.stats"}},
    )
    with pytest.raises(AssertionError, match=r"cctk.core.stats \(kernels\) imports cctk.outputs.write"):
        test_imports_point_down_the_floors()


def test_the_folder_check_finds_a_cycle_no_file_check_sees(monkeypatch):
    """compare.gather -> krtest (its __init__) and krtest.compare -> compare.tables: no cycle of files,
    one of folders."""
    edges = {
        "cctk.compare.gather": {"cctk.krtest"},
        "cctk.krtest": set(),
        "cctk.krtest.commands.compare": {"cctk.compare.tables"},
        "cctk.compare.tables": set(),
    }
    monkeypatch.setattr(sys.modules[__name__], "graph", lambda: edges)
    test_no_import_cycle()
    with pytest.raises(AssertionError, match=r"cctk.compare -> cctk.krtest -> cctk.compare"):
        test_no_import_cycle_between_folders()
