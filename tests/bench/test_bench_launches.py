"""How launch-bound a step is (``cctk.bench.launches``): the operations a step dispatches, counted inside the
accelerator's step, and the line ``bench gpu`` prints."""

import pytest
from builders import tiny_model

from cctk.bench import launches
from cctk.core.config import Recipe

RECIPE = Recipe(repeats=1, epochs=1, learning_rate=1e-4, batch_size=8)


@pytest.fixture(scope="module")
def rows(tokenizer):
    from cctk.core.facts import ADDITIONS, correct_sums
    from cctk.core.lm.corpus import build_corpus, tokenize

    return tokenize(build_corpus(correct_sums(), ADDITIONS[:32], 1, seed=1, name="launches"), tokenizer)


@pytest.mark.slow  # 12 epochs of three models, ~15 s; the CPU line itself runs in make test's first-contact test
def test_each_layer_adds_the_same_operations_to_a_step(tokenizer, rows):
    """A block of the model is the same operations whichever it is, so the counts of 1, 2 and 3 blocks line
    up exactly (233 a block on this CPU), and a step has more than its blocks (embedding, head, optimizer)."""
    found = [
        launches.step_launches(tiny_model("llama", len(tokenizer), layers=n), rows, RECIPE, tokenizer.pad_token_id)
        for n in (1, 2, 3)
    ]
    assert [f.steps for f in found] == [4, 4, 4] and all(f.kernels is None and f.busy is None for f in found)
    ops = [f.operations for f in found]
    assert ops[2] - ops[1] == ops[1] - ops[0] > 100 and ops[0] > ops[1] - ops[0]  # a block, and what is not one
    assert found[0].line() == f"{ops[0]:.0f} operations and {found[0].seconds * 1000:.1f} ms a step over 4 steps"


def test_a_cuda_step_says_its_kernels_and_how_busy_they_keep_the_device():
    cuda = launches.Launches(11, 3012.4, 0.0125, 2900.2, 0.005)
    assert cuda.busy == pytest.approx(0.4)
    assert cuda.line() == "3012 operations and 12.5 ms a step over 11 steps; 2900 kernels a step, busy 40% of it"
    unseen = launches.Launches(11, 3012.4, 0.0125, 0.0, 0.0)
    assert unseen.line() == "3012 operations and 12.5 ms a step over 11 steps; the profiler saw no CUDA kernel"
