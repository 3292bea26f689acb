"""End-to-end checks on the bundled SmolLM2-135M (GGUF, Q4_1 dequantized to float32)."""
import numpy as np
import pytest

from cctk import load_model, measure
from cctk.facts import correct_sums
from cctk.readings import read
from cctk.scoring import measure_plain

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def bundled():
    return load_model("smollm2-135m-bundled")


@pytest.fixture(scope="module")
def table(bundled):
    return measure(*bundled)


def test_measure_equals_plain_loop_on_all_2835_rows(bundled, table):
    plain = measure_plain(*bundled)
    assert len(table) == 2835
    assert np.abs(table["logprob"].to_numpy() - plain["logprob"].to_numpy()).max() <= 1e-3


# Pinned from `measure` on the bundled model (transformers 5.24, torch 2.13 CPU, float32).
# A change in tokenization, masking, positions or the end marker moves these by far more than 1e-3.
GOLDEN = {
    (3, 5, 8): -4.426402,
    (3, 5, 18): -6.415199,
    (3, 5, 2): -6.74855,
    (9, 9, 18): -4.626058,
    (1, 1, 36): -8.400526,
}


def test_golden_logprobs(table):
    keyed = table.set_index(["a", "b", "candidate_value"])["logprob"]
    for key, expected in GOLDEN.items():
        assert keyed[key] == pytest.approx(expected, abs=1e-3), key


def test_golden_n_tokens_and_hits(table):
    keyed = table.set_index(["a", "b", "candidate_value"])["n_tokens"]
    assert keyed[(3, 5, 8)] == 3 and keyed[(3, 5, 18)] == 4
    assert read(table, correct_sums())["hit"].sum() == 9  # the base model is weak at arithmetic
