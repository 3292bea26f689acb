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
    ("key", "bitsandbytes", "expected"),
    [
        ("smollm2-135m", False, ("float32", "adamw")),
        ("qwen2.5-0.5b", False, ("float32", "adamw")),
        ("phi-1.5", True, ("float32", "adamw8bit")),  # 13.8 GiB of a T4's 14.2
        ("phi-1.5", False, None),  # without bitsandbytes nothing fits: fp16's half copies need more than float32
    ],
)
def test_each_shape_of_a_16_gb_card_gets_what_fits_it(key, bitsandbytes, expected):
    t4 = memory.card_room(14.75, bf16=False, bitsandbytes=bitsandbytes, name="cuda:0 (Tesla T4)")
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
