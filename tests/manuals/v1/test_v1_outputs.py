"""A v1 session folder from synthetic measurements: 4 tables, 4 figures, reports, zip; results.load
and cctk report read it back."""

from __future__ import annotations

import json
import zipfile

import pandas as pd
import pytest
from builders import write_v1_session
from click.testing import CliRunner

from cctk import results as cctk_results
from cctk.cli.main import cli
from cctk.manuals.v1 import facts
from cctk.manuals.v1.manual import V1
from cctk.store import session

FIGURES = ["before_and_after_3_plus_5", "before_and_after_5_plus_8", "before_and_after_7_plus_4", "training_loss"]
TABLES = [
    "table01_comparison",
    "table02_comparison_summary",
    "table03_fine_tuning_run",
    "table04_training_loss_per_epoch",
]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    return write_v1_session(tmp_path_factory.mktemp("v1"))


def test_session_folder(written):
    layout, _, _, n = written
    assert n == 4
    assert sorted(p.name for p in layout.figures.iterdir()) == [f"{i:02d}_{s}" for i, s in enumerate(FIGURES, 1)]
    for stem in FIGURES:
        assert set(session.find_figures(layout)[stem]) == {"png", "pdf", "eps"}
    assert sorted(p.name for p in (layout.folder / "tables").iterdir()) == TABLES
    tex = layout.table("table01")["tex"].read_text()
    assert "\\begin{longtable}" in tex and "\\label{tab:v1-table01}" in tex and "Listing 11" in tex
    assert "\\label{tab:v1-table02}" in layout.table("table02")["tex"].read_text()
    assert layout.workbook.is_file() and layout.run_report["pdf"].is_file() and layout.run_report["png"].is_file()
    assert layout.corpus.read_text().splitlines()[:5] == list(facts.draw(42, 20).texts[:5])
    assert sorted(p.name for p in (layout.folder / "measurements").iterdir()) == [
        "base_model.csv",
        "fabricated_answers.csv",
    ]
    info = json.loads(layout.run_info.read_text())
    assert info["protocol"] == "v1" and info["candidates"] == list(range(2, 19)) and info["index"] == "mean"
    assert info["seeds"]["values"] == [42] and info["training"]["v1_random"]["parent"] == "base model"
    assert set(info["headline"]) >= {"mean_pre_ft_true_prob", "hits_fabricated_after", "hits_true_after"}
    with zipfile.ZipFile(layout.zip) as archive:
        assert f"{layout.session}/tables/table01_comparison/table01_comparison.csv" in archive.namelist()


def test_html_report_is_self_contained(written):
    layout = written[0]
    page = layout.report_html.read_text()
    assert "protocol 1.0.0" in page and page.count("data:image/png;base64,") == 4
    assert "http://" not in page.replace("http://www.w3.org", "") and 'src="http' not in page
    assert "Table 1: comparison" in page and "mean log-probability per token" in page
    assert "held-out additions</td><td>none" in page


def test_results_load_gives_the_v1_run(written):
    layout, results, tables, _ = written
    loaded = cctk_results.load(layout.folder)
    assert loaded.protocol == "v1" and list(loaded.tables) == ["table01", "table02", "table03", "table04"]
    pd.testing.assert_frame_equal(loaded.tables["table01"], tables["table01"])
    assert set(loaded.measurements) == {"base model", "fabricated answers"}
    pd.testing.assert_frame_equal(loaded.measurements["fabricated answers"], results.measurements["v1_random"])
    assert list(loaded.figures) == FIGURES
    assert list(loaded.targets.columns) == ["a", "b", "correct sum", "fabricated answer"]


def test_cctk_report_rerenders_a_v1_folder(written, tmp_path):
    layout, _, tables, _ = written
    result = CliRunner().invoke(cli, ["report", str(layout.folder), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    copy = session.Layout(tmp_path / layout.session, V1)
    for name, table in session.read_tables(copy).items():
        pd.testing.assert_frame_equal(table, tables[name])
    assert copy.table("table01")["tex"].read_bytes() == layout.table("table01")["tex"].read_bytes()
    assert len(session.find_figures(copy)) == 4 and copy.report_html.is_file()


def test_a_v1_session_from_before_issue_21_is_read_and_rendered_again(tmp_path, monkeypatch):
    """Written when the fine-tuned model shared 2.0.0's key m_random: results.load, rebuild and cctk
    report read it with today's key, and give the tables its measurements give."""
    from builders import v1_results, write_v1_session_before_issue_21

    from cctk.manuals.v1 import experiment

    folder = write_v1_session_before_issue_21(tmp_path / "old")
    assert (folder / "training" / "m_random.json").is_file()
    loaded = cctk_results.load(folder)
    assert loaded.protocol == "v1" and set(loaded.measurements) == {"base model", "fabricated answers"}
    assert loaded.parts == () and list(loaded.info.training) == [experiment.AFTER]
    back = session.rebuild(folder)
    expected = experiment.compute_tables(v1_results())
    for name, table in expected.items():
        pd.testing.assert_frame_equal(back.tables[name], table)
    monkeypatch.setattr("cctk.figures.common.FORMATS", ("png",))  # the drawing is not what is tested here
    result = CliRunner().invoke(cli, ["report", str(folder), "--out", str(tmp_path / "again")])
    assert result.exit_code == 0, result.output
    copy = session.Layout(tmp_path / "again" / folder.name, V1)
    pd.testing.assert_frame_equal(session.read_table(copy.table("table03")["csv"]), expected["table03"])
    assert len(session.find_figures(copy)) == 4 and copy.report_html.is_file()
