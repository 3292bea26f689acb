"""The packed scorer against the manual's loop on every row: 81 additions x 35 candidates, one
forward pass per row in the loop (the fast suite reads six additions).

The loop runs on one thread: its 2835 passes are a few small matrix products each, and two OpenMP threads
that spin at their barriers, on two cores shared with another job, took 103 s for it here, one thread 8 s."""

import numpy as np
import pytest
import torch

from cctk.core.lm.scoring import measure, measure_plain
from cctk.core.readings import COLUMNS

pytestmark = pytest.mark.slow


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_measure_equals_plain_loop_on_tiny_llama_on_every_row(tiny, tokenizer, one_thread):
    fast = measure(tiny, tokenizer)
    plain = measure_plain(tiny, tokenizer)
    assert list(fast.columns) == COLUMNS
    assert len(fast) == 81 * 35
    assert np.abs(fast["logprob"].to_numpy() - plain["logprob"].to_numpy()).max() <= 1e-4
    assert (
        (fast[["a", "b", "candidate_value", "n_tokens"]] == plain[["a", "b", "candidate_value", "n_tokens"]])
        .all()
        .all()
    )
