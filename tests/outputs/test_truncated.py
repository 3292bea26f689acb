"""``cctk report`` on a session whose files were cut short fails in one line naming the file (issue 31)."""

import pytest
from click.testing import CliRunner

from cctk.cli.main import cli
from cctk.core.errors import CctkError
from cctk.store import session as session_files


@pytest.fixture
def copied(written_session, tmp_path):
    """The inputs of the written session, copied (the shared folder stays whole)."""
    folder = written_session[0]
    return session_files.copy_inputs(session_files.layout_of(folder), tmp_path / "copy").folder


def _cut(path, keep: float) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def _report_fails(folder, name: str) -> None:
    result = CliRunner().invoke(cli, ["report", str(folder)])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith("Error: ") and name in line, line


def test_a_truncated_run_info_fails_in_one_line(copied):
    _cut(copied / "run_info.json", 0.5)
    _report_fails(copied, "run_info.json is not a readable run record")


@pytest.mark.parametrize("keep", [0.0, 0.5, 0.9999])
def test_a_truncated_measurement_fails_in_one_line(copied, keep):
    path = sorted((copied / "measurements").glob("*.csv"))[0]
    _cut(path, keep)
    _report_fails(copied, path.name)


def test_a_measurement_cut_at_a_row_end_is_incomplete(copied):
    path = sorted((copied / "measurements").glob("*.csv"))[0]
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-40]))
    with pytest.raises(CctkError, match=r"is incomplete \(.* rows, 80 of 81 additions\): it was cut short"):
        session_files.read_measurement(path)
