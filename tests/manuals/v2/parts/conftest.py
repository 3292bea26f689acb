"""Fixtures of the experiment tests: the hand-made study over seed 12345 (``builders.design``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from builders import build_study, design, hand_table


@pytest.fixture(scope="session")
def study() -> SimpleNamespace:
    """The hand-made study: ``results`` (fourteen hand tables over seed 12345), ``choices`` (top choice
    of every model in every addition) and ``tables`` (the eleven tables computed from them)."""
    from cctk.manuals.v2.parts import compute_tables

    results = build_study()
    return SimpleNamespace(
        results=results, inputs=results.inputs, choices=design(results.inputs), tables=compute_tables(results)
    )


@pytest.fixture(scope="session")
def make_table():
    """``make_table(choices, p=0.66, offset=0.0)``: see ``builders.hand_table``."""
    return hand_table
