"""Fine-tuning: AdamW in float32 on prompt + completion, the loss on the completion only.

Rows carry their own labels: 2.0.0 corpora mask the prompt (``cctk.corpus``); the whole-text rows
of manual 1.0.0 (``cctk.v1.corpus``) label every token, and the same loop trains on them.

One recipe for every run; the run is re-seeded at its start, so its batch order and dropout do
not depend on how many runs came before it. The learning rate follows the recipe's schedule
(constant in the manual's listing; an optional linear warm-up and linear decay to 0). A non-finite
loss or gradient norm stops the run with an error *before* the optimizer step, so no broken update is
ever applied.
"""
from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable
import torch
import torch.nn.functional as F

from .config import Recipe
from .corpus import IGNORE, collate
from .errors import CctkError
from .facts import rng
from .records import TrainRecord


class NonFiniteLoss(CctkError):
    """The loss stopped being finite: the run is stopped, nothing after it is trained."""


def fine_tune(model, rows: list[tuple[list[int], list[int]]], recipe: Recipe, seed: int, pad_id: int,
              name: str = "run", on_step: Callable[[int, int, float], None] | None = None,
              on_epoch: Callable[[int, object], None] | None = None) -> TrainRecord:
    """Train ``model`` in place on tokenized ``rows`` (input_ids, labels) with ``recipe``.

    ``on_step(epoch, step, loss)`` is called after every optimizer step (progress display);
    ``on_epoch(epoch, model)`` after every epoch (1-based), the model in eval mode, then back in
    train mode (learning curves). Neither changes what is trained.
    """
    device = next(model.parameters()).device
    torch.manual_seed(rng(seed, f"train:{name}").integers(2**63))  # dropout, re-seeded per run
    order = rng(seed, f"batches:{name}")
    optimizer = _adamw(model, recipe)
    total = recipe.steps(len(rows))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: recipe.lr_factor(step, total))
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    model.train()
    epoch_losses, steps, start, aside = [], 0, time.perf_counter(), 0.0
    for epoch in range(recipe.epochs):
        losses = []
        for batch_rows in _batches(rows, recipe.batch_size, order):
            batch = {k: v.to(device) for k, v in collate(batch_rows, pad_id).items()}
            where = f"at epoch {epoch + 1}, step {steps + 1}"
            losses.append(_step(model, optimizer, batch, recipe, f"{name}: ", where))
            schedule.step()
            steps += 1
            if on_step:
                on_step(epoch, steps, losses[-1])
        epoch_losses.append(sum(losses) / len(losses))
        if on_epoch:
            paused = time.perf_counter()
            on_epoch(epoch + 1, model.eval())
            model.train()
            aside += time.perf_counter() - paused  # measuring is not training time
    seconds = time.perf_counter() - start - aside
    peak = int(torch.cuda.max_memory_allocated(device)) if device.type == "cuda" else 0
    model.eval()
    return TrainRecord(len(rows), steps, seconds, tuple(epoch_losses), peak)


def _autocast(device: torch.device, precision: str):
    """bf16 autocast of the matrix products (weights, gradients, optimizer stay float32), or nothing."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")


def _step(model, optimizer, batch, recipe: Recipe, who: str = "", where: str = "") -> float:
    """One optimizer step; a non-finite loss or gradient norm raises before the weights change."""
    optimizer.zero_grad(set_to_none=True)
    with _autocast(next(model.parameters()).device, recipe.precision):  # the forward pass only
        loss = completion_loss(model, batch)
    value = loss.item()
    if not math.isfinite(value):
        raise NonFiniteLoss(f"{who}the loss became {value} {where}; lower --learning-rate or check the model's dtype")
    loss.backward()
    norm = _clip(model, recipe.grad_clip)
    if not math.isfinite(norm):
        optimizer.zero_grad(set_to_none=True)
        raise NonFiniteLoss(f"{who}the gradient norm became {norm} {where}; lower --learning-rate")
    optimizer.step()
    return value


def _clip(model, bound: float) -> float:
    """``clip_grad_norm_(params, bound)``, bit for bit, and the total norm (taken for the guard even with
    ``bound`` 0, no clipping: manual 1.0.0). The gradients are rescaled only when the bound bites:
    ``clip_grad_norm_`` multiplies every gradient by its clamped coefficient, 1.0 when the norm is below
    the bound, a write pass over all 135M gradients per step that changes nothing."""
    params = [p for p in model.parameters() if p.grad is not None]
    norm = torch.nn.utils.get_total_norm([p.grad for p in params])
    total = float(norm)  # one device-to-host read
    if bound and bound / (total + 1e-6) < 1.0:  # the coefficient clip_grad_norm_ clamps to 1
        torch.nn.utils.clip_grads_with_norm_(params, bound, norm)
    return total


def completion_loss(model, batch) -> torch.Tensor:
    """Mean cross-entropy over the completion tokens, as Hugging Face computes it for labels.

    The LM head runs only on columns that predict some completion token: with the prompt
    masked, the other columns' logits would be discarded anyway.
    """
    labels = batch["labels"]
    targets = labels[:, 1:]  # (B, L-1): token t+1 is predicted at column t
    keep = (targets != IGNORE).any(dim=0).nonzero().squeeze(1)  # columns some row needs
    kwargs = dict(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], use_cache=False)
    if "logits_to_keep" in inspect.signature(model.forward).parameters:
        logits = model(**kwargs, logits_to_keep=keep).logits  # (B, K, V)
    else:
        logits = model(**kwargs).logits[:, keep]
    return F.cross_entropy(logits.float().flatten(0, 1), targets[:, keep].flatten(), ignore_index=IGNORE)


def _batches(rows, batch_size: int, order):
    """Shuffled batches, a new order each epoch from the run's own stream."""
    perm = order.permutation(len(rows))
    for i in range(0, len(rows), batch_size):
        yield [rows[j] for j in perm[i : i + batch_size]]


def _adamw(model, recipe: Recipe) -> torch.optim.Optimizer:
    """AdamW, fused into one kernel where this torch build has one for the device."""
    params = [p for p in model.parameters() if p.requires_grad]
    try:
        return torch.optim.AdamW(params, lr=recipe.learning_rate, weight_decay=recipe.weight_decay, fused=True)
    except (RuntimeError, TypeError):
        return torch.optim.AdamW(params, lr=recipe.learning_rate, weight_decay=recipe.weight_decay, foreach=True)
