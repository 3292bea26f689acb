"""The journal's rules for a folder opened again (``journal.open_journal``), on hand-written journals."""

import json

import pytest

from cctk.core.errors import CctkError
from cctk.krtest.generation.journal import JOURNAL, ORACLE, open_journal

TEACHER = {"teacher": {"kind": "endpoint", "model": "t"}, "seed": 0}
OLD, NEW = {"kind": "local", "model": "a"}, {"kind": "local", "model": "b"}


def written(folder, settings, *units):
    """A journal of ``settings`` with ``units`` (stage or None, unit) answered, not finished."""
    folder.mkdir(exist_ok=True)
    lines = [{"header": {"settings": settings, "run_id": "r"}}]
    lines += [{"unit": n, **({"stage": stage} if stage else {}), "reply": f"{stage}{n}"} for stage, n in units]
    (folder / JOURNAL).write_text("".join(json.dumps(x) + "\n" for x in lines))
    return folder


def opened(folder, settings):
    return open_journal(folder, settings, (), False, "generation", {ORACLE: ORACLE})


def test_an_oracle_changed_or_added_before_it_answered_continues_with_the_teachers_replies(tmp_path):
    folder = written(tmp_path / "changed", {**TEACHER, ORACLE: OLD}, (None, 0), (None, 1))
    journal = opened(folder, {**TEACHER, ORACLE: NEW})
    assert sorted(journal.entries) == [0, 1] and journal.header == {"settings": {**TEACHER, ORACLE: NEW}, "run_id": "r"}
    assert json.loads((folder / JOURNAL).read_text().splitlines()[-1]) == {"header": journal.header}
    assert opened(folder, {**TEACHER, ORACLE: NEW}).header == journal.header  # the last header holds
    back = opened(folder, {**TEACHER, ORACLE: OLD})  # and back again: the oracle has still answered nothing
    assert back.header["settings"][ORACLE] == OLD and len((folder / JOURNAL).read_text().splitlines()) == 5
    added = opened(written(tmp_path / "added", TEACHER, (None, 0)), {**TEACHER, ORACLE: NEW})
    assert sorted(added.entries) == [0] and added.header["settings"][ORACLE] == NEW


@pytest.mark.parametrize(
    ("before", "units", "now", "key"),
    [
        ({**TEACHER, ORACLE: OLD}, [(None, 0)], TEACHER, "oracle"),  # dropped: its items would pass unchecked
        ({**TEACHER, ORACLE: OLD}, [(None, 0), (ORACLE, 0)], {**TEACHER, ORACLE: NEW}, "oracle"),  # it answered
        ({**TEACHER, ORACLE: OLD}, [(None, 0)], {**TEACHER, "seed": 1, ORACLE: NEW}, "seed"),  # the teacher's too
    ],
)
def test_other_changes_to_an_answered_journal_are_refused(tmp_path, before, units, now, key):
    folder = written(tmp_path / "out", before, *units)
    with pytest.raises(CctkError, match=rf"holds an unfinished generation with other settings \({key}: "):
        opened(folder, now)
    assert len((folder / JOURNAL).read_text().splitlines()) == 1 + len(units)  # nothing written


def test_other_settings_with_nothing_answered_start_afresh(tmp_path):
    folder = written(tmp_path / "out", {**TEACHER, "seed": 1})
    journal = opened(folder, TEACHER)
    assert journal.header is None and not (folder / JOURNAL).exists()
