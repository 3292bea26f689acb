"""Fine-tuning: AdamW in float32 on prompt + completion, the loss on the completion only.

Rows carry their own labels: 2.0.0 corpora mask the prompt (``cctk.core.lm.corpus``); manual 1.0.0's
whole-text rows label every token. Each run is re-seeded at its start, so its batch order and dropout do not
depend on the runs before it. A non-finite loss or gradient norm stops the run *before* the optimizer step.

Two savings change no number beyond float32 rounding (tests compare them with the plain step): a batch whose
rows share prefixes is fed as one prefix tree (``corpus.pack``; not with active dropout, where shared tokens
would share a mask), the LM head only at nodes that predict a supervised token; and a tied input embedding's
gradient rows are added into the LM head's gradient in place, not through a dense (vocabulary x hidden) zero
tensor and a second dense sum.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import fields
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..config import Recipe
from ..errors import CctkError
from ..facts import rng
from .compute import example_flops
from .corpus import IGNORE, Packed, Row, collate, pack, shared_tokens
from .device import device_step
from .memory import process_peak, reset_process_peak
from .record import TrainRecord
from .scoring import logits_at

if TYPE_CHECKING:
    from transformers import PreTrainedModel

OnStep = Callable[[int, int, "float | torch.Tensor"], None]  # (epoch, step, loss: a float, or the device's tensor)
Batch = Packed | dict[str, torch.Tensor]  # a batch as the model is fed it: a prefix tree, or padded rows


class PeakMemory(Protocol):
    """Where a CUDA device's peak memory statistics are read: ``torch.cuda`` (a fake in the tests)."""

    def reset_peak_memory_stats(self, device: torch.device) -> None: ...

    def max_memory_allocated(self, device: torch.device) -> int: ...

    def max_memory_reserved(self, device: torch.device) -> int: ...


class NonFiniteLoss(CctkError):
    """The loss or the gradient stopped being finite: the run is stopped, nothing after it is trained."""


LOSS_ADVICE = "lower --learning-rate or check the model's dtype"
NORM_ADVICE = "lower --learning-rate"


def fine_tune(
    model: PreTrainedModel,
    rows: list[Row],
    recipe: Recipe,
    seed: int,
    pad_id: int,
    name: str = "run",
    on_step: OnStep | None = None,
    on_epoch: Callable[[int, PreTrainedModel], None] | None = None,
    *,
    pack_batches: bool = True,
    row_gradients: bool = True,
    host_checks: bool | None = None,
    on_loss: Callable[[int, float], None] | None = None,
    cuda: PeakMemory = torch.cuda,
) -> TrainRecord:
    """Train ``model`` in place on tokenized ``rows`` (input_ids, labels) with ``recipe``.

    Callbacks, none of which changes what is trained: ``on_step(epoch, step, loss)`` after every optimizer
    step, ``loss`` a float on the host step, the step's 0-d tensor on the device step (``float(loss)`` waits
    for the device); ``on_epoch(epoch, model)`` after every epoch (1-based), the model in eval mode, then
    back in train mode (learning curves); ``on_loss(epoch, loss)`` with the epoch's mean loss as the record
    keeps it. ``cuda``: where a CUDA device's peak memory is read (``torch.cuda``; a fake in the tests).

    ``host_checks`` (default: on the CPU only, unless ``CCTK_DEVICE_STEP=1``): read the loss and the gradient
    norm on the host at every step, so a non-finite value stops the run before the weights change. Off (an
    accelerator), the step never waits for the device (``_DeviceGuard``): a non-finite step is skipped there
    and the run stops with the same error at the end of that epoch.
    """
    device, who = next(model.parameters()).device, f"{name}: "  # who: the start of its error lines
    host_checks = not device_step(device) if host_checks is None else host_checks
    torch.manual_seed(rng(seed, f"train:{name}").integers(2**63))  # dropout, re-seeded per run
    order = rng(seed, f"batches:{name}")
    optimizer = make_optimizer(model, recipe)
    total = recipe.steps(len(rows))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: recipe.lr_factor(step, total))
    guard = None if host_checks else _DeviceGuard(device, recipe)
    _reset_peaks(device, cuda)
    packing = pack_batches and not has_dropout(model)
    model.train()
    epoch_losses: list[float] = []
    steps, start, aside = 0, time.perf_counter(), 0.0
    with tied_embedding_rows(model, row_gradients):
        for epoch in range(recipe.epochs):
            losses: list[float] = []
            first = steps + 1
            for batch_rows in _batches(rows, recipe.batch_size, order):
                batch = to_model(batch_rows, pad_id, device, packing)
                loss: float | torch.Tensor
                if guard is None:
                    loss = _step(model, optimizer, batch, recipe, who, f"at epoch {epoch + 1}, step {steps + 1}")
                    losses.append(loss)
                else:
                    loss = guard.step(model, optimizer, batch)
                schedule.step()
                steps += 1
                if on_step:
                    on_step(epoch, steps, loss)
            epoch_losses.append(sum(losses) / len(losses) if guard is None else guard.epoch_mean(who, epoch, first))
            paused = time.perf_counter()
            if on_loss:
                on_loss(epoch + 1, epoch_losses[-1])
            if on_epoch:
                on_epoch(epoch + 1, model.eval())
                model.train()
            aside += time.perf_counter() - paused  # logging and measuring are not training time
    seconds = time.perf_counter() - start - aside
    optimizer.zero_grad(set_to_none=True)  # no gradients outlive the run (a parent waits without them)
    model.eval()
    skipped = guard.check_run(who, recipe.epochs - 1) if guard is not None else None
    gpu, reserved, cpu = _peaks(device, cuda)
    return TrainRecord(
        len(rows),
        steps,
        seconds,
        tuple(epoch_losses),
        gpu,
        example_flops(model, rows) / 1e9,
        cpu,
        skipped_steps=skipped,
        peak_gpu_reserved_bytes=reserved,
    )


def _reset_peaks(device: torch.device, cuda: PeakMemory = torch.cuda) -> None:
    if device.type == "cuda" or cuda is not torch.cuda:
        cuda.reset_peak_memory_stats(device)
    else:
        reset_process_peak()


def _peaks(device: torch.device, cuda: PeakMemory = torch.cuda) -> tuple[int, int, int]:
    """(peak GPU memory its tensors held, peak its caching allocator reserved, peak resident memory of the
    process) of the run, each 0 where it is not the device. The reserved peak is what runs out: the
    tensors' and the blocks the allocator could not reuse for them (rounding, fragmentation)."""
    if device.type == "cuda" or cuda is not torch.cuda:
        return int(cuda.max_memory_allocated(device)), int(cuda.max_memory_reserved(device)), 0
    return 0, 0, process_peak()


MIN_SHARED = 0.1  # pack a batch when its prefix tree feeds at least 10% fewer tokens


def to_model(batch_rows: Sequence[Row], pad_id: int, device: torch.device, packing: bool = True) -> Batch:
    """The batch as the model is fed it: one prefix tree where the rows share enough, else padded rows.

    Built on the host (the columns the loss needs included, so the device never reports a shape back), then
    moved through pinned memory without waiting: the next batch is built while the device runs this one.
    """
    move = _mover(device)
    if packing and len(batch_rows) > 1 and shared_tokens(batch_rows) >= MIN_SHARED:
        packed = pack(batch_rows)
        return Packed(*(move(getattr(packed, f.name)) for f in fields(Packed)))
    batch = collate(batch_rows, pad_id)
    batch["keep"] = supervised_columns(batch["labels"])
    return {k: move(v) for k, v in batch.items()}


def _mover(device: torch.device) -> Callable[[torch.Tensor], torch.Tensor]:
    if device.type == "cuda":
        return lambda t: t.pin_memory().to(device, non_blocking=True)
    return lambda t: t.to(device)


def supervised_columns(labels: torch.Tensor) -> torch.Tensor:
    """(K,) the columns of a padded batch that predict some completion token (token t+1 at column t)."""
    return (labels[:, 1:] != IGNORE).any(dim=0).nonzero().squeeze(1)


def has_dropout(model: nn.Module) -> bool:
    """Whether training would drop anything: a dropout module or a config dropout rate above 0."""
    if any(isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 for m in model.modules()):
        return True
    config = getattr(model, "config", None)  # rates applied in functional form (attention dropout)
    rates = [
        v
        for k, v in (vars(config).items() if config is not None else ())
        if ("dropout" in k or "pdrop" in k) and not k.startswith(("classifier", "summary"))
    ]
    return any(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in rates)


HALF = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _autocast(device: torch.device, precision: str) -> torch.autocast:
    """bf16 or fp16 autocast of the matrix products (weights, gradients, optimizer stay float32), or nothing."""
    return torch.autocast(device.type, dtype=HALF.get(precision, torch.bfloat16), enabled=precision in HALF)


# fp16's loss scaling may skip steps; an arm fails where it skipped so many that it is not the recipe's arm
# any more (checked at the run's end: the GradScaler's first steps halve its scale from 2**16 until the
# gradients fit, skips a short run's first epoch could count as a large share), or where its gradients overflow
# fp16 unscaled (checked every epoch: the scale halves at each skip, grows back only after 2000 clean steps).
MAX_SKIPPED_SHARE = 0.5
MIN_LOSS_SCALE = 1.0


class _DeviceGuard:
    """The step of an accelerator: nothing read back on the host until the epoch ends.

    A ``GradScaler`` guards the update: under fp16 it scales the loss and skips a step whose gradient
    overflowed (a few are expected); under float32 and bf16 its scale stays 1 (changing no bit), so it only
    skips a step whose gradient is not finite (on the device for the fused AdamW; torchao's 8-bit AdamW makes
    the scaler read the flag on the host). Losses and gradient norms stay on the device and are read once an
    epoch (``epoch_mean``), with the loss scale.
    """

    def __init__(self, device: torch.device, recipe: Recipe) -> None:
        self.recipe, self.device, self.fp16 = recipe, device, recipe.precision == "fp16"
        # fp16: GradScaler's own defaults; else a scale of 1 that never grows
        self.scaler = (
            torch.amp.GradScaler(device.type)
            if self.fp16
            else torch.amp.GradScaler(device.type, init_scale=1.0, growth_interval=2**30)
        )
        self.losses: list[torch.Tensor] = []  # the epoch's, 0-d on the device
        self.norms: list[torch.Tensor] = []
        self.skipped = 0  # fp16: steps of the run the scaler skipped (read once an epoch)
        self.steps = 0  # steps of the epochs read so far
        self.scale = 1.0  # the loss scale as last read

    def step(self, model: PreTrainedModel, optimizer: torch.optim.Optimizer, batch: Batch) -> torch.Tensor:
        """One optimizer step; returns its loss, a 0-d tensor left on the device (reading it waits for it)."""
        optimizer.zero_grad(set_to_none=True)
        with _autocast(self.device, self.recipe.precision):
            loss = batch_loss(model, batch)
        self.losses.append(loss.detach().float())
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(optimizer)
        params, grads = _gradients(model)
        norm = torch.nn.utils.get_total_norm(grads)
        self.norms.append(norm.detach().float())
        if self.recipe.grad_clip:  # clip_grad_norm_'s factor, clamped to 1, applied on the device
            torch.nn.utils.clip_grads_with_norm_(params, self.recipe.grad_clip, norm)
        self.scaler.step(optimizer)  # skipped on the device when a gradient is not finite
        self.scaler.update()
        return self.losses[-1]

    def epoch_mean(self, who: str, epoch: int, first_step: int) -> float:
        """The epoch's mean loss, from one read of its losses, gradient norms and loss scale (float32, exact
        as host floats). A non-finite loss (or, except under fp16, gradient norm) stops the run with the host
        step's line, and so does an fp16 loss scale below ``MIN_LOSS_SCALE``."""
        n = len(self.losses)
        scale = self.scaler._get_scale_async()  # the scale as a tensor on the device: no read of its own
        assert scale is not None  # set by the epoch's first scale()
        values: list[float] = torch.cat(
            [torch.stack(self.losses), torch.stack(self.norms), scale.reshape(1).float()]
        ).tolist()
        losses, norms, self.scale = values[:n], values[n : 2 * n], values[-1]
        self.losses, self.norms = [], []
        for i, (loss, norm) in enumerate(zip(losses, norms, strict=True)):
            where = f"at epoch {epoch + 1}, step {first_step + i}"
            if not math.isfinite(loss):
                raise NonFiniteLoss(f"{who}the loss became {loss} {where}; {LOSS_ADVICE}")
            if not math.isfinite(norm) and not self.fp16:
                raise NonFiniteLoss(f"{who}the gradient norm became {norm} {where}; {NORM_ADVICE}")
        self.skipped += sum(not math.isfinite(n) for n in norms)
        self.steps += n
        if self.fp16 and self.scale < MIN_LOSS_SCALE:
            raise NonFiniteLoss(self._overflow(who, epoch))
        return sum(losses) / len(losses)

    def check_run(self, who: str, epoch: int) -> int | None:
        """fp16: the run's skipped steps, or its one line where more than ``MAX_SKIPPED_SHARE`` of them were
        skipped; else None."""
        if not self.fp16:
            return None
        if self.steps and self.skipped > MAX_SKIPPED_SHARE * self.steps:
            raise NonFiniteLoss(self._overflow(who, epoch))
        return self.skipped

    def _overflow(self, who: str, epoch: int) -> str:
        return (
            f"{who}{self.skipped} of the {self.steps} fp16 steps were skipped ({self.skipped / self.steps:.0%}; at "
            f"most {MAX_SKIPPED_SHARE:.0%} may be) and the loss scale is down to {self.scale:g} (floor "
            f"{MIN_LOSS_SCALE:g}) by the end of epoch {epoch + 1}: the gradients overflow fp16; use --precision "
            "bf16 or float32"
        )


def _step(
    model: PreTrainedModel,
    optimizer: torch.optim.Optimizer,
    batch: Batch,
    recipe: Recipe,
    who: str = "",
    where: str = "",
) -> float:
    """One optimizer step; a non-finite loss or gradient norm raises before the weights change."""
    optimizer.zero_grad(set_to_none=True)
    with _autocast(next(model.parameters()).device, recipe.precision):  # the forward pass only
        loss = batch_loss(model, batch)
    value = float(loss.item())
    if not math.isfinite(value):
        raise NonFiniteLoss(f"{who}the loss became {value} {where}; {LOSS_ADVICE}")
    loss.backward()
    norm = _clip(model, recipe.grad_clip)
    if not math.isfinite(norm):
        optimizer.zero_grad(set_to_none=True)
        raise NonFiniteLoss(f"{who}the gradient norm became {norm} {where}; {NORM_ADVICE}")
    optimizer.step()
    return value


def _clip(model: nn.Module, bound: float) -> float:
    """``clip_grad_norm_(params, bound)``, bit for bit, and the total norm (taken for the guard even with
    ``bound`` 0, no clipping: manual 1.0.0). Rescaled only when the bound bites: ``clip_grad_norm_``'s
    coefficient 1.0 would be a write pass over every gradient that changes nothing."""
    params, grads = _gradients(model)
    norm = torch.nn.utils.get_total_norm(grads)
    total = float(norm)  # one device-to-host read
    if bound and bound / (total + 1e-6) < 1.0:  # the coefficient clip_grad_norm_ clamps to 1
        torch.nn.utils.clip_grads_with_norm_(params, bound, norm)
    return total


def _gradients(model: nn.Module) -> tuple[list[nn.Parameter], list[torch.Tensor]]:
    """The parameters that have a gradient, and those gradients, in the same order."""
    params = [p for p in model.parameters() if p.grad is not None]
    return params, [p.grad for p in params if p.grad is not None]


def completion_loss(model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean cross-entropy over the completion tokens, as Hugging Face computes it for labels; the LM head
    only on columns that predict some completion token (the others' logits would be discarded)."""
    targets = batch["labels"][:, 1:]  # (B, L-1): token t+1 is predicted at column t
    keep = batch["keep"] if "keep" in batch else supervised_columns(batch["labels"])  # columns some row needs
    logits = logits_at(model, keep, input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    return F.cross_entropy(logits.float().flatten(0, 1), targets[:, keep].flatten(), ignore_index=IGNORE)


def batch_loss(model: PreTrainedModel, batch: Batch) -> torch.Tensor:
    return packed_loss(model, batch) if isinstance(batch, Packed) else completion_loss(model, batch)


def packed_loss(model: PreTrainedModel, batch: Packed) -> torch.Tensor:
    """``completion_loss`` of a packed batch: each distinct prediction once, weighted by its rows."""
    dtype = next(model.parameters()).dtype
    mask = torch.zeros(batch.allowed.shape, dtype=dtype, device=batch.allowed.device)
    mask.masked_fill_(~batch.allowed, torch.finfo(dtype).min)
    inputs = {"input_ids": batch.input_ids, "position_ids": batch.position_ids, "attention_mask": mask[None, None]}
    logits = logits_at(model, batch.keep, **inputs)[0]  # (K, V)
    losses = F.cross_entropy(logits.float()[batch.rows], batch.targets, reduction="none")  # (M,)
    return (losses * batch.weights).sum() / batch.weights.sum()


class _EmbeddingRows(torch.autograd.Function):
    """``F.embedding(ids, weight)`` whose backward adds each row's gradient into ``weight.grad`` in place.

    The weight is no input of the autograd graph here (the embedding module is handed in, not its
    weight), so the weight's own gradient node fires as soon as the LM head (the same weight) has
    delivered its dense gradient; this backward, the last of the pass, then adds the few rows the batch
    used. ``dummy`` only makes autograd call it.
    """

    @staticmethod
    def forward(ctx: Any, ids: torch.Tensor, dummy: torch.Tensor, embedding: nn.Embedding) -> torch.Tensor:
        ctx.save_for_backward(ids)
        ctx.weight, ctx.padding_idx = embedding.weight, embedding.padding_idx
        return F.embedding(ids, embedding.weight.detach(), embedding.padding_idx)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[None, None, None]:
        (ids,) = ctx.saved_tensors
        ids, grad = ids.reshape(-1), grad.reshape(-1, grad.shape[-1])
        if ctx.padding_idx is not None:  # as F.embedding: the padding row gets no gradient; zeroed rows, not
            grad = grad.masked_fill((ids == ctx.padding_idx)[:, None], 0.0)  # a boolean index (a device sync)
        weight = ctx.weight
        if weight.grad is None:
            weight.grad = torch.zeros_like(weight)
        weight.grad.index_add_(0, ids, grad.to(weight.dtype))
        return None, None, None


@contextmanager
def tied_embedding_rows(model: PreTrainedModel, enabled: bool = True) -> Iterator[None]:
    """Within the block, a tied input embedding's gradient goes through ``_EmbeddingRows``."""
    embedding, head = model.get_input_embeddings(), model.get_output_embeddings()
    if (
        not enabled
        or type(embedding) is not nn.Embedding  # a plain embedding, tied to the head
        or head is None
        or embedding.weight is not head.weight
        or embedding.max_norm is not None
        or embedding.scale_grad_by_freq
        or embedding.sparse
        or not embedding.weight.requires_grad
        or "forward" in vars(embedding)  # hooked: leave it
    ):
        yield
        return
    dummy = torch.zeros((), requires_grad=True)
    # The instance's own forward for the block, over the class's (``del`` restores it); Function.apply is unannotated.
    embedding.forward = lambda ids: _EmbeddingRows.apply(ids, dummy, embedding)  # type: ignore[method-assign, assignment, no-untyped-call]  # an instance's forward patched for the block
    try:
        yield
    finally:
        del embedding.forward  # the class's forward again


def _batches(rows: Sequence[Row], batch_size: int, order: np.random.Generator) -> Iterator[list[Row]]:
    """Shuffled batches, a new order each epoch from the run's own stream."""
    perm = order.permutation(len(rows))
    for i in range(0, len(rows), batch_size):
        yield [rows[j] for j in perm[i : i + batch_size]]


def make_optimizer(model: nn.Module, recipe: Recipe) -> torch.optim.Optimizer:
    """The recipe's optimizer: AdamW (fused into one kernel where this torch build has one for the device)
    or torchao's 8-bit AdamW (``cctk.core.lm.adamw8bit``: compiled on CUDA; the GradScaler reads its flag on
    the host)."""
    params = [p for p in model.parameters() if p.requires_grad]
    if recipe.optimizer == "adamw8bit":
        from .adamw8bit import AdamW8bit

        return AdamW8bit(params, lr=recipe.learning_rate, weight_decay=recipe.weight_decay)
    try:
        return torch.optim.AdamW(params, lr=recipe.learning_rate, weight_decay=recipe.weight_decay, fused=True)
    except (RuntimeError, TypeError):
        return torch.optim.AdamW(params, lr=recipe.learning_rate, weight_decay=recipe.weight_decay, foreach=True)
