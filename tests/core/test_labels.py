"""The words every manual shares (``cctk.core.labels``)."""

from cctk.core.labels import counted


def test_a_count_of_one_is_singular():
    """Before: `cctk compare --runs ID` said "comparing 1 pipelines" and "1 tables and 0 figures"."""
    assert [counted(n, "table") for n in (0, 1, 2, 11)] == ["0 tables", "1 table", "2 tables", "11 tables"]
