"""KR-Test's fixtures: its text is English prose, so its tiny model carries the bundled tokenizer itself."""

import pytest


@pytest.fixture(scope="session")
def tiny_dir(tiny_dir_bundled):
    """The tiny Llama with the bundled tokenizer (49,152 tokens): a passage and its items split as they would for
    the bundled model, not byte by byte."""
    return tiny_dir_bundled
