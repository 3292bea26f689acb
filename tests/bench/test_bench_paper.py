"""``python -m cctk.bench paper SESSION``: each stage timed, the saves both ways, and the font subsetting
restored after the lean way (``cctk.figures.common.lean_fonts`` patches it inside its block only)."""

import json

from click.testing import CliRunner
from fontTools import subset

from cctk.bench import bench
from cctk.manuals.v2 import catalog


def test_bench_paper_times_each_stage_and_leaves_the_subsetting_as_it_was(tmp_path, written_session, monkeypatch):
    every = catalog.specs
    monkeypatch.setattr(catalog, "specs", lambda *args: [s for s in every(*args) if s.key in ("synthesis", "loss")])
    load = subset.load_font
    out = tmp_path / "paper.json"
    result = CliRunner().invoke(bench, ["paper", str(written_session[0]), "--json-out", str(out)])
    assert result.exit_code == 0, result.output
    figures = json.loads(out.read_text())
    assert figures["figures"] == 2 and figures["tables"] == 11
    assert figures["seconds to save the PDFs, lean fonts (now)"] > 0 and figures["figures, before / now"] > 0
    assert subset.load_font is load
