"""cctk run --protocol: bad input fails in one line before any folder or run exists; MLproject passes it."""

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cctk.cli.main import cli

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--protocol", "v3"], "unknown protocol 'v3'; choose one of: v2 (manual 2.0.0), v1 (manual 1.0.0)"),
        (
            ["--protocol", "v1", "--holdout", "0.2"],
            "--holdout has no meaning under --protocol v1: it is manual 2.0.0 (--protocol v2)'s",
        ),
        (["--protocol", "v1", "--seed", "1,2"], "--protocol v1 takes one seed (42 if omitted), got '1,2'"),
        (
            ["--protocol", "v1", "--resume", "abc"],
            "--resume continues the pipelines of a manual that resumes; a protocol v1 run is short: start it again",
        ),
        (
            ["--protocol", "v1", "--grad-clip", "-1"],
            "recipe value grad_clip=-1.0 is out of range: must be >= 0 (0 = no clipping)",
        ),
        (["--protocol", "v1", "--profile", "fast"], "unknown profile 'fast'; choose one of: auto, paper, quick, smoke"),
        (["--protocol", "v1", "--model", "no-such-model"], "unknown model 'no-such-model'"),
    ],
)
def test_bad_input_fails_in_one_line(args, message, tmp_path, tracking_uri):
    out = tmp_path / "o"
    result = CliRunner().invoke(cli, ["run", *args, "--out", str(out)])
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {message}"), result.output
    assert not out.exists()


def test_mlproject_main_accepts_protocol():
    main = yaml.safe_load((ROOT / "MLproject").read_text())["entry_points"]["main"]
    assert main["parameters"]["protocol"]["default"] == "v2"
    assert "--protocol {protocol}" in main["command"]
