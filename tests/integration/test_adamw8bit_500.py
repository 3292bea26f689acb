"""500 steps of ``--optimizer adamw8bit`` (cctk's: torchao's ``AdamW8bit``) against torchao's own optimizer and
AdamW's float32 moments, on the correct sums with a 2-layer Llama of the retrained 275-token tokenizer (10 of its
20 tensors, 72% of its values, keep 8-bit moments; the embedding's 17,600 values are no multiple of 256 and keep
float32 ones), through ``fine_tune`` as a pipeline arm trains. Uncompiled, as on every CPU: 70 s of CPU time (4.3
minutes on two cores shared with other jobs), so with the integration runs.

Losses after 500 steps (the mean of the last 10 of 50 epochs, seed 5; issue 55, docs/gpus.md): AdamW (fused,
as ``fine_tune`` makes it) 0.129; cctk's and torchao's AdamW8bit 0.143, to the bit; the fork of torchao's update
cctk kept until #55 0.156. AdamW's own over seeds 5-9 (batch order; its foreach form): 0.111 to 0.144, within
13% of their middle. The tolerance against AdamW is 30%, about twice that spread: 8-bit moments are not
AdamW's, and the trajectories part after a few epochs (the quantization's error, then chaos), but an optimizer
whose 8-bit update were wrong (a moment's scale, the bias correction) would not land there."""

from __future__ import annotations

import copy

import pytest
import torch
import torchao.optim
from builders import small_tokenizer, tiny_model

from cctk.core.config import Recipe
from cctk.core.facts import ADDITIONS, correct_sums
from cctk.core.lm import finetune
from cctk.core.lm.adamw8bit import AdamW8bit, quantized
from cctk.core.lm.corpus import build_corpus, tokenize

pytestmark = pytest.mark.slow

RECIPE = Recipe(repeats=2, epochs=50, learning_rate=1e-3, batch_size=16, weight_decay=0.0, optimizer="adamw8bit")


@pytest.fixture(scope="module")
def arm(tokenizer):
    """A fresh 2-layer Llama and 160 rows of correct sums: 10 steps an epoch, 500 in 50 epochs."""
    small = small_tokenizer(tokenizer)
    rows = tokenize(build_corpus(correct_sums(), ADDITIONS, 2, seed=3, name="t"), small)[:160]
    return tiny_model("llama", len(small)), rows, small.pad_token_id


def _train(arm, recipe: Recipe, optimizer=None) -> tuple[float, ...]:
    """The epochs' mean losses of ``fine_tune`` with ``recipe``, its optimizer ``optimizer(params)`` where given."""
    model, rows, pad = arm
    with pytest.MonkeyPatch.context() as patch:
        if optimizer is not None:
            patch.setattr(finetune, "make_optimizer", lambda m, r: optimizer(list(m.parameters())))
        record = finetune.fine_tune(copy.deepcopy(model), rows, recipe, 5, pad, "arm")
    assert record.steps == 500
    return record.losses


def test_500_steps_of_8bit_adamw_land_with_torchaos_and_near_adamws(arm):
    model = arm[0]
    assert sum(quantized(p) for p in model.parameters()) == 10
    assert isinstance(finetune.make_optimizer(model, RECIPE), AdamW8bit)  # what ``ours`` trains with
    ours = _train(arm, RECIPE)
    with torch.compiler.set_stance("force_eager"):  # torchao compiles everywhere; uncompiled, as ours here
        theirs = _train(arm, RECIPE, lambda params: torchao.optim.AdamW8bit(params, lr=1e-3, weight_decay=0.0))
    adamw = _train(arm, Recipe(**{**RECIPE.__dict__, "optimizer": "adamw"}))
    assert ours == theirs  # torchao's optimizer through fine_tune's own choice of it, to the bit
    assert ours[:3] == pytest.approx(adamw[:3], rel=1e-3)  # the first epochs: the moments' quantization only
    tail, tail_adamw = sum(ours[-10:]) / 10, sum(adamw[-10:]) / 10
    assert tail < 0.05 * ours[0]  # learnt: from 4.8 to below 0.24
    assert tail == pytest.approx(tail_adamw, rel=0.3)
