"""A stopped command exits as a shell expects (128 + the signal) after its runs ended KILLED, and an arm
stopped mid-training says so (issue 31)."""

import pytest
from click.testing import CliRunner

from cctk.cli.main import cli
from cctk.core.errors import CctkError, Terminated
from cctk.core.progress import Progress
from cctk.manuals.v2.config import PROFILES
from cctk.pipeline import stages as pipeline
from cctk.store import tracking


@pytest.mark.parametrize(
    ("stop", "code", "line"),
    [
        (KeyboardInterrupt(), 130, "Interrupted (Ctrl-C)."),
        (Terminated("stopped by signal 15"), 143, "Stopped (SIGTERM)."),
    ],
)
def test_a_stopped_run_exits_130_or_143(stop, code, line, monkeypatch, tmp_path):
    def stopped(*args, **kwargs):
        raise stop

    monkeypatch.setattr(pipeline, "run", stopped)
    result = CliRunner().invoke(cli, ["run", "--out", str(tmp_path)])
    assert result.exit_code == code and result.output.strip() == line


def test_an_interrupted_arm_says_so():
    said = []
    progress = Progress(13, said.append)
    on_step = progress.arm(2, "fabricated answers", list(range(8)), PROFILES["smoke"])
    for step in range(3):
        on_step(0, step, 9.0 - step)
    progress.close(finished=False)
    total = PROFILES["smoke"].steps(8)
    assert said == [said[0]] and said[0].startswith(
        f"arm 2/13 fabricated answers: interrupted after 3 of {total} steps"
    )


@pytest.mark.parametrize(
    ("leave", "status", "code", "last"),
    [
        (Terminated("stopped by signal 15"), "KILLED", 143, "Stopped (SIGTERM)."),
        (CctkError("the arm's corpus is empty"), "FAILED", 1, "Error: the arm's corpus is empty"),
        (None, "FINISHED", 1, None),
    ],
)
def test_a_run_the_store_would_not_end_is_named_then_the_command_ends_as_it_was(
    leave, status, code, last, monkeypatch, tmp_path, tracking_uri
):
    """The store refused the end's write (both tries): the run left RUNNING is one line naming it, then the
    command ends as it was ending: a stopped one exits 143, a failed one says why (not the store's traceback)."""
    store = tracking.connect(tracking_uri)

    def refusing(self, status="FINISHED"):
        raise RuntimeError("(sqlite3.OperationalError) database is locked")

    def ran(*args, **kwargs):
        with store.run("pipeline", "session", {}):
            if leave is not None:
                raise leave

    monkeypatch.setattr(tracking.LiveRun, "end", refusing)
    monkeypatch.setattr(pipeline, "run", ran)
    result = CliRunner().invoke(cli, ["run", "--out", str(tmp_path)])
    (left,) = store.search([store.experiment()], "")
    assert left.status == "RUNNING" and result.exit_code == code
    said = (
        f"Error: run {left.run_id} could not be ended {status}: the store refused the write twice (RuntimeError: "
        f"(sqlite3.OperationalError) database is locked); it shows RUNNING until it is resumed (cctk run --resume "
        f"{left.run_id}) or the store takes the write"
    )
    assert result.output.splitlines() == [said] + ([last] if last else [])


def test_a_stop_while_the_server_is_gone_names_the_runs_left_and_exits_130(monkeypatch, tmp_path):
    def stopped_in_an_outage(*args, **kwargs):
        raise tracking.Unreachable(
            "the tracking server at http://s stopped answering", ("r1", "r0"), KeyboardInterrupt()
        )

    monkeypatch.setattr(pipeline, "run", stopped_in_an_outage)
    result = CliRunner().invoke(cli, ["run", "--out", str(tmp_path)])
    assert result.exit_code == 130
    said = (
        "Error: the tracking server at http://s stopped answering; runs r1, r0 could not be ended there and stay "
        "RUNNING: resume once the server answers (cctk run --resume RUN_ID for a pipeline)"
    )
    assert result.output.splitlines() == [said, "Interrupted (Ctrl-C)."]
