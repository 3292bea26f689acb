"""``python -m cctk.bench figures``: both ways save the same EPS, and matplotlib's own way is back after."""

from click.testing import CliRunner
from matplotlib.backends import backend_ps

from cctk.bench import bench


def test_bench_figures_saves_the_same_eps_both_ways_and_restores_the_kept_box(tmp_path):
    kept = backend_ps._bounds
    out = tmp_path / "figures.json"
    result = CliRunner().invoke(bench, ["figures", "--repeats", "1", "--json-out", str(out)])
    assert result.exit_code == 0, result.output
    assert "EPS bytes identical: True" in result.output
    assert backend_ps._bounds is kept and len(kept.boxes) >= 2  # the kept way measured each font once
    assert '"heatmaps saved each way": 1' in out.read_text()
