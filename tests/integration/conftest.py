"""Fixtures of the integration tests alone."""

import os

import pytest
from servers import CctkForks


@pytest.fixture(scope="module")
def forks():
    """A module's ``cctk`` processes, forked from one that imported what they import (``servers.CctkForks``): the
    stage walks', resume after kill -9's, and the sweeps' commands that run to their end."""
    server = CctkForks({**os.environ, "PYTHONPATH": os.getcwd()})
    yield server
    server.close()
