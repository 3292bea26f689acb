"""A run of some parts (``cctk run --parts A,C``): the arms each set of parts trains, the tables and
figures of the parts not run absent (from the catalog, not a list per case), the reports saying which
parts ran, and the session read back (rebuild, cctk report, cctk.results.load)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from builders import RUN, figure_copier, write_session
from click.testing import CliRunner

from cctk import results as run_results
from cctk.cli.main import cli
from cctk.core.errors import CctkError
from cctk.figures import spec as figure_spec
from cctk.manuals import configure
from cctk.manuals.configure import make_config
from cctk.manuals.v1.manual import V1
from cctk.manuals.v2 import catalog
from cctk.manuals.v2.config import PARTS, StudyOptions, parse_parts
from cctk.manuals.v2.design import ARMS, arms_for, models_for
from cctk.manuals.v2.manual import V2
from cctk.manuals.v2.parts import TABLE_PART, StudyResults, compute_tables
from cctk.store.session import rebuild

AC = ("A", "C")


@pytest.mark.parametrize(
    ("parts", "arms"),
    [
        (("A",), ["m_correct", "m_random"]),
        (("A", "B"), ["m_correct", "m_random", "m_recover"]),
        (
            ("A", "C"),
            [
                "m_correct",
                "m_random",
                "c18_correct",
                "c18_random",
                "c3_correct",
                "c3_random",
                "c18ctl_correct",
                "c3ctl_correct",
            ],
        ),
        (("A", "D"), ["m_correct", "m_random", "d_correct", "d_random", "dctl_correct", "dctl_random"]),
        (
            ("C",),
            [
                "m_correct",
                "m_random",
                "c18_correct",
                "c18_random",
                "c3_correct",
                "c3_random",
                "c18ctl_correct",
                "c3ctl_correct",
            ],
        ),  # Part C's parents are Part A's models: trained although A was not named
        (PARTS, [arm.key for arm in ARMS]),
    ],
)
def test_the_arms_each_set_of_parts_trains(parts, arms):
    assert [arm.key for arm in arms_for(parts)] == arms
    assert models_for(parts) == ("base", *arms)


def test_parts_are_read_in_order_with_part_a_always():
    assert parse_parts("C,A") == AC and parse_parts("c") == AC and parse_parts(" d , b") == ("A", "B", "D")
    assert parse_parts(None) == parse_parts("") == PARTS and parse_parts(("C",)) == AC
    config = make_config("m", "smoke", (1,), parts="C")
    assert config.options.parts == AC and configure.params(V2, config)["parts"] == "A,C"
    assert configure.params(V2, make_config("m", "smoke", (1,)))["parts"] == "A,B,C,D"
    assert "parts" not in configure.params(V1, make_config("m", "smoke", (1,), protocol="v1"))


@pytest.mark.parametrize(
    ("parts", "message"),
    [
        ("A,E", "unknown part 'E' in --parts A,E: choose among A, B, C, D"),
        ("A,,C", "unknown part '' in --parts A,,C"),
        ("synthesis", "unknown part 'SYNTHESIS'"),
    ],
)
def test_an_unknown_part_fails_in_one_line(parts, message):
    with pytest.raises(CctkError, match=message) as caught:
        make_config("m", "smoke", (1,), parts=parts)
    assert "\n" not in str(caught.value)


def test_the_cli_refuses_bad_parts_before_any_work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    for args, message in (
        (["run", "--parts", "A,X", "--out", "o"], "Error: unknown part 'X' in --parts A,X"),
        (
            ["run", "--protocol", "v1", "--parts", "A", "--out", "o"],
            "Error: --parts has no meaning under --protocol v1",
        ),
        (["run", "--resume", "abc", "--parts", "A"], "Error: --resume continues a run with the options it was"),
        (["sweep", "--models", "smollm2-135m-bundled", "--seeds", "1,2", "--parts", "Q"], "Error: unknown part 'Q'"),
        (
            ["sweep", "--resume", "abc", "--parts", "A"],
            "Error: --resume continues a sweep with the manual and options it was started with; leave out --parts",
        ),
    ):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code != 0 and result.output.strip().splitlines() == [result.output.strip()], args
        assert result.output.strip().startswith(message), (args, result.output)
    assert not (tmp_path / "o").exists() and not (tmp_path / "mlruns").exists()


def partial(results: StudyResults, parts: tuple[str, ...]) -> StudyResults:
    """The synthetic run cut down to what a run of ``parts`` measures and trains."""
    keep = set(models_for(parts))
    return StudyResults(
        results.inputs,
        {k: t for k, t in results.measurements.items() if k in keep},
        {k: r for k, r in results.training.items() if k in keep},
        parts=parts,
    )


@pytest.fixture(scope="module")
def ac_session(tmp_path_factory, written_session):
    """A session of Parts A and C, its figures copied from the full session's (the same numbers and stems)."""
    full_folder, full, _ = written_session
    results = partial(full, AC)
    tables = compute_tables(results)
    original = figure_spec.draw_and_save
    figure_spec.draw_and_save = figure_copier(full_folder)
    try:
        folder = write_session(
            tmp_path_factory.mktemp("ac"),
            results,
            tables,
            make_config("smollm2-135m-bundled", "quick", (7,), parts="A,C"),
            RUN,
        )
    finally:
        figure_spec.draw_and_save = original
    return folder, results, tables


def test_tables_of_the_parts_not_run_are_absent(ac_session):
    _, results, tables = ac_session
    assert list(tables) == ["table01", "table04", "table09", "table10", "table11"]
    assert {TABLE_PART[name] for name in tables} == {"A", "C", "synthesis", "runs"}
    names = {
        "base model",
        "correct sums",
        "fabricated answers",
        "sum + 18 from correct sums",
        "sum + 18 from fabricated answers",
        "sum + 3 from correct sums",
        "sum + 3 from fabricated answers",
        "control for + 18",
        "control for + 3",
    }
    assert set(tables["table09"]["model"]) == names  # the synthesis: only the corpora that ran
    assert len(tables["table10"]) == 4 and len(tables["table11"]) == 8
    only_a = compute_tables(partial(results, ("A",)))
    assert list(only_a) == ["table01", "table09", "table11"]  # no rule trained: no table10


def test_figures_of_the_parts_not_run_are_absent_and_keep_their_numbers(ac_session):
    folder, results, tables = ac_session
    specs = catalog.specs(results, tables, "m")
    assert [s.number for s in specs] == [1, 2, 3, 4, 5, 6, *range(9, 17), 24, 25]
    assert {s.part for s in specs} == {"A", "C", "synthesis", "runs"}
    drawn = sorted(p.name[:2] for p in (folder / "figures").iterdir())
    assert drawn == [f"{s.number:02d}" for s in specs]


def test_the_run_info_and_reports_say_which_parts_ran(ac_session):
    folder, _, _tables = ac_session
    info = json.loads((folder / "run_info.json").read_text())
    assert info["parts"] == ["A", "C"] and set(info["training"]) == {a.key for a in arms_for(AC)}
    page = (folder / "report.html").read_text()
    assert "Parts run: A, C; not run: B, D" in page
    assert 'id="part-B"' not in page and 'id="part-D"' not in page and 'id="part-C"' in page
    assert page.count('<img src="data:image/png') == 16
    from cctk.outputs.run_report import facts
    from cctk.store.session import read_run_info

    model_block = dict(facts(read_run_info(folder))[2][1])
    assert model_block["parts run"] == "A, C (not B, D)"
    assert (folder / "run_report.pdf").is_file()


def test_a_partial_session_is_read_back(ac_session, tmp_path, monkeypatch):
    folder, _results, tables = ac_session
    back = rebuild(folder)
    assert back.info.config.options.parts == AC and back.results.parts == AC
    assert list(back.tables) == list(tables)
    for name in tables:
        pd.testing.assert_frame_equal(back.tables[name], tables[name])
    loaded = run_results.load(folder)
    assert loaded.parts == AC and list(loaded.tables) == list(tables)
    assert "recovery" not in loaded.measurements and len(loaded.measurements) == 9
    monkeypatch.setattr(figure_spec, "draw_and_save", figure_copier(folder))
    result = CliRunner().invoke(cli, ["report", str(folder), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "re-rendered 16 figures, 5 tables" in result.output
    assert sorted(p.name for p in (tmp_path / folder.name / "tables").iterdir()) == sorted(
        p.name for p in (folder / "tables").iterdir()
    )


def test_a_missing_measurement_of_a_part_that_ran_is_an_error(ac_session, tmp_path):
    folder, _, _ = ac_session
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy)
    (copy / "measurements" / "control_for_plus_3.csv").unlink()
    with pytest.raises(CctkError, match="no measurement of the control for \\+ 3 model"):
        rebuild(copy)


def test_a_run_from_before_parts_reads_as_all_parts(written_session):
    folder, _, _ = written_session
    info = json.loads((folder / "run_info.json").read_text())
    info.pop("parts", None)
    from cctk.store.session import info_from_json

    assert info_from_json(info).config.options.parts == PARTS


def test_parts_travel_through_mlflow_params_the_mlproject_and_a_sweep():
    import yaml

    from cctk.cli.mlproject import strip_empty
    from cctk.pipeline.sweep import Grid, parse_grid

    params = {
        k: str(v)
        for k, v in configure.params(V2, make_config("smollm2-135m-bundled", "smoke", (3,), parts="A,C")).items()
    }
    assert configure.config_from_params(V2, params).options.parts == AC  # what --resume reads back
    mlflow_run = {**params, "parts": "c,a", "parts.resolved": "A,C"}
    assert configure.config_from_params(V2, mlflow_run).options.parts == AC  # mlflow run's
    before = {k: v for k, v in params.items() if k != "parts"}
    assert configure.config_from_params(V2, before).options.parts == PARTS  # before --parts
    main = yaml.safe_load((Path(__file__).resolve().parents[2] / "MLproject").read_text())["entry_points"]["main"]
    assert main["parameters"]["parts"]["default"] == "" and "--parts {parts}" in main["command"]
    assert strip_empty(["--parts", "", "--seed", "3"]) == ["--seed", "3"]
    grid = parse_grid("smollm2-135m-bundled", "3,5", ("learning_rate=1e-4,1e-3",), "smoke", parts="C")
    assert grid.options.parts == AC and grid.as_params()["parts"] == "A,C" and grid.protocol == "v2"
    assert Grid.from_params({k: str(v) for k, v in grid.as_params().items()}) == grid
    old = {k: str(v) for k, v in grid.as_params().items() if k not in ("parts", "protocol", "holdout_share", "curves")}
    back = Grid.from_params(old)  # a sweep from before --parts and --protocol: manual 2.0.0's, every part
    assert back.protocol == "v2" and back.options == StudyOptions(0.3, False, PARTS)


def test_the_headline_is_computed_whatever_the_parts(ac_session):
    from cctk.manuals.v2.parts import headline

    _, results, _ = ac_session
    head = headline(results)
    assert head.n_additions == 81
    assert set(head.metrics()) == {"m_correct_hits_correct", "m_random_hits_fabricated", "n_additions", "absorbed"}
