"""Runs the landed code wrote before issue 45 (tests/data/landed_3c00e48: a v1 and a v2 smoke run of the tiny model,
tracked in an embedded store) read, re-render and compare with today's code as they did then: run_info.json read
and written back byte for byte, every table rebuilt by ``cctk report`` byte for byte, ``cctk.results.load`` of the
folder and of the run id alike, ``cctk compare`` the same tables. A resume of its killed run is
tests/integration/test_landed_resume.py's."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import openpyxl
import pandas as pd
import pytest
from builders import Landed
from click.testing import CliRunner

from cctk import results
from cctk.cli.main import cli
from cctk.figures import spec as figure_spec
from cctk.store import session


@pytest.fixture(scope="module")
def landed(tmp_path_factory) -> Landed:
    return Landed(tmp_path_factory.mktemp("landed"))


@pytest.fixture
def store(landed, tmp_path, monkeypatch) -> Landed:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", landed.uri)
    monkeypatch.setenv("CCTK_CACHE", str(tmp_path / "cache"))
    return landed


def files_under(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(("name", "protocol"), [(Landed.V1, "v1"), (Landed.V2, "v2")])
def test_run_info_reads_and_writes_back_byte_for_byte(landed, name, protocol):
    folder = landed.session(name)
    info = session.read_run_info(folder)
    assert info.protocol == protocol and info.config.protocol == protocol
    text = (folder / session.RUN_INFO).read_text()
    assert json.dumps(session.info_json(info), indent=2) + "\n" == text


def test_results_load_reads_each_session_and_its_run(store):
    v1 = results.load(store.session(Landed.V1))
    assert v1.protocol == "v1" and v1.parts == () and v1.info.seeds.values == (42,)
    assert list(v1.tables) == ["table01", "table02", "table03", "table04"]
    assert sorted(v1.measurements) == ["base model", "fabricated answers"]
    v2 = results.load(store.session(Landed.V2))
    assert v2.protocol == "v2" and v2.parts == ("A",) and v2.info.config.options.holdout == 0.3
    assert list(v2.tables) == ["table01", "table09", "table11"]
    assert list(v2.model_names) == ["base", "m_correct", "m_random"]
    for name, run_id, folder in ((Landed.V1, Landed.RUN_V1, v1), (Landed.V2, Landed.RUN_V2, v2)):
        by_id = results.load(run_id)
        assert by_id.info == folder.info, name
        for table, frame in folder.tables.items():
            pd.testing.assert_frame_equal(by_id.tables[table], frame)
        for model, frame in folder.measurements.items():
            pd.testing.assert_frame_equal(by_id.measurements[model], frame)


def placeholder(spec: figure_spec.Spec, out: Path) -> list[Path]:
    """A figure's PNG of one pixel (the reports embed it), not drawn."""
    from PIL import Image

    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{spec.stem}.png"
    Image.new("RGB", (1, 1)).save(path)
    return [path]


PEAKS = ("peak_gpu_memory_bytes", "peak_cpu_memory_bytes")


def cells(path: str, data: bytes) -> list[list[str | float | None]]:
    """A CSV's or XLSX's cells, sheet after sheet, as read: their text, or the workbook's values."""
    if path.endswith(".csv"):
        return [list(row) for row in csv.reader(io.StringIO(data.decode()))]
    book = openpyxl.load_workbook(io.BytesIO(data))
    return [[name, *row] for name in book.sheetnames for row in book[name].iter_rows(values_only=True)]


def peaks_emptied(rows: list[list[str | float | None]]) -> list[list[str | float | None]]:
    """The landed cells with their peak memory's 0 (not measured) as the empty cell today writes for it: a
    CSV's "", a workbook's None. A header row names the columns of the rows below it."""
    out, columns = [], set()
    for row in rows:
        if any(peak in row for peak in PEAKS):
            columns = {i for i, value in enumerate(row) if value in PEAKS}
            out.append(row)
            continue
        out.append(
            [("" if isinstance(v, str) else None) if i in columns and v in ("0", 0) else v for i, v in enumerate(row)]
        )
    return out


@pytest.mark.parametrize("name", [Landed.V1, Landed.V2])
def test_cctk_report_rebuilds_every_table_byte_for_byte(landed, name, tmp_path, monkeypatch):
    """Tables, workbook and run report's tables computed again from the measurements: the files the landed code
    wrote (the figures are not drawn here: the runs had none, and the drawing is not what is tested). The .tex
    files are left out: since 2026-12-05 they are the paper's LaTeX (one writer), set from these same tables.
    Since 2026-12-07 a peak memory not measured (the GPU's, on these CPU runs) is an empty cell, not the landed
    0: a file holding one differs in those cells alone, every other cell as landed."""
    monkeypatch.setattr(figure_spec, "draw_and_save", placeholder)
    folder = landed.session(name)
    done = CliRunner().invoke(cli, ["report", str(folder), "--out", str(tmp_path)])
    assert done.exit_code == 0, done.output
    emptied = []
    for part in ("tables", "workbook"):
        again, before = files_under(tmp_path / name / part), files_under(folder / part)
        assert again.keys() == before.keys(), part
        again, before = ({p: b for p, b in files.items() if not p.endswith(".tex")} for files in (again, before))
        assert again, part
        for path, data in before.items():
            if again[path] != data:
                assert cells(path, again[path]) == peaks_emptied(cells(path, data)) != cells(path, data), path
                emptied.append(path)
    table = {Landed.V1: "table03_fine_tuning_run", Landed.V2: "table11_fine_tuning_runs"}[name]
    assert sorted(emptied) == [f"{name}.xlsx"] + [f"{table}/{table}.{ext}" for ext in ("csv", "xlsx")]


@pytest.mark.parametrize(("protocol", "run_id"), [("v1", Landed.RUN_V1), ("v2", Landed.RUN_V2)])
def test_cctk_compare_gives_the_landed_tables(store, protocol, run_id, tmp_path):
    out = tmp_path / "compare"
    done = CliRunner().invoke(cli, ["compare", "--runs", run_id, "--out", str(out)])
    assert done.exit_code == 0, done.output
    landed = files_under(store.root / "compare" / protocol)
    three = "tables/v1_three_numbers/v1_three_numbers.csv"
    if three in landed:  # since stop 62 its mean's t interval is named mean_lo, mean_hi (lo, hi read as the hits'):
        header, rest = landed[three].split(b"\n", 1)  # the values are the landed ones, byte for byte
        assert header == b"base_model,number,runs,mean,lo,hi,hits,n"
        landed[three] = b"base_model,number,runs,mean,mean_lo,mean_hi,hits,n\n" + rest
    written = {p: b for p, b in files_under(out).items() if p.endswith(".csv")}
    assert written == landed
