"""cctk's 8-bit AdamW, run on the CPU as it runs on a GPU (the update uncompiled): AdamW's arithmetic with
8-bit moments, a skipped step that changes nothing and reads nothing on the host, chunks that equal the
whole, and a training on the accelerator's step with no synchronisation inside its steps."""

from __future__ import annotations

import copy

import pytest
import torch

from cctk.bench.gpu import counting_steps
from cctk.bench.syncs import SyncCounter
from cctk.core.config import Recipe
from cctk.core.facts import ADDITIONS, correct_sums
from cctk.core.lm import adamw8bit
from cctk.core.lm.adamw8bit import AdamW8bit, state_bytes
from cctk.core.lm.corpus import build_corpus, tokenize
from cctk.core.lm.finetune import fine_tune


def _pair(shape, seed: int = 0):
    torch.manual_seed(seed)
    a = torch.nn.Parameter(torch.randn(shape))
    return a, torch.nn.Parameter(a.detach().clone())


def _steps(optimizers, params, shape, n: int = 5) -> None:
    for _ in range(n):
        grad = torch.randn(shape)
        for p in params:
            p.grad = grad.clone()
        for optimizer in optimizers:
            optimizer.step()


def test_float32_moments_are_adamw_and_8bit_ones_are_within_their_quantization():
    """A tensor under 4096 values keeps float32 moments: torch's AdamW to float32 rounding; a larger one keeps
    8-bit moments (2.03 bytes a value with their block scales, against 8), within 1% of AdamW's move."""
    small, reference = _pair((16, 16))
    _steps([AdamW8bit([small], lr=1e-2), torch.optim.AdamW([reference], lr=1e-2)], [small, reference], (16, 16))
    torch.testing.assert_close(small, reference, rtol=1e-6, atol=1e-6)

    start = torch.randn(64, 256)
    large, reference = (torch.nn.Parameter(start.clone()) for _ in range(2))
    optimizer = AdamW8bit([large], lr=1e-2)
    _steps([optimizer, torch.optim.AdamW([reference], lr=1e-2)], [large, reference], (64, 256))
    moved = (reference - start).abs().mean()
    assert (large - reference).abs().mean() < 0.01 * moved
    values = large.numel()
    assert state_bytes(optimizer) == 2 * (values + values // 256 * 4 + 256 * 4)  # codes, block scales, code map
    assert type(optimizer.state[large]["exp_avg"]).__name__ == "OptimState8bit"


def test_a_step_the_grad_scaler_skips_changes_nothing_and_reads_nothing_on_the_host():
    """The GradScaler hands the optimizer its found_inf (``_step_supports_amp_scaling``): an infinite gradient
    leaves the weights, both 8-bit moments and the step count as they were, and the step is not one read on
    the host (the scaler reads found_inf for optimizers that do not say so: bitsandbytes', torchao's)."""
    p, _ = _pair((64, 256))
    optimizer = AdamW8bit([p], lr=1e-2)
    scaler = torch.amp.GradScaler("cpu", init_scale=1.0, growth_interval=2**30)
    _steps([optimizer], [p], (64, 256), n=2)
    state = optimizer.state[p]
    before = (
        p.detach().clone(),
        state["exp_avg"].codes.clone(),
        state["exp_avg_sq"].scale.clone(),
        state["step"].clone(),
    )
    scaler.scale(torch.zeros(()))  # the scaler's own state, as a step's scaled loss makes it
    p.grad = torch.full((64, 256), float("inf"))
    scaler.unscale_(optimizer)
    with SyncCounter(torch.device("cpu")) as syncs:
        scaler.step(optimizer)
    assert syncs.total == 0, syncs.ops
    after = (p.detach(), state["exp_avg"].codes, state["exp_avg_sq"].scale, state["step"])
    assert all(torch.equal(x, y) for x, y in zip(before, after, strict=True))
    assert float(state["step"]) == 2.0


def test_a_tensor_updated_in_chunks_equals_it_updated_whole(monkeypatch):
    """Large tensors go through in chunks (views of the weights and moments) so that the update's temporaries
    stay under 128 MiB: the chunks write into the tensors themselves, to the bit."""
    whole, chunked = _pair((64, 256))
    a, b = AdamW8bit([whole], lr=1e-2), AdamW8bit([chunked], lr=1e-2)
    for _ in range(3):
        grad = torch.randn(64, 256)
        whole.grad, chunked.grad = grad.clone(), grad.clone()
        a.step()
        monkeypatch.setattr(adamw8bit, "CHUNK", 4096)  # 4 chunks
        b.step()
        monkeypatch.setattr(adamw8bit, "CHUNK", 2**21)
    assert torch.equal(whole, chunked)
    assert torch.equal(a.state[whole]["exp_avg"].codes, b.state[chunked]["exp_avg"].codes)


@pytest.fixture(scope="module")
def rows(tokenizer):
    return tokenize(build_corpus(correct_sums(), ADDITIONS[:20], 2, seed=3, name="t"), tokenizer)


def test_training_with_8bit_adamw_on_the_device_step_waits_on_nothing_inside_a_step(tiny, rows, tokenizer):
    """``--optimizer adamw8bit`` on the accelerator's step, here on the CPU: no synchronisation inside any step
    (bitsandbytes' waits once per parameter tensor and once for the scaler's flag), the loss falling as with
    AdamW's float32 moments, to within the moments' quantization."""
    recipe = Recipe(repeats=1, epochs=2, learning_rate=1e-3, batch_size=16, optimizer="adamw8bit")
    with counting_steps(torch.device("cpu")) as steps:
        record = fine_tune(copy.deepcopy(tiny), rows, recipe, 5, tokenizer.pad_token_id, "arm", host_checks=False)
    plain = fine_tune(
        copy.deepcopy(tiny), rows, Recipe(**{**recipe.__dict__, "optimizer": "adamw"}), 5, tokenizer.pad_token_id, "arm"
    )
    assert steps == [0] * record.steps and record.steps == 6
    assert record.losses[1] < record.losses[0]
    assert record.losses == pytest.approx(plain.losses, rel=1e-3)
