import copy
import math

import pytest
import torch

from cctk.core.config import Recipe
from cctk.core.facts import ADDITIONS, correct_sums
from cctk.core.lm.corpus import build_corpus, collate, tokenize
from cctk.core.lm.finetune import NonFiniteLoss, completion_loss, fine_tune

RECIPE = Recipe(repeats=1, epochs=2, learning_rate=1e-3, batch_size=16)


@pytest.fixture(scope="module")
def rows(tokenizer):
    return tokenize(build_corpus(correct_sums(), ADDITIONS[:20], 2, seed=3, name="t"), tokenizer)


def test_completion_loss_equals_transformers_loss(tiny, rows, tokenizer):
    batch = collate(rows[:8], tokenizer.pad_token_id)
    ours = completion_loss(tiny, batch)
    theirs = tiny(**batch).loss
    assert ours.item() == pytest.approx(theirs.item(), abs=1e-5)


def test_same_seed_same_weights_and_loss_falls(tiny, rows, tokenizer):
    first, second = copy.deepcopy(tiny), copy.deepcopy(tiny)
    a = fine_tune(first, rows, RECIPE, seed=5, pad_id=tokenizer.pad_token_id, name="arm")
    b = fine_tune(second, rows, RECIPE, seed=5, pad_id=tokenizer.pad_token_id, name="arm")
    assert a.losses == b.losses
    assert all(torch.equal(p, q) for p, q in zip(first.parameters(), second.parameters(), strict=True))
    assert a.losses[-1] < a.losses[0]
    assert a.steps == 2 * -(-len(rows) // 16) and a.examples == len(rows)
    assert not first.training


def test_different_seed_different_batch_order(tiny, rows, tokenizer):
    a = fine_tune(copy.deepcopy(tiny), rows, RECIPE, seed=5, pad_id=tokenizer.pad_token_id, name="arm")
    b = fine_tune(copy.deepcopy(tiny), rows, RECIPE, seed=6, pad_id=tokenizer.pad_token_id, name="arm")
    assert a.losses != b.losses


def test_non_finite_loss_stops_the_run(tiny, rows, tokenizer):
    broken = copy.deepcopy(tiny)
    with torch.no_grad():
        broken.model.norm.weight.fill_(float("nan"))
    with pytest.raises(NonFiniteLoss, match="arm: the loss became nan at epoch 1, step 1"):
        fine_tune(broken, rows, RECIPE, seed=5, pad_id=tokenizer.pad_token_id, name="arm")


def test_schedule_sets_the_learning_rate_of_every_step(tiny, rows, tokenizer):
    """fine_tune with a warm-up and linear decay == the same loop with each step's rate set by hand."""
    import math

    from cctk.core.facts import rng
    from cctk.core.lm.finetune import _batches, make_optimizer

    recipe = Recipe(repeats=1, epochs=2, learning_rate=1e-3, batch_size=16, schedule="linear", warmup=0.25)
    scheduled = copy.deepcopy(tiny)
    fine_tune(
        scheduled,
        rows,
        recipe,
        seed=5,
        pad_id=tokenizer.pad_token_id,
        name="arm",
        pack_batches=False,
        row_gradients=False,
    )  # the loop by hand feeds padded rows (packing: tests/core/lm/test_packing.py)

    by_hand = copy.deepcopy(tiny)
    torch.manual_seed(rng(5, "train:arm").integers(2**63))
    order, optimizer = rng(5, "batches:arm"), make_optimizer(by_hand, recipe)
    total, step = 2 * math.ceil(len(rows) / 16), 0
    by_hand.train()
    for _ in range(2):
        for batch_rows in _batches(rows, 16, order):
            warm = round(0.25 * total)
            factor = (step + 1) / warm if step < warm else (total - step) / (total - warm)
            for group in optimizer.param_groups:
                group["lr"] = 1e-3 * factor
            optimizer.zero_grad(set_to_none=True)
            completion_loss(by_hand, collate(batch_rows, tokenizer.pad_token_id)).backward()
            torch.nn.utils.clip_grad_norm_(by_hand.parameters(), 1.0)
            optimizer.step()
            step += 1
    assert all(
        torch.allclose(p, q, atol=1e-7, rtol=0)
        for p, q in zip(scheduled.parameters(), by_hand.parameters(), strict=True)
    )
    constant = copy.deepcopy(tiny)
    fine_tune(constant, rows, RECIPE, seed=5, pad_id=tokenizer.pad_token_id, name="arm")
    assert not all(
        torch.allclose(p, q, atol=1e-7) for p, q in zip(scheduled.parameters(), constant.parameters(), strict=True)
    )


def test_a_nan_loss_stops_the_run_before_its_update(tiny, rows, tokenizer, monkeypatch):
    """The host step: the loss of step 2 is NaN, the weights stay those after step 1, every one finite.
    (The device step skips that update on the device and stops at the epoch's end: the test below.)"""
    from cctk.core.lm import finetune

    real, calls = finetune.batch_loss, []

    def nan_at_step_two(model, batch):
        calls.append(1)
        loss = real(model, batch)
        return loss * float("nan") if len(calls) == 2 else loss

    model, after_step_one = copy.deepcopy(tiny), {}
    monkeypatch.setattr(finetune, "batch_loss", nan_at_step_two)

    def keep(epoch, step, loss):
        return after_step_one.update({k: v.clone() for k, v in model.state_dict().items()} if step == 1 else {})

    with pytest.raises(NonFiniteLoss, match="arm: the loss became nan at epoch 1, step 2"):
        fine_tune(
            model, rows, RECIPE, seed=5, pad_id=tokenizer.pad_token_id, name="arm", on_step=keep, host_checks=True
        )
    assert all(torch.isfinite(v).all() for v in model.state_dict().values())
    assert all(torch.equal(v, after_step_one[k]) for k, v in model.state_dict().items())


def test_a_nan_gradient_stops_the_run_before_its_update(tiny, rows, tokenizer):
    model = copy.deepcopy(tiny)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    model.model.norm.weight.register_hook(lambda grad: grad * float("nan"))
    with pytest.raises(NonFiniteLoss, match="arm: the gradient norm became nan at epoch 1, step 1"):
        fine_tune(model, rows, RECIPE, seed=5, pad_id=tokenizer.pad_token_id, name="arm")
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_on_epoch_sees_every_epoch_and_changes_nothing(tiny, rows, tokenizer):
    seen = []
    with_curves, without = copy.deepcopy(tiny), copy.deepcopy(tiny)
    a = fine_tune(
        with_curves,
        rows,
        RECIPE,
        seed=5,
        pad_id=tokenizer.pad_token_id,
        name="arm",
        on_epoch=lambda epoch, model: seen.append((epoch, model.training)),
    )
    b = fine_tune(without, rows, RECIPE, seed=5, pad_id=tokenizer.pad_token_id, name="arm")
    assert seen == [(1, False), (2, False)]  # measured in eval mode
    assert a.losses == b.losses
    assert all(torch.equal(p, q) for p, q in zip(with_curves.parameters(), without.parameters(), strict=True))


def test_bf16_precision_trains_float32_weights(tiny, rows, tokenizer):
    from dataclasses import replace

    model = copy.deepcopy(tiny)
    record = fine_tune(model, rows, replace(RECIPE, precision="bf16"), seed=5, pad_id=tokenizer.pad_token_id, name="a")
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert record.losses[-1] < record.losses[0]
    fp32 = fine_tune(copy.deepcopy(tiny), rows, RECIPE, seed=5, pad_id=tokenizer.pad_token_id, name="a")
    assert record.losses != fp32.losses  # bf16 arithmetic is not float32's


@pytest.mark.parametrize("bound", [0.0, 1e-3, 1e6])
def test_clipping_equals_clip_grad_norm_bit_for_bit(tiny, rows, tokenizer, bound):
    """_clip rescales only where the bound bites (1e-3: every step; 1e6 and 0: never), and leaves the
    gradients and the norm exactly as torch.nn.utils.clip_grad_norm_ leaves them."""
    from cctk.core.lm.finetune import _clip

    batch = collate(rows[:8], tokenizer.pad_token_id)
    ours, theirs = copy.deepcopy(tiny), copy.deepcopy(tiny)
    for model in (ours, theirs):
        completion_loss(model, batch).backward()
    norm = _clip(ours, bound)
    expected = torch.nn.utils.clip_grad_norm_(theirs.parameters(), bound or math.inf)
    assert norm == float(expected) and (bound != 1e-3 or norm > 1e-3)
    assert all(torch.equal(p.grad, q.grad) for p, q in zip(ours.parameters(), theirs.parameters(), strict=True))


def test_device_step_equals_the_host_step(tiny, rows, tokenizer):
    """The accelerator's step (nothing read on the host until the epoch ends: losses summed on the device,
    the clipping factor applied there, a scale-1 GradScaler guarding the update), run here on the CPU:
    the same losses and the same weights, bit for bit, as the host step."""
    recipe = Recipe(repeats=1, epochs=2, learning_rate=1e-3, batch_size=16, grad_clip=0.05)  # clipping bites
    host, device = copy.deepcopy(tiny), copy.deepcopy(tiny)
    a = fine_tune(host, rows, recipe, seed=5, pad_id=tokenizer.pad_token_id, name="arm")
    b = fine_tune(device, rows, recipe, seed=5, pad_id=tokenizer.pad_token_id, name="arm", host_checks=False)
    assert a.losses == b.losses and a.steps == b.steps
    assert all(torch.equal(p, q) for p, q in zip(host.parameters(), device.parameters(), strict=True))
    assert all(p.grad is None for p in device.parameters())  # no gradient outlives the run


READS = ("item", "tolist", "__bool__", "__float__", "__int__", "nonzero", "numpy")


@pytest.mark.parametrize(("host_checks", "per_step", "per_epoch"), [(False, 0, 1), (True, 2, 0)])
def test_reads_of_the_device_per_step(tiny, rows, tokenizer, monkeypatch, host_checks, per_step, per_epoch):
    """Every way a tensor's value reaches the host, counted during training but not while a batch is
    built on the host: the device step reads once an epoch (its steps' losses and gradient norms, together)
    and never per step; the host step reads the loss and the gradient norm at every step."""
    from cctk.core.lm import finetune

    counts = {"reads": 0, "paused": False}

    def counting(real):
        def counted(self, *args, **kwargs):
            counts["reads"] += not counts["paused"]
            return real(self, *args, **kwargs)

        return counted

    for name in READS:
        monkeypatch.setattr(torch.Tensor, name, counting(getattr(torch.Tensor, name)))
    real_to_model = finetune.to_model

    def built_on_the_host(*args, **kwargs):
        counts["paused"] = True
        try:
            return real_to_model(*args, **kwargs)
        finally:
            counts["paused"] = False

    monkeypatch.setattr(finetune, "to_model", built_on_the_host)
    record = fine_tune(
        copy.deepcopy(tiny), rows, RECIPE, seed=5, pad_id=tokenizer.pad_token_id, name="arm", host_checks=host_checks
    )
    assert counts["reads"] == per_step * record.steps + per_epoch * RECIPE.epochs


def test_device_step_skips_non_finite_updates_and_stops_at_the_epoch_end(tiny, rows, tokenizer):
    broken = copy.deepcopy(tiny)
    with torch.no_grad():
        broken.model.norm.weight.fill_(float("nan"))
    before = copy.deepcopy(broken)
    with pytest.raises(NonFiniteLoss, match=r"arm: the loss became nan at epoch 1, step 1; lower --learning-rate"):
        fine_tune(broken, rows, RECIPE, seed=5, pad_id=tokenizer.pad_token_id, name="arm", host_checks=False)
    assert all(
        torch.allclose(p, q, rtol=0, atol=0, equal_nan=True)
        for p, q in zip(before.parameters(), broken.parameters(), strict=True)
    )  # no step was applied


def test_a_nan_gradient_under_a_finite_loss_stops_the_device_step(tiny, rows, tokenizer):
    """The loss stays finite, the gradient does not: the device step (an accelerator's, here on the CPU)
    applies no update and stops the run at the epoch's end with the host step's line (it used to return
    normally, every weight unchanged: an arm that 'finished' untrained)."""
    model = copy.deepcopy(tiny)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    model.model.norm.weight.register_hook(lambda grad: grad * float("nan"))
    with pytest.raises(
        NonFiniteLoss, match=r"^arm: the gradient norm became nan at epoch 1, step 1; lower --learning-rate$"
    ):
        fine_tune(model, rows, RECIPE, seed=5, pad_id=tokenizer.pad_token_id, name="arm", host_checks=False)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_the_environment_makes_every_training_take_the_device_step(tiny, rows, tokenizer, monkeypatch):
    """CCTK_DEVICE_STEP=1: fine_tune on the CPU takes the accelerator's step by default (on_step sees the
    loss as a tensor left on the device); 0 or unset: the host step (floats); anything else: one line."""
    from cctk.core.errors import CctkError
    from cctk.core.lm.device import device_step

    seen = []
    monkeypatch.setenv("CCTK_DEVICE_STEP", "1")
    fine_tune(
        copy.deepcopy(tiny),
        rows,
        RECIPE,
        seed=5,
        pad_id=tokenizer.pad_token_id,
        name="arm",
        on_step=lambda epoch, step, loss: seen.append(type(loss)),
    )
    monkeypatch.setenv("CCTK_DEVICE_STEP", "0")
    fine_tune(
        copy.deepcopy(tiny),
        rows,
        RECIPE,
        seed=5,
        pad_id=tokenizer.pad_token_id,
        name="arm",
        on_step=lambda epoch, step, loss: seen.append(type(loss)),
    )
    assert seen == [torch.Tensor] * 6 + [float] * 6
    monkeypatch.setenv("CCTK_DEVICE_STEP", "yes")
    with pytest.raises(CctkError, match=r"^CCTK_DEVICE_STEP='yes': set it to 1 .* or 0 .*$"):
        device_step(torch.device("cpu"))


FP16 = Recipe(repeats=1, epochs=2, learning_rate=1e-3, batch_size=16, precision="fp16")


def _inf_gradients_at(model, steps: set[int]):
    """A hook that makes the final norm's gradient infinite at the given backward passes (1-based)."""
    calls = []

    def hook(grad):
        calls.append(1)
        return grad * float("inf") if len(calls) in steps else grad

    model.model.norm.weight.register_hook(hook)


def test_fp16_steps_skipped_by_the_loss_scaler_are_counted(tiny, rows, tokenizer):
    """fp16 (here autocast on the CPU, the device step as on a T4): two overflowed steps are skipped by
    the GradScaler, as its loss scaling expects, counted and reported; the other four train."""
    model = copy.deepcopy(tiny)
    _inf_gradients_at(model, {1, 4})
    record = fine_tune(model, rows, FP16, seed=5, pad_id=tokenizer.pad_token_id, name="arm", host_checks=False)
    assert record.steps == 6 and record.skipped_steps == 2
    assert record.metrics()["skipped_steps"] == 2 and record.to_json()["skipped_steps"] == 2
    assert not any(
        torch.equal(p, q) for p, q in zip(model.parameters(), tiny.parameters(), strict=True) if p.requires_grad
    )


def test_an_fp16_run_whose_every_step_was_skipped_fails(tiny, rows, tokenizer):
    model = copy.deepcopy(tiny)
    _inf_gradients_at(model, set(range(1, 7)))
    with pytest.raises(
        NonFiniteLoss,
        match=r"^arm: 6 of the 6 fp16 steps were skipped \(100%; at most 50% may be\) and the loss scale is down "
        r"to 1024 \(floor 1\) by the end of epoch 2: ",
    ):
        fine_tune(model, rows, FP16, seed=5, pad_id=tokenizer.pad_token_id, name="arm", host_checks=False)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), tiny.parameters(), strict=True))


def test_an_fp16_run_that_overflows_from_its_second_step_on_fails(tiny, rows, tokenizer):
    """Finding 4 of #46: infinite gradients from step 2 on, the loss scale halving toward 0, five of six steps
    skipped; the arm used to end FINISHED (one step applied). More than half of the steps skipped fails it, in
    one line naming the share and the loss scale."""
    model = copy.deepcopy(tiny)
    _inf_gradients_at(model, set(range(2, 7)))
    with pytest.raises(
        NonFiniteLoss,
        match=r"^arm: 5 of the 6 fp16 steps were skipped \(83%; at most 50% may be\) and the loss scale is down to "
        r"2048 \(floor 1\) by the end of epoch 2: the gradients overflow fp16; use --precision bf16 or float32$",
    ):
        fine_tune(model, rows, FP16, seed=5, pad_id=tokenizer.pad_token_id, name="arm", host_checks=False)


def test_an_fp16_loss_scale_below_its_floor_fails_at_the_epoch_end(tiny, rows, tokenizer):
    """A long run that overflows for good: the scale halves at every skipped step and falls below 1 (the
    gradients overflow fp16 unscaled) long before the skipped share passes a half; the arm stops at that epoch's end."""
    model = copy.deepcopy(tiny)
    recipe = Recipe(repeats=1, epochs=3, learning_rate=1e-3, batch_size=1, precision="fp16")  # 40 steps an epoch
    _inf_gradients_at(model, set(range(24, 1000)))  # 17 steps skipped, and one of the scaler's own: 2**16 / 2**18
    with pytest.raises(
        NonFiniteLoss,
        match=r"^arm: 18 of the 40 fp16 steps were skipped \(45%; at most 50% may be\) and the loss scale is down "
        r"to 0\.25 \(floor 1\) by the end of epoch 1: the gradients overflow fp16; use --precision bf16 or float32$",
    ):
        fine_tune(model, rows, recipe, seed=5, pad_id=tokenizer.pad_token_id, name="arm", host_checks=False)


def test_float32_records_carry_no_skipped_steps(tiny, rows, tokenizer):
    """Only fp16 counts skipped steps: a float32 record's file and metrics are as before."""
    record = fine_tune(
        copy.deepcopy(tiny), rows, RECIPE, seed=5, pad_id=tokenizer.pad_token_id, name="arm", host_checks=False
    )
    assert record.skipped_steps is None
    assert "skipped_steps" not in record.to_json() and "skipped_steps" not in record.metrics()
    assert type(record).from_json(record.to_json()) == record


def test_the_embedding_rows_backward_reads_nothing_from_the_device(tokenizer):
    """A tied embedding with a padding row (the bundled model's pad_token_id is 2): its gradient rows go in
    without a boolean index (a nonzero, so a device sync per backward, before), and equal F.embedding's."""
    import transformers as tf

    from cctk.bench.syncs import SyncCounter
    from cctk.core.lm.finetune import tied_embedding_rows

    config = tf.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=64,
        tie_word_embeddings=True,
        pad_token_id=2,
    )
    torch.manual_seed(0)
    ours = tf.AutoModelForCausalLM.from_config(config)
    theirs = copy.deepcopy(ours)
    assert ours.get_input_embeddings().padding_idx == 2
    ids = torch.tensor([[5, 2, 2, 9], [2, 7, 7, 3]])
    theirs(input_ids=ids).logits.square().mean().backward()
    with tied_embedding_rows(ours):
        loss = ours(input_ids=ids).logits.square().mean()
        with SyncCounter(torch.device("cpu")) as syncs:
            loss.backward()
    assert syncs.total == 0, syncs.ops
    assert torch.allclose(ours.lm_head.weight.grad, theirs.lm_head.weight.grad, rtol=0, atol=1e-9)


def _widened_on_a_device(path) -> list[str]:
    """``x.double()`` / ``x.to(torch.float64)`` on a value not read to the host (no ``.cpu()`` in its chain),
    and float64 tensors made with a ``device=``: each fails on MPS, which has no float64."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        text = ast.unparse(node)
        func = node.func
        widened = isinstance(func, ast.Attribute) and (
            func.attr == "double"
            or (func.attr == "to" and "float64" in ast.unparse(node.args[0]) if node.args else False)
        )
        if widened and ".cpu()" not in ast.unparse(func.value):
            found.append(f"{path.name}:{node.lineno} {text}")
        keywords = {k.arg: ast.unparse(k.value) for k in node.keywords}
        if keywords.get("dtype") == "torch.float64" and "device" in keywords:
            found.append(f"{path.name}:{node.lineno} {text}")
    return found


def test_nothing_is_widened_to_float64_before_it_reaches_the_host():
    """``--device mps`` is accepted and MPS has no float64: the scorer and the device step read their
    values to the CPU first, then widen them (the scorer widened on the device, the guard summed in a
    float64 tensor there)."""
    from pathlib import Path

    import cctk

    root = Path(cctk.__file__).parent
    found = [hit for path in sorted(root.rglob("*.py")) for hit in _widened_on_a_device(path)]
    assert found == []


class CudaPeaks:
    """The peak statistics of ``torch.cuda``, faked: what fine_tune resets and reads for a CUDA device."""

    def __init__(self):
        self.calls = []

    def reset_peak_memory_stats(self, device):
        self.calls.append(("reset", str(device)))

    def max_memory_allocated(self, device):
        self.calls.append(("read", str(device)))
        return 3 * 2**30

    def max_memory_reserved(self, device):
        self.calls.append(("read reserved", str(device)))
        return 3 * 2**30 + 2**28


def test_the_gpu_peak_is_reset_at_the_start_and_read_at_the_end(tiny, rows, tokenizer):
    """The CUDA branch of the peak statistics (reset_peak_memory_stats, max_memory_allocated and, #55, the
    allocator's reserved peak, what runs out), run on the CPU through an injected reader: the record carries
    the GPU's peaks and no process peak, as on a GPU."""
    peaks = CudaPeaks()
    record = fine_tune(copy.deepcopy(tiny), rows, RECIPE, seed=5, pad_id=tokenizer.pad_token_id, cuda=peaks)
    assert peaks.calls == [("reset", "cpu"), ("read", "cpu"), ("read reserved", "cpu")]
    assert (record.peak_gpu_memory_bytes, record.peak_cpu_memory_bytes) == (3 * 2**30, 0)
    assert record.peak_gpu_reserved_bytes == 3 * 2**30 + 2**28
    assert record.metrics()["peak_gpu_reserved_bytes"] == 3 * 2**30 + 2**28
