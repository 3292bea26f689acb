"""The one way a figure is saved: the PostScript font box computed once per font, same bytes."""

from __future__ import annotations

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
