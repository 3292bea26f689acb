"""Keys at the seams, labels at the edges (#40 item 4): a session written before its tables had key columns
reads, rebuilds and compares as one of today's; a label changed since a session was written breaks no join.

The sessions "before" are today's with the table CSVs the code before the change wrote for the same results
(tests/data/before_issue_40, ``builders.tables_before_keys``): labels only, no key column.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from builders import (
    BEFORE_KEYS,
    RUN,
    figure_copier,
    synthetic_results,
    tables_before_keys,
    write_session,
    write_v1_session,
)
from click.testing import CliRunner

from cctk import results as cctk_results
from cctk.cli.main import cli
from cctk.compare import report
from cctk.core.errors import CctkError
from cctk.core.labels import GROUPS, printed
from cctk.figures import spec as figure_spec
from cctk.manuals.pooled import PooledRun
from cctk.manuals.v2 import labels as v2_labels
from cctk.manuals.v2.catalog import synthesis_rows
from cctk.manuals.v2.manual import V2
from cctk.manuals.v2.parts import CURVE_COLUMNS
from cctk.store import session, tracking


def copied(folder: Path, root: Path) -> Path:
    """A copy of a session folder (the session-wide ``written_session`` is never changed)."""
    return Path(shutil.copytree(folder, root / folder.name))


def read(path: Path) -> pd.DataFrame:
    """A table as the reading edge reads it: its peak memory's 0 of before (not measured) the empty cell of today."""
    return session.read_table(path)


def todays_labels(table: pd.DataFrame, kinds: tuple[str, ...] = ("model", "target", "group")) -> pd.DataFrame:
    """``table`` with every former label of manual 2.0.0 (labels.FORMER: the controls' targets, renamed on
    2026-12-06) as today's: the one other change since the tables before keys were written."""
    table = table.copy()
    for kind in kinds:  # each kind's label column has the kind's name
        if kind in table.columns:
            former = {name: v2_labels.VOCABULARY.name(kind, key) for name, key in v2_labels.FORMER[kind].items()}
            table[kind] = table[kind].replace(former)
    return table


def files_under(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_tables_before_keys_are_todays_without_their_key_columns(written_session, tmp_path):
    """The fixture's tables are what the code before wrote for the same results: today's, key columns dropped,
    every other column and value the same. So the key columns are all that changed."""
    folder, _, tables = written_session
    for name in tables:
        csv = session.Layout(folder, V2).table(name)["csv"]
        pd.testing.assert_frame_equal(todays_labels(read(BEFORE_KEYS / "v2" / csv.name)), printed(read(csv)))
    v1, _, v1_tables, _ = write_v1_session(tmp_path, figures=False)
    for name in v1_tables:
        csv = v1.table(name)["csv"]
        pd.testing.assert_frame_equal(read(BEFORE_KEYS / "v1" / csv.name), printed(read(csv)))
    assert "model_key" not in read(BEFORE_KEYS / "v2" / "table09_synthesis_shares.csv").columns


def test_results_load_gives_a_session_from_before_its_key_columns(written_session, tmp_path):
    """cctk.results.load derives the keys from the labels, at the reading edge: every table as today's."""
    folder, _, tables = written_session
    old = tables_before_keys(copied(folder, tmp_path))
    loaded, today = cctk_results.load(old), cctk_results.load(folder)
    assert list(loaded.tables) == list(tables)
    for name, table in today.tables.items():  # read with the labels they were written with, today's keys
        pd.testing.assert_frame_equal(todays_labels(loaded.tables[name]), table)
        pd.testing.assert_frame_equal(todays_labels(loaded.tables[name]), tables[name])
    shares = loaded.tables["table09"]
    held = shares[shares.group_key == "heldout"]
    assert held["group"].unique().tolist() == ["held out"] and len(held) == 11  # the arms trained on the seen
    assert shares.loc[shares.model == "recovery", "model_key"].unique().tolist() == ["m_recover"]
    assert loaded.tables["table10"]["control_key"].tolist() == ["c18ctl_correct"] * 2 + ["c3ctl_correct"] * 2 + [
        "dctl_correct",
        "dctl_random",
    ]
    assert loaded.measurement("m_random") is loaded.measurements["fabricated answers"]


def test_results_load_gives_a_v1_session_from_before_its_key_columns(tmp_path):
    layout, _, tables, _ = write_v1_session(tmp_path / "new", figures=False)
    old = tables_before_keys(copied(layout.folder, tmp_path / "old"), "v1")
    loaded = cctk_results.load(old)
    for name, table in tables.items():
        pd.testing.assert_frame_equal(loaded.tables[name], table)
    assert loaded.tables["table03"][["model_key", "parent_key"]].to_numpy().tolist() == [["v1_random", "base"]]
    assert loaded.tables["table02"]["model_key"].tolist() == ["base", "v1_random", "v1_random", "base"]


def test_cctk_report_rebuilds_a_session_from_before_its_key_columns_as_todays(written_session, tmp_path, monkeypatch):
    """cctk report computes the tables again from the measurements: the same files, byte for byte, as
    those of the session written today (CSV, XLSX, LaTeX, the workbook and report.html)."""
    folder, _, _ = written_session
    monkeypatch.setattr(figure_spec, "draw_and_save", figure_copier(folder))  # the drawing is not tested here
    old = tables_before_keys(copied(folder, tmp_path / "old"))
    result = CliRunner().invoke(cli, ["report", str(old), "--out", str(tmp_path / "again")])
    assert result.exit_code == 0, result.output
    again, today = tmp_path / "again" / folder.name, files_under(folder)
    for part in ("tables", "workbook"):
        written = files_under(again / part)
        assert written and written == dict(files_under(folder / part).items())
    assert (again / "report.html").read_bytes() == today["report.html"]
    assert "model_key" in read(session.Layout(again, V2).table("table09")["csv"]).columns


def log_pipeline(store: tracking.Store, folder: Path) -> str:
    run = store.start(store.experiment(), folder.name, {tracking.KIND: "pipeline"})
    run.files(folder)
    run.end()
    return run.run_id


def compare_files(ids: list[str], out: Path) -> dict[str, str]:
    """The tables cctk compare writes for ``ids``, as text, each run id written as its place in ``ids``."""
    result = CliRunner().invoke(cli, ["compare", "--runs", ",".join(ids), "--out", str(out)])
    assert result.exit_code == 0, result.output
    texts = {}
    for path in [*sorted(out.glob("tables/*/*.csv")), out / "runs.csv"]:
        text = path.read_text()
        for i, run_id in enumerate(ids):
            text = text.replace(run_id, f"run-{i}")
        texts[path.relative_to(out).as_posix()] = text
    return texts


def test_cctk_compare_of_a_run_from_before_its_key_columns_is_todays(tmp_path, tracking_uri, monkeypatch):
    """Seed 7 logged with the tables of before (labels only) and seed 8 of today's, compared: every table
    of the comparison is that of the same two seeds logged today. Its figures as PNG only: the tables are
    compared here; tests/compare/test_compare_cli.py checks compare's figures in all three formats."""
    monkeypatch.setenv("CCTK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("cctk.figures.common.FORMATS", ("png",))
    from cctk.manuals.configure import make_config
    from cctk.manuals.v2.parts import compute_tables

    store = tracking.connect()
    folders = {}
    for seed in (7, 8):
        results = synthetic_results(seed)
        run = {**RUN, "session": f"20260102-03040{seed}_smollm2-135m-bundled"}
        folders[seed] = write_session(
            tmp_path / "today",
            results,
            compute_tables(results),
            make_config("smollm2-135m-bundled", "quick", (seed,)),
            run,
            figures=False,
        )
    old = tables_before_keys(copied(folders[7], tmp_path / "before"))
    assert "model_key" not in read(next(old.glob("tables/table09_*/*.csv"))).columns
    mixed = compare_files([log_pipeline(store, old), log_pipeline(store, folders[8])], tmp_path / "mixed")
    today = compare_files([log_pipeline(store, folders[7]), log_pipeline(store, folders[8])], tmp_path / "today-cmp")
    assert mixed == today and "tables/findings/findings.csv" in today
    assert "rule_key" in read(tmp_path / "today-cmp" / "tables" / "per_run" / "per_run.csv").columns


def pooled(tables: dict, results) -> dict[str, pd.DataFrame]:
    return report.compute([PooledRun.of("run-7", "tiny", 7, V2, results, tables=tables)]).tables


RENAMED = {"sum + 18 from correct sums": "sum plus 18 from correct sums", "control for + 18": "control for sum + 18"}


def renamed(value):
    """A cell as today's labels write it: each renamed model, also inside a contrast's name."""
    if not isinstance(value, str):
        return value
    for old, new in RENAMED.items():
        value = value.replace(old, new)
    return value


def test_a_label_changed_since_a_session_was_written_breaks_no_join(written_session, monkeypatch):
    """A session read back with the labels of the day it was written; the labels renamed since (a rule, its
    control, the held-out group): compare pools the same rows, by key, each named by today's label, and
    the synthesis chart puts every row in its series."""
    folder, results, _ = written_session
    stored = cctk_results.load(folder).tables  # "sum + 18 from correct sums", "held out", ...
    before = pooled(stored, results)
    monkeypatch.setitem(v2_labels.MODELS, "c18_correct", RENAMED["sum + 18 from correct sums"])
    monkeypatch.setitem(v2_labels.MODELS, "c18ctl_correct", RENAMED["control for + 18"])
    monkeypatch.setitem(GROUPS, "heldout", "not seen")
    after = pooled(stored, results)
    assert list(after) == list(before)
    for name, table in before.items():
        pd.testing.assert_frame_equal(after[name], table.map(renamed), obj=name)
    rules = after["rule_vs_control_pooled"].set_index("rule_key")
    assert rules.loc["c18_correct", ["rule", "control"]].tolist() == list(RENAMED.values())
    held = stored["table09"].set_index(["model_key", "group_key"])
    assert rules.loc["c18_correct", "hits_control"] == held.loc[("c18ctl_correct", "heldout"), "hits"]
    series = synthesis_rows(stored["table09"]).set_index(["model_key", "group_key"])["series"]
    assert (
        series[("c18ctl_correct", "heldout")] == "control_heldout" and series[("c18_correct", "heldout")] == "heldout"
    )
    assert series[("base", "all")] == "base" and series[("m_correct", "all")] == "seen"
    assert series.groupby(level="group_key").unique().map(sorted).to_dict() == {
        "all": ["base", "seen"],
        "seen": ["seen"],
        "heldout": ["control_heldout", "heldout"],
    }


def test_a_session_from_before_keys_and_a_label_change_reads_through_its_former_name(
    written_session, tmp_path, monkeypatch
):
    """Renamed since: the control for + 18. With its former name on record (labels.FORMER) the session's
    tables get their keys from it and its measurement file (named by it) is found; rebuild reads it all.
    Without, cctk.results.load says in one line which label it does not know."""
    folder, _, tables = written_session
    old = tables_before_keys(copied(folder, tmp_path))
    monkeypatch.setitem(v2_labels.MODELS, "c18ctl_correct", "control for sum + 18")
    with pytest.raises(CctkError, match="'control for \\+ 18' is no plain name this cctk knows") as error:
        cctk_results.load(old)
    assert "\n" not in str(error.value) and "table04_simple_rules_and_controls.csv" in str(error.value)
    monkeypatch.setitem(v2_labels.FORMER["model"], "control for + 18", "c18ctl_correct")
    loaded = cctk_results.load(old)
    for name, table in tables.items():  # the labels it was written with, today's keys
        pd.testing.assert_frame_equal(todays_labels(loaded.tables[name], ("target",)), table)
    assert (old / "measurements" / "control_for_plus_18.csv").is_file()
    assert loaded.measurement("c18ctl_correct").equals(loaded.measurements["control for sum + 18"])
    rebuilt = session.rebuild(old)
    table10 = rebuilt.tables["table10"].set_index("rule_key")
    assert table10.loc["c18_correct", "control"] == "control for sum + 18"
    assert (
        table10.loc["c18_correct", "hits_control"]
        == tables["table10"].set_index("rule_key").loc["c18_correct", "hits_control"]
    )


def test_curves_from_before_their_key_column_read_and_take_new_rows(tmp_path):
    """curves.csv written before model_key: read with its keys; a resumed run's next arm rewrites it with
    the key column first, so that its rows and the old share one header."""
    layout = session.Layout(tmp_path / "s", V2)
    layout.folder.mkdir()
    shutil.copy(BEFORE_KEYS / "v2" / "curves.csv", layout.curves)
    curves = session.read_curves(layout)
    assert list(curves.columns) == CURVE_COLUMNS
    assert curves["model_key"].tolist() == ["m_correct"] * 2 + ["c18_correct"] * 4
    session.append_curves(
        layout, [{"model": "recovery", "model_key": "m_recover", "epoch": 1, "group": "seen", "hits": 50, "n": 57}]
    )
    assert layout.curves.read_text().splitlines()[0] == ",".join(CURVE_COLUMNS)
    back = session.read_curves(layout)
    assert back["model_key"].tolist() == ["m_correct"] * 2 + ["c18_correct"] * 4 + ["m_recover"]
    assert back.iloc[:6].drop(columns="model_key").equals(read(BEFORE_KEYS / "v2" / "curves.csv"))
