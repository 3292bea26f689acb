"""``python -m cctk.bench gpu``: the first contact with a device, before a long run is trusted to it.

On any device (on a CPU at small sizes, in a minute or two; on a GPU at the roster's sizes, in minutes):
what the device is and which arithmetic it has; its GEMM peaks; the packed training step against the
padded one on the device (loss and gradients); ``measure`` on the device against the CPU; the memory
estimate of ``cctk.core.lm.memory`` against the peak measured while training roster shapes with random weights
(no Hub), each shape planned first against what the device has free (one that does not fit is reported,
not trained: the check finishes on a 16 GB card); how often a training step synchronises with the host,
for every precision and optimizer the device takes; how launch-bound the manual's step is (the operations
it dispatches, and on CUDA its kernels and how busy they keep the card: ``cctk.bench.launches``); and the
line a smaller card's user would get. Models
are built from the roster's configurations with random weights: nothing is downloaded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import platform
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol, cast

import torch

from ..core.config import Recipe
from ..core.errors import CctkError
from ..core.facts import ADDITIONS, correct_sums
from ..core.lm import compute, memory, models
from ..core.lm.corpus import Row, build_corpus, tokenize
from ..core.lm.device import check_recipe, resolve, room
from ..core.lm.finetune import batch_loss, fine_tune, to_model
from ..core.lm.scoring import measure
from . import launches
from .syncs import SyncCounter
from .train import profiles

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

SHAPES = {"cpu": ("smollm2-135m",), "cuda": ("smollm2-135m", "qwen2.5-0.5b", "phi-1.5")}
T4 = memory.card_room(14.75, bf16=False, name="emulated 16 GB T4")
PRECISIONS = ("float32", "bf16", "fp16")


def run(device_name: str | None = None) -> dict[str, str]:
    device = resolve(device_name)
    tokenizer = models.load_tokenizer(models.BUNDLED)
    rows = tokenize(build_corpus(correct_sums(), ADDITIONS, 1, seed=1, name="gpu"), tokenizer)
    result = {"device": _describe(device), "torch": torch.__version__, "CUDA": torch.version.cuda or "-"}
    result |= _arithmetic(device)
    result |= _packed_vs_padded(device, tokenizer, rows)
    result |= _measure_here(device, tokenizer)
    for key in SHAPES.get(device.type, SHAPES["cpu"]):
        result |= _memory(device, key, rows, tokenizer.pad_token_id, free_room(device))
    result |= _syncs_per_step(device, tokenizer, rows)
    result |= _launches(device, tokenizer, rows)
    result |= _small_card()
    return result


def _describe(device: torch.device) -> str:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return (
            f"{device}: {props.name}, {props.total_memory / memory.GIB:.0f} GiB, capability {props.major}.{props.minor}"
        )
    return f"{device}: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"


def _refusal(recipe: Recipe, device: torch.device) -> str | None:
    """Why ``check_recipe`` refuses ``recipe`` on ``device``, or None where it may run there."""
    try:
        check_recipe(recipe, device)
    except CctkError as error:
        return f"refused: {error}"
    return None


def _arithmetic(device: torch.device) -> dict[str, str]:
    """Which precisions and optimizers a recipe may ask for here, and the GEMM peak of each."""
    out = {
        f"precision {p}": _refusal(Recipe(precision=p), device)
        or f"{compute.peak_gflops(str(device), p):.0f} GFLOP/s GEMM peak"
        for p in PRECISIONS
    }
    out["optimizer adamw8bit"] = _refusal(Recipe(optimizer="adamw8bit"), device) or "available"
    return out


def _random_model(key: str, device: torch.device, layers: int | None = None) -> PreTrainedModel:
    """A roster shape with random weights, float32, on ``device`` (``layers``: fewer blocks, for a CPU)."""
    from transformers import AutoModelForCausalLM

    config = models.model_config(key)
    if layers:
        config.num_hidden_layers = layers
    torch.manual_seed(0)
    with torch.device(device):
        model: PreTrainedModel = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.eval()  # in place (it returns the model itself, untyped in transformers)
        return model


def _packed_vs_padded(device: torch.device, tokenizer: PreTrainedTokenizerBase, rows: list[Row]) -> dict[str, str]:
    """The packed step's loss and gradients against the padded rows' on the device (float32)."""
    model = _random_model("smollm2-135m", device, layers=2 if device.type == "cpu" else None)
    losses, grads = [], []
    for packing in (True, False):
        model.zero_grad(set_to_none=True)
        loss = batch_loss(model, to_model(rows[:32], tokenizer.pad_token_id, device, packing))
        loss.backward()
        losses.append(loss.item())
        grads.append(torch.cat([_flat_grad(p) for p in model.parameters()]))
    gap = (grads[0] - grads[1]).norm().item() / grads[1].norm().item()
    return {
        "packed vs padded loss, relative": f"{abs(losses[0] - losses[1]) / abs(losses[1]):.1e}",
        "packed vs padded gradients, relative to their norm": f"{gap:.1e}",
    }


def _flat_grad(weight: torch.nn.Parameter) -> torch.Tensor:
    """A weight's gradient, flattened: after ``backward`` every weight of the model has one."""
    assert weight.grad is not None, "a weight without a gradient after backward"
    return weight.grad.flatten()


def _measure_here(device: torch.device, tokenizer: PreTrainedTokenizerBase) -> dict[str, str]:
    """``measure`` of one random model on the device and on the CPU: the largest log-probability gap."""
    model = _random_model("smollm2-135m", torch.device("cpu"), layers=2)
    start = time.perf_counter()
    # transformers wraps PreTrainedModel.to in functools.wraps, which mypy reads as taking ``self`` again
    here = measure(cast("Callable[[torch.device], PreTrainedModel]", model.to)(device), tokenizer)
    seconds = time.perf_counter() - start
    there = measure(model.cpu(), tokenizer)
    gap = (here["logprob"] - there["logprob"]).abs().max()
    return {
        "measure on the device vs the CPU, largest |logprob gap|": f"{gap:.1e}",
        "measure, 2835 candidates, seconds (2-layer model)": f"{seconds:.2f}",
    }


class EmptiesCache(Protocol):
    """What ``free_room`` uses of ``torch.cuda``: emptying the allocator's cache."""

    def empty_cache(self) -> None: ...


def fitting_recipe(plan: memory.Plan) -> Recipe | None:
    """The plan's recipe where it fits, else its nearest variant that does (``memory.options`` order), else None."""
    if plan.shortfall() is None:
        return plan.recipe
    return next((v for v in memory.options(plan.recipe, plan.room) if plan.fits(plan.shape, v)), None)


def free_room(device: torch.device, cache: EmptiesCache = torch.cuda) -> memory.Room:
    """What ``device`` has free for the next shape: the shapes before it collected and the allocator's cache
    emptied first, then read (``cache``: ``torch.cuda``, a fake in the tests). ``room`` counts a cache as free
    (issue 55); emptying it still hands the blocks back, so that the next shape's peak is its own."""
    if device.type == "cuda":
        gc.collect()  # the previous shape's model and optimizer, unreferenced, go before the cache is emptied
        cache.empty_cache()
    return room(device)


def _flags(recipe: Recipe, base: Recipe) -> str:
    return " ".join(
        f"--{n} {getattr(recipe, n)}" for n in ("precision", "optimizer") if getattr(recipe, n) != getattr(base, n)
    )


def _memory(device: torch.device, key: str, rows: list[Row], pad_id: int, free: memory.Room) -> dict[str, str]:
    """What one arm's training needs, estimated and measured (the allocator's peak on CUDA, the rise of the
    process's resident memory on a CPU), with the paper recipe's batch of 8 for 2 steps. Planned first
    against what the device has free: a shape that does not fit is reported, not trained; one that fits
    with a variant of the recipe (8-bit AdamW, a half precision) is trained with it and says so."""
    recipe = dataclasses.replace(profiles()["paper"], epochs=1)
    longest = max(len(ids) for ids, _ in rows)
    plan = memory.Plan(key, memory.Shape.of_config(models.model_config(key)), recipe, longest, free)
    chosen = fitting_recipe(plan)
    label = f"memory {key} (paper recipe)"
    if chosen is None:
        return {label: f"does not fit: {plan.shortfall()}"}
    if chosen != recipe:
        label = f"memory {key} (paper recipe with {_flags(chosen, recipe)}: as is it does not fit)"
    model = _random_model(key, device)
    need = memory.estimate(memory.Shape.of_model(model), chosen, longest, device.type)
    memory.release_freed()
    before = memory.process_memory()
    try:
        record = fine_tune(model, rows[:16], chosen, 1, pad_id, "bench")
    except torch.OutOfMemoryError as error:
        return {label: f"out of memory ({str(error).splitlines()[0][:160]}); estimated {memory.gib(need.device)}"}
    finally:
        del model
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if device.type == "cuda":
        measured, predicted = record.peak_gpu_memory_bytes, need.weights + need.training
        reserved = torch.cuda.max_memory_reserved(device)  # the allocator's own share: what the margin covers
        kept = f"; the allocator reserved {reserved / measured:.2f}x its peak (margin: {memory.MARGIN_SHARE:.0%})"
    else:
        measured, predicted, kept = record.peak_cpu_memory_bytes - before, need.training, ""
    return {
        label: f"estimated {memory.gib(predicted)}, measured {memory.gib(measured)} ({predicted / measured:.2f}x)"
        + kept
    }


def step_recipes(device: torch.device) -> list[Recipe]:
    """Every precision and optimizer a recipe may ask for on this device (``check_recipe``), float32 AdamW first."""
    recipes = (
        Recipe(repeats=1, epochs=2, learning_rate=1e-4, batch_size=16, precision=precision, optimizer=optimizer)
        for precision in PRECISIONS
        for optimizer in ("adamw", "adamw8bit")
    )
    return [recipe for recipe in recipes if _refusal(recipe, device) is None]


def _syncs_per_step(device: torch.device, tokenizer: PreTrainedTokenizerBase, rows: list[Row]) -> dict[str, str]:
    """Synchronisations of the device inside each step of the accelerator's step (host checks off), for
    every precision and optimizer the device takes (``cctk.bench.syncs``: CUDA's own count there, the
    operations that would wait on an accelerator on a CPU); the epoch's one read comes apart."""
    out = {}
    for recipe in step_recipes(device):
        model = _random_model("smollm2-135m", device, layers=2)
        fine_tune(model, rows[:16], recipe, 1, tokenizer.pad_token_id, "warm-up", host_checks=False)
        with counting_steps(device) as steps:
            fine_tune(model, rows, recipe, 1, tokenizer.pad_token_id, "bench", host_checks=False)
        tensors = sum(p.requires_grad for p in model.parameters())
        out[f"syncs in a training step, {recipe.precision} {recipe.optimizer}"] = (
            f"at most {max(steps)} ({sum(steps)} over {len(steps)} steps of a 2-layer model of {tensors} tensors; "
            "a padded batch's mask costs Transformers 5.24 a read, two where its rows differ in length; "
            "a packed one none), and 1 an epoch"
        )
        del model
    return out


def _launches(device: torch.device, tokenizer: PreTrainedTokenizerBase, rows: list[Row]) -> dict[str, str]:
    """How launch-bound the manual's step is (``cctk.bench.launches``): smollm2-135m whole on CUDA, 2 layers
    of it on a CPU, with the paper recipe's batch, for 8 steps."""
    recipe = dataclasses.replace(profiles()["paper"], repeats=1, epochs=1)
    layers = 2 if device.type == "cpu" else None
    model = _random_model("smollm2-135m", device, layers=layers)
    found = launches.step_launches(model, rows[: 8 * recipe.batch_size], recipe, tokenizer.pad_token_id)
    del model
    shape = "2 layers of smollm2-135m" if layers else "smollm2-135m"
    return {f"a training step of {shape}, batch {recipe.batch_size}, float32 adamw": found.line()}


@contextlib.contextmanager
def counting_steps(device: torch.device) -> Iterator[list[int]]:
    """Count the device's synchronisations inside each step of ``_DeviceGuard`` (not while a batch is
    built on the host, nor the epoch's own read). Yields the list of each step's count."""
    with SyncCounter(device) as syncs, launches.per_step(lambda: syncs.total) as steps:
        yield steps


def _small_card() -> dict[str, str]:
    """What a 16 GB T4's user is told for phi-1.5 with the manual's recipe, and what fits there."""
    shapes = models.roster_shapes()
    plan = memory.Plan("phi-1.5", shapes["phi-1.5"], profiles()["paper"], 16, T4, waiting=1, others=shapes)
    return {"phi-1.5, paper recipe, emulated T4": plan.shortfall() or "fits"}
