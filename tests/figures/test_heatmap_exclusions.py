"""Heatmaps of arms from the fabricated-answers model (seed 12345): the held-out additions left out
of their results (manual 4.12) are counted in neither group and drawn hatched."""

from __future__ import annotations

import pytest
from builders import hand_table as peaked  # 0.66 on the top choice, 0.01 on each other candidate

from cctk.core.facts import ADDITIONS
from cctk.figures.heatmap import headline
from cctk.manuals.v2 import catalog
from cctk.manuals.v2.design import build_study_inputs
from cctk.manuals.v2.parts import StudyResults

SEED = 12345
SEEN_MISSES = [(1, 1), (1, 2), (1, 5), (1, 6), (1, 8), (1, 9), (2, 2)]


@pytest.fixture(scope="module")
def results():
    """Sum + 3 from fabricated answers: sum + 3 on the seen additions but 7 (their fabricated answer),
    the fabricated answer on every held-out one, which is sum + 3 on 2+1 (6) and 4+6 (13) only."""
    inputs = build_study_inputs(SEED)
    fab, plus3 = inputs.targets["fabricated"], inputs.targets["plus3"]
    held = set(inputs.split.heldout)
    c3 = {p: int(fab[p] if p in held or p in SEEN_MISSES else plus3[p]) for p in ADDITIONS}
    return StudyResults(
        inputs,
        {
            "c3_random": peaked(c3),
            "m_random": peaked({p: int(fab[p]) for p in ADDITIONS}),
            "c18_random": peaked({p: int(fab[p]) for p in ADDITIONS}),
        },
    )


def test_the_draws_this_test_relies_on(results):
    inputs = results.inputs
    assert len(inputs.split.seen) == 57 and len(inputs.split.heldout) == 24
    assert inputs.excluded["c3_random"] == ((2, 1), (4, 6)) and inputs.excluded["c18_random"] == ((3, 9),)
    assert [int(inputs.targets["fabricated"][p]) for p in [(2, 1), (4, 6), (3, 9), (1, 2), (9, 5)]] == [
        6,
        13,
        30,
        21,
        32,
    ]


def test_headline_counts_left_out_additions_in_neither_group(results):
    args = catalog.heatmap_spec(results, "heatmap:c3_random").args
    held, excluded = set(args["heldout"]), set(args["excluded"])
    assert excluded == {(2, 1), (4, 6)} and len(held) == 22 and not held & excluded
    assert 81 - len(held) - len(excluded) == 57  # seen + held out + left out = 81
    # 50 seen hits, no held-out hit, and the two coincident hits, left out, only in the total
    assert headline(args["readings"], args["heldout"], args["excluded"]) == (
        "52 / 81 top choices on the target  \u00b7  seen 50 / 57  \u00b7  held out 0 / 22  \u00b7  2 left out"
    )


def test_left_out_cells_are_drawn_hatched(results):
    spec = catalog.heatmap_spec(results, "heatmap:c3_random")
    fig = spec.draw(**spec.args)
    cells = {p.get_gid(): p for p in fig.axes[0].patches if (p.get_gid() or "").startswith("cell ")}
    assert len(cells) == 81
    hatched = sorted(gid for gid in cells if "excluded" in gid)
    assert hatched == ["cell 2 1 excluded", "cell 4 6 excluded"]
    assert all(cells[gid].get_hatch() == "////" for gid in hatched)
    assert not any(cells[gid].get_hatch() for gid in cells if gid not in hatched)
    texts = [t.get_text() for t in fig.texts]
    assert "seen 50 / 57  \u00b7  held out 0 / 22  \u00b7  2 left out" in texts[1]
    assert any("hatched gray = held out but left out" in t for t in texts)


def test_one_left_out_for_sum_plus_18_none_for_models_trained_on_all_81(results):
    args = catalog.heatmap_spec(results, "heatmap:c18_random").args
    # sum + 18 from fabricated answers answering its fabricated answer everywhere: it is sum + 18 on the
    # seen 1+2 (21) and 9+5 (32), which count, and on the held-out 3+9 (30), left out
    assert headline(args["readings"], args["heldout"], args["excluded"]) == (
        "3 / 81 top choices on the target  \u00b7  seen 2 / 57  \u00b7  held out 0 / 23  \u00b7  1 left out"
    )
    for figure in ("heatmap:m_random", "heatmap:m_random:correct"):
        args = catalog.heatmap_spec(results, figure).args
        assert args["heldout"] is None and tuple(args["excluded"]) == ()
        assert "seen" not in headline(args["readings"], args["heldout"], args["excluded"])
