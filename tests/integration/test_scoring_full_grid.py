"""The packed scorer against the manual's loop on every row: 81 additions x 35 candidates, one
forward pass per row in the loop (two to five minutes on two shared cores; the fast suite reads six additions)."""
import numpy as np

from cctk.readings import COLUMNS
from cctk.scoring import measure, measure_plain


def test_measure_equals_plain_loop_on_tiny_llama_on_every_row(tiny, tokenizer):
    fast = measure(tiny, tokenizer)
    plain = measure_plain(tiny, tokenizer)
    assert list(fast.columns) == COLUMNS
    assert len(fast) == 81 * 35
    assert np.abs(fast["logprob"].to_numpy() - plain["logprob"].to_numpy()).max() <= 1e-4
    assert (fast[["a", "b", "candidate_value", "n_tokens"]] == plain[["a", "b", "candidate_value", "n_tokens"]]).all().all()
