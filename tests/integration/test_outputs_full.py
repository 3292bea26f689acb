"""Every output of a run as the pipeline writes it, every figure in all three formats: the full check
of what the fast suite's written session (PNG only) leaves out. Synthetic results, no model."""

from __future__ import annotations

import pytest
from builders import SEED, check_loaded, synthetic_results, write_session

from cctk import results
from cctk.manuals.configure import make_config
from cctk.manuals.v2.parts import compute_tables


@pytest.fixture(scope="module")
def full_session(tmp_path_factory):
    measured = synthetic_results()
    tables = compute_tables(measured)
    config = make_config("smollm2-135m-bundled", "quick", (SEED,))
    return write_session(tmp_path_factory.mktemp("full"), measured, tables, config), tables


def test_25_figures_each_in_its_folder_in_three_formats(full_session):
    folder, _ = full_session
    subfolders = sorted(p for p in (folder / "figures").iterdir())
    assert [p.name[:2] for p in subfolders] == [f"{i:02d}" for i in range(1, 26)]
    for sub in subfolders:
        stem = sub.name[3:]
        assert sorted(p.name for p in sub.iterdir()) == [f"{stem}.eps", f"{stem}.pdf", f"{stem}.png"]
    from PIL import Image

    with Image.open(subfolders[0] / f"{subfolders[0].name[3:]}.png") as png:
        assert [round(d) for d in png.info["dpi"]] == [300, 300]


def test_results_load_gives_every_figure_in_three_formats(full_session):
    folder, tables = full_session
    check_loaded(results.load(folder), tables, formats=("png", "pdf", "eps"))
