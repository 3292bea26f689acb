"""One direction of dependencies: the torch-free layers stay torch- and MLflow-free, no import cycle,
only tracking.py imports mlflow, and nothing imports the pipeline but the CLI: the library's entry
points (``pipeline.run_pipeline``, ``pipeline.sweep_cell``) live in the pipeline, the CLI parses options
and calls them, and a sweep runs its cells through the function its caller hands it."""
import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "cctk"
LIGHT = ["cctk.results", "cctk.outputs", "cctk.experiments", "cctk.figures", "cctk.stats", "cctk.session",
         "cctk.v1.facts", "cctk.v1.experiment", "cctk.v1.catalog", "cctk.protocols", "cctk.cli"]


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
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
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


def test_no_import_cycle():
    edges = graph()
    state: dict[str, int] = {}

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(edges[node]):
            assert state.get(nxt) != 1, "import cycle: " + " -> ".join(path + [nxt])
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])


def test_only_tracking_imports_mlflow_and_only_the_cli_imports_the_pipeline():
    files = {module_name(p): imports(p) for p in PACKAGE.rglob("*.py")}
    assert sorted(n for n, found in files.items() if any(m.split(".")[0] == "mlflow" for m in found)) == ["cctk.tracking"]
    assert sorted(n for n, found in files.items() if "cctk.pipeline" in found) == ["cctk.cli"]


def test_the_cycle_check_finds_a_cycle(tmp_path, monkeypatch):
    """The checker itself: a graph with a cycle fails."""
    import pytest

    monkeypatch.setattr(sys.modules[__name__], "graph", lambda: {"a": {"b"}, "b": {"c"}, "c": {"a"}})
    with pytest.raises(AssertionError, match="a -> b -> c -> a"):
        test_no_import_cycle()
