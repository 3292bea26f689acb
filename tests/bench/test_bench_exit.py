"""``python -m cctk.bench exit``: each way's children end as the way says (timed on a child that imports little)."""

from click.testing import CliRunner

from cctk.bench import bench, exit as bench_exit


def test_each_way_ends_its_child_as_it_says(monkeypatch):
    programs = []
    real = bench_exit.child
    monkeypatch.setattr(bench_exit, "child", lambda imports, end: programs.append(real(imports, end)) or programs[-1])
    result = bench_exit.run(1, imports=("json",))
    assert result["processes each way"] == 1 and len(programs) == 2
    assert programs[0].endswith("raise SystemExit(0)") and programs[1].endswith("main(['--version'])")
    assert programs[0].startswith("import json\nimport time\nprint(time.time(), flush=True)")
    assert all(result[k] > 0 for k in result if "seconds" in k)
    # The speedup is taken from the unrounded times: it lies within what the printed (3-decimal) times allow.
    before, now, half = result["exit seconds before"], result["exit seconds now"], 0.0005
    low, high = (before - half) / (now + half), (before + half) / (now - half)
    assert low - 0.005 <= result["exit speedup"] <= high + 0.005


def test_the_bench_command_lists_exit():
    result = CliRunner().invoke(bench, ["exit", "--help"])
    assert result.exit_code == 0 and "Processes each way." in result.output
