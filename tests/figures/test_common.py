"""The one way a figure is saved: the PostScript font box computed once per font, same bytes."""

from __future__ import annotations

import contextlib

from matplotlib.backends import backend_ps

from cctk.bench.figures import eps_without_date
from cctk.figures.common import new_figure, paper_style, save_figure


def figure_with_text():
    with paper_style():
        fig = new_figure(2, 1)
        fig.text(0.1, 0.5, "17 | 18 (3.2%)", fontsize=8)
        fig.text(0.1, 0.2, "bold 9", fontsize=8, fontweight="bold")
    return fig


def test_eps_is_the_same_with_the_font_box_kept(tmp_path, monkeypatch):
    kept = backend_ps._bounds
    assert hasattr(kept, "boxes"), "cctk.figures keeps matplotlib's font box per font"
    kept.boxes.clear()
    first = save_figure(figure_with_text(), tmp_path / "kept", "f")[2]
    assert len(kept.boxes) == 2  # DejaVu Sans and DejaVu Sans Bold, each computed once
    again = save_figure(figure_with_text(), tmp_path / "again", "f")[2]
    monkeypatch.setattr(backend_ps, "_bounds", kept.__wrapped__)  # matplotlib's own, every time
    plain = save_figure(figure_with_text(), tmp_path / "plain", "f")[2]
    assert eps_without_date(first) == eps_without_date(plain) == eps_without_date(again)
    assert b"/FontBBox [" in first.read_bytes()


def _embedded_font(pdf: bytes):
    """The TrueType font a matplotlib PDF embeds (its ``/FontFile2`` stream), read by fontTools."""
    import io
    import re
    import zlib

    from fontTools.ttLib import TTFont

    ref = re.search(rb"/FontFile2 (\d+) 0 R", pdf)[1]
    stream = re.search(rb"\n" + ref + rb" 0 obj\n<<.*?>>\nstream\n(.*?)endstream", pdf, re.S)[1]
    return TTFont(io.BytesIO(zlib.decompress(stream)))


def test_lean_fonts_drop_the_shaping_tables_and_keep_every_glyph():
    """The embedded font without GSUB, GPOS, GDEF, MATH and kern (no PDF reader uses them): every character
    the same glyph, outline and width; and the subsetting is matplotlib's own again after the block."""
    import io

    from fontTools import subset

    from cctk.figures.common import lean_fonts

    load = subset.load_font
    fonts = []
    for lean in (False, True):
        fig = new_figure(2, 1)
        fig.add_subplot().set_title("AV To 12% (kerning)")
        buffer = io.BytesIO()
        with paper_style(), lean_fonts() if lean else contextlib.nullcontext():
            fig.savefig(buffer, format="pdf")
        fonts.append(_embedded_font(buffer.getvalue()))
    full, lean_font = fonts
    assert {"GSUB", "GPOS", "GDEF"} <= set(full.keys())
    assert not {"GSUB", "GPOS", "GDEF", "MATH", "kern"} & set(lean_font.keys())
    # every character drawn maps to the same glyph; the full subset only adds glyphs that the MATH and GSUB
    # tables reach from them (parenthesis pieces, alternates), which nothing draws
    assert lean_font.getBestCmap() == full.getBestCmap() and len(full.getBestCmap()) > 15
    glyphs = lean_font.getGlyphOrder()
    assert set(glyphs) <= set(full.getGlyphOrder())
    for name in glyphs:
        assert lean_font["hmtx"][name] == full["hmtx"][name], name
        coordinates = full["glyf"][name].getCoordinates(full["glyf"])[0]
        assert lean_font["glyf"][name].getCoordinates(lean_font["glyf"])[0] == coordinates, name
    assert subset.load_font is load


def test_warm_up_pays_matplotlibs_one_time_costs_and_writes_nothing(tmp_path):
    """A pipeline warms Matplotlib up before it times the base model's measurement and heatmap, which each arm's
    time is forecast from (the first heatmap's one-time 1.2 s on two cores, measured 2026-12-06): in a fresh
    interpreter the warm-up has the PDF backend imported and its fonts loaded, and it leaves no file behind."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from matplotlib import font_manager\n"
        "import cctk.figures\n"
        "fonts = font_manager._get_font.cache_info\n"
        "loaded = lambda: ('matplotlib.backends.backend_pdf' in sys.modules, fonts().currsize)\n"
        "print(*loaded())\n"
        "cctk.figures.warm_up()\n"
        "print(*loaded())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    before, after = (line.split() for line in done.stdout.splitlines())
    assert before == ["False", "0"] and after[0] == "True" and int(after[1]) >= 2, done.stdout  # plain and bold
    assert not list(tmp_path.iterdir())
