"""cctk's 8-bit AdamW (torchao's ``AdamW8bit``), run on the CPU as it runs on a GPU but uncompiled: AdamW's
arithmetic with 8-bit moments, torchao's own steps to the bit, compiled on CUDA only, a step the GradScaler
skips that changes nothing, and a training on the accelerator's step with one synchronisation a step (the
GradScaler's read of ``found_inf``). Its 500 steps against torchao's and AdamW's:
tests/integration/test_adamw8bit_500.py."""

from __future__ import annotations

import copy
import shutil
import warnings

import pytest
import torch

from cctk.bench.gpu import counting_steps
from cctk.bench.syncs import SyncCounter
from cctk.core.config import Recipe
from cctk.core.facts import ADDITIONS, correct_sums
from cctk.core.lm.adamw8bit import AdamW8bit, quantized, state_bytes
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


def test_its_steps_are_torchaos_own_to_the_bit_and_compiled_on_cuda_only(monkeypatch):
    """cctk adds nothing to torchao's update: the same weights and codes after 3 steps as torchao's AdamW8bit
    (both uncompiled here); its update compiled where the parameters are on CUDA (or ``compiled=True``), run
    as it is elsewhere (compiling on a CPU takes a C++ compiler and a minute)."""
    import torchao.optim

    ours, theirs = _pair((64, 256))
    a, b = AdamW8bit([ours], lr=1e-2), torchao.optim.AdamW8bit([theirs], lr=1e-2)
    with torch.compiler.set_stance("force_eager"):
        _steps([a, b], [ours, theirs], (64, 256), n=3)
    assert torch.equal(ours, theirs)
    assert torch.equal(a.state[ours]["exp_avg"].codes, b.state[theirs]["exp_avg"].codes)
    assert quantized(ours) and not quantized(torch.zeros(64, 63))  # 4032 values: float32 moments

    stances = []
    real = torch.compiler.set_stance
    monkeypatch.setattr(torch.compiler, "set_stance", lambda stance: stances.append(stance) or real("force_eager"))
    a.step()
    AdamW8bit([ours], compiled=True).step()
    monkeypatch.setattr(AdamW8bit, "_on_cuda", lambda self: True)  # parameters on CUDA
    a.step()
    assert stances == ["force_eager", "default", "default"]


@pytest.mark.slow  # compiling takes a C++ compiler and 20-60 s on two cores
@pytest.mark.skipif(
    not shutil.which("g++") and not shutil.which("c++"), reason="Inductor's CPU backend needs a C++ compiler"
)
def test_the_compiled_update_traces_and_steps_as_the_uncompiled_one():
    """Issue 55: the compiled path (torchao's update under ``torch.compile``, as on CUDA) had never run. Here
    Inductor compiles it for the CPU: the trace a GPU compiles too, with another code generator. After 3 steps
    the 8-bit codes are the uncompiled ones and the weights within a float32 rounding of theirs."""
    compiled, eager = _pair((64, 256))
    start = eager.detach().clone()
    a, b = AdamW8bit([compiled], lr=1e-2, compiled=True), AdamW8bit([eager], lr=1e-2, compiled=False)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        _steps([a, b], [compiled, eager], (64, 256), n=3)
    assert not [w for w in said if "_stable_hash_for_caching" in str(w.message)]  # torch's advice to torchao
    assert torch.equal(a.state[compiled]["exp_avg"].codes, b.state[eager]["exp_avg"].codes)
    assert torch.equal(a.state[compiled]["exp_avg_sq"].codes, b.state[eager]["exp_avg_sq"].codes)
    assert (compiled - eager).abs().max().item() <= 1e-6 < (compiled - start).abs().max().item()  # and they moved


def test_a_step_the_grad_scaler_skips_changes_nothing():
    """torchao's optimizer does not take the GradScaler's ``found_inf`` on the device: the scaler reads it on
    the host (the one read of the step) and skips the step, which leaves the weights, both 8-bit moments and
    the step count as they were."""
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
    assert syncs.total == 1, syncs.ops  # found_inf, read on the host
    after = (p.detach(), state["exp_avg"].codes, state["exp_avg_sq"].scale, state["step"])
    assert all(torch.equal(x, y) for x, y in zip(before, after, strict=True))
    assert float(state["step"]) == 2.0


@pytest.fixture(scope="module")
def rows(tokenizer):
    return tokenize(build_corpus(correct_sums(), ADDITIONS[:20], 2, seed=3, name="t"), tokenizer)


def test_training_with_8bit_adamw_on_the_device_step_waits_once_a_step(tiny, rows, tokenizer):
    """``--optimizer adamw8bit`` on the accelerator's step, here on the CPU: one synchronisation a step, the
    GradScaler's read of ``found_inf`` (bitsandbytes' waited once per parameter tensor and for that flag; the
    fork of torchao's update cctk kept until #55 took the flag on the device), the loss falling as with
    AdamW's float32 moments, to within the moments' quantization."""
    recipe = Recipe(repeats=1, epochs=2, learning_rate=1e-3, batch_size=16, optimizer="adamw8bit")
    with counting_steps(torch.device("cpu")) as steps:
        record = fine_tune(copy.deepcopy(tiny), rows, recipe, 5, tokenizer.pad_token_id, "arm", host_checks=False)
    plain = fine_tune(
        copy.deepcopy(tiny), rows, Recipe(**{**recipe.__dict__, "optimizer": "adamw"}), 5, tokenizer.pad_token_id, "arm"
    )
    assert steps == [1] * record.steps and record.steps == 6
    assert record.losses[1] < record.losses[0]
    assert record.losses == pytest.approx(plain.losses, rel=1e-3)
