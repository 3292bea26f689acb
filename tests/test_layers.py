"""What the import contracts cannot say. The floors of docs/design.md ("Layers"), the cycles between folders, who
may import the pipeline, a manual, mlflow or openai are import-linter's contracts (``[tool.importlinter]`` in
pyproject.toml, run by ``make lint``). Left here: that importing a light layer loads neither torch nor MLflow (a
fact of a running interpreter: their imports inside functions are allowed), and that no file imports itself back
through a folder's ``__init__`` (import-linter's acyclic_siblings contract reads a folder's children only)."""

import subprocess
import sys

import grimp

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


def test_light_layers_load_neither_torch_nor_mlflow():
    code = f"import sys, {', '.join(LIGHT)}; print('torch' in sys.modules, 'mlflow' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


def cycles(graph: grimp.ImportGraph) -> list[str]:
    """Every import ``a -> b`` that ``b`` leads back to ``a`` from, as the cycle's path."""
    found = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back:
                found.append(" -> ".join([importer, *back]))
    return found


def test_no_import_cycle_between_files():
    assert cycles(grimp.build_graph("cctk", cache_dir=None)) == []


def test_the_cycle_check_finds_one_through_a_folders_init():
    """The cycle acyclic_siblings leaves out: a module that imports the ``__init__`` re-exporting it."""
    graph = grimp.ImportGraph()
    for module in ("cctk", "cctk.figures", "cctk.figures.bars", "cctk.figures.common"):
        graph.add_module(module)
    graph.add_import(importer="cctk.figures", imported="cctk.figures.bars")
    graph.add_import(importer="cctk.figures.bars", imported="cctk.figures.common")
    assert cycles(graph) == []
    graph.add_import(importer="cctk.figures.common", imported="cctk.figures")
    assert "cctk.figures.common -> cctk.figures -> cctk.figures.bars -> cctk.figures.common" in cycles(graph)
