"""``python -m cctk.bench gpu`` on the cards users have, planned on this CPU: a shape that does not fit a
card is reported, not trained (the check died with a traceback on cards under ~23 GiB), one that fits
with a variant of the recipe is trained with it, and the syncs of a step are counted per precision and
optimizer."""

import dataclasses

import pytest
import torch

from cctk.bench import gpu
from cctk.core.lm import memory, models
from cctk.manuals.v2.config import PROFILES

PAPER = dataclasses.replace(PROFILES["paper"], epochs=1)


def plan(key: str, card: memory.Room) -> memory.Plan:
    return memory.Plan(key, memory.Shape.of_config(models.model_config(key)), PAPER, 16, card)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("smollm2-135m", ("float32", "adamw")),
        ("qwen2.5-0.5b", ("float32", "adamw")),
        ("tinyllama-1.1b", ("float32", "adamw8bit")),
        ("phi-1.5", None),  # 8-bit AdamW's 14.9 GiB exceeds the 13.5 GiB a T4 leaves past its margin
    ],
)
def test_each_shape_of_a_16_gb_card_gets_what_fits_it(key, expected):
    t4 = memory.card_room(14.75, bf16=False, name="cuda:0 (Tesla T4)")
    chosen = gpu.fitting_recipe(plan(key, t4))
    assert (chosen.precision, chosen.optimizer) == expected if expected else chosen is None


def test_every_shape_fits_an_80_gb_card_as_it_is():
    card = memory.card_room(79.1, bf16=True)
    assert all(gpu.fitting_recipe(plan(key, card)) == PAPER for key in gpu.SHAPES["cuda"])


def test_a_shape_that_does_not_fit_is_reported_and_never_built(monkeypatch, tokenizer):
    """A host with 1 GiB free: smollm2-135m's paper recipe is reported with the planner's line; no model
    is built and nothing is trained."""
    from cctk.core.facts import ADDITIONS, correct_sums
    from cctk.core.lm.corpus import build_corpus, tokenize

    def never(*args, **kwargs):
        raise AssertionError("a shape that does not fit was built")

    monkeypatch.setattr(gpu, "_random_model", never)
    rows = tokenize(build_corpus(correct_sums(), ADDITIONS, 1, seed=1, name="gpu"), tokenizer)
    small = memory.Room(memory.GIB, memory.GIB, "cpu", "cpu")
    ((label, line),) = gpu._memory(torch.device("cpu"), "smollm2-135m", rows, tokenizer.pad_token_id, small).items()
    assert label == "memory smollm2-135m (paper recipe)"
    assert line.startswith("does not fit: smollm2-135m with this recipe (float32, adamw, batch 8) needs about ")
    assert "in host memory" in line and "1.0 GiB free" in line


def test_a_cpu_steps_every_recipe_it_takes_and_syncs_none_inside_a_step(tokenizer):
    """On a CPU the table has float32 AdamW (and bf16 where the CPU has it natively): the accelerator's
    step, counted with the operations that would wait on a GPU, waits on none inside a step."""
    from cctk.core.facts import ADDITIONS, correct_sums
    from cctk.core.lm.corpus import build_corpus, tokenize

    rows = tokenize(build_corpus(correct_sums(), ADDITIONS[:32], 1, seed=1, name="gpu"), tokenizer)
    table = gpu._syncs_per_step(torch.device("cpu"), tokenizer, rows)
    assert "syncs in a training step, float32 adamw" in table
    assert all(k.startswith("syncs in a training step, ") and k.split(", ")[1].split()[1] == "adamw" for k in table)
    assert all(v.startswith("at most 0 (0 over 4 steps of a 2-layer model of ") for v in table.values()), table


def test_copies_to_the_host_are_counted_once_with_what_is_read_from_them():
    """``.cpu()`` and ``.to("cpu")`` wait for an accelerator as ``.item()`` does: the counter counts them on the
    CPU too (it could not see them: a per-step ``.cpu()`` would have passed), and a value read from such a
    copy is not counted again; a move to a tensor's own device or dtype is no copy to the host."""
    from cctk.bench.syncs import SyncCounter

    x = torch.randn(4)
    with SyncCounter(torch.device("cpu")) as syncs:
        x.cpu()
        x.to("cpu")
        x.to(device="cpu").tolist()
        x.to(torch.float64)
        x.to(x.device)
        x.sum().item()
    assert dict(syncs.ops) == {"cpu": 1, "to cpu": 2, "_local_scalar_dense": 1} and syncs.total == 4
    assert torch.Tensor.cpu is torch._C.TensorBase.cpu and torch.Tensor.to is torch._C.TensorBase.to  # restored


@pytest.fixture(scope="module")
def rows(tokenizer):
    from cctk.core.facts import ADDITIONS, correct_sums
    from cctk.core.lm.corpus import build_corpus, tokenize

    return tokenize(build_corpus(correct_sums(), ADDITIONS[:20], 2, seed=3, name="t"), tokenizer)


@pytest.mark.parametrize(("packing", "per_step"), [(True, 0), (False, 2)])
def test_reads_of_a_padded_and_a_packed_step(tiny, tokenizer, rows, packing, per_step):
    """Finding 6 of #46: Transformers 5.24 reads a padded batch's padding mask twice a step (masking_utils:
    whether the causal mask may be skipped, ``fast_all``), a batch without padding once; a packed batch, whose
    4D mask cctk builds, not at all. docs/gpus.md said "at most one"."""
    import copy

    from cctk.core.config import Recipe
    from cctk.core.lm.finetune import fine_tune

    recipe = Recipe(repeats=1, epochs=1, learning_rate=1e-3, batch_size=16)
    with gpu.counting_steps(torch.device("cpu")) as steps:
        fine_tune(
            copy.deepcopy(tiny), rows, recipe, 5, tokenizer.pad_token_id, "arm", host_checks=False, pack_batches=packing
        )
    assert steps == [per_step] * 3


def test_a_copy_to_the_host_added_to_the_step_is_caught(tiny, tokenizer, rows, monkeypatch):
    import copy

    from cctk.core.config import Recipe
    from cctk.core.lm import finetune

    real = finetune._DeviceGuard.step

    def step_that_reads(guard, *args, **kwargs):
        loss = real(guard, *args, **kwargs)
        loss.cpu()  # e.g. a progress bar's loss, read at every step
        return loss

    monkeypatch.setattr(finetune._DeviceGuard, "step", step_that_reads)
    recipe = Recipe(repeats=1, epochs=1, learning_rate=1e-3, batch_size=16)
    with gpu.counting_steps(torch.device("cpu")) as steps:
        finetune.fine_tune(copy.deepcopy(tiny), rows, recipe, 5, tokenizer.pad_token_id, "arm", host_checks=False)
    assert steps == [1] * 3
