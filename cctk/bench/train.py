"""``python -m cctk.bench train``: how close fine-tuning runs to what the machine can do.

Loops train a fresh copy of the model on the same examples (a fabricated-answers corpus, as the
pipeline builds it): the plain PyTorch loop of the manual (the Hugging Face loss over every
position, AdamW, ``clip_grad_norm_``), then cctk's ``fine_tune`` with its savings added one by one
(padded rows; + packed batches; + in-place embedding rows = the default), and with bf16 autocast where
the device has bf16 arithmetic. The compute limit is the FLOPs an example needs as a padded row
(``cctk.core.lm.compute.example_flops``) over the peak GEMM rate of this machine, measured in the same
process. A packed batch computes fewer FLOPs than its rows would (shared prefixes once), so a loop can
beat that limit; the share of the peak it reaches on the FLOPs it does compute is printed beside it.
"""

from __future__ import annotations

import copy
import math
import platform
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, TypedDict

import torch

from ..core.config import Recipe
from ..core.facts import ADDITIONS, fabricated_answers, rng
from ..core.lm.compute import bf16_missing, example_flops, peak_flops
from ..core.lm.corpus import Row, build_corpus, collate, pack, shared_tokens, tokenize
from ..core.lm.finetune import MIN_SHARED, _batches, fine_tune
from ..core.lm.models import load_model
from ..manuals import registry

if TYPE_CHECKING:
    from transformers import PreTrainedModel


class Switches(TypedDict, total=False):
    """``fine_tune``'s switches of its savings (unset: its defaults)."""

    pack_batches: bool
    row_gradients: bool


VARIANTS: dict[str, Switches] = {  # name -> fine_tune's switches: the savings, added one by one
    "fine_tune, padded rows": {"pack_batches": False, "row_gradients": False},
    "fine_tune, + packed batches": {"pack_batches": True, "row_gradients": False},
    "fine_tune (+ embedding rows in place)": {"pack_batches": True, "row_gradients": True},
}
PLAIN = "plain PyTorch loop"


def profiles() -> Mapping[str, Recipe]:
    """The default manual's profiles (``cctk run``'s): what is timed."""
    return registry.default().spec.profiles


def run(model_name: str, steps: int, batch_size: int) -> dict[str, str | int | float]:
    model, tokenizer = load_model(model_name)
    n = steps * batch_size
    repeats = math.ceil((n + 2 * batch_size) / len(ADDITIONS))  # enough for the warm-up and the timed steps
    rows = tokenize(build_corpus(fabricated_answers(1), ADDITIONS, repeats, seed=1, name="bench"), tokenizer)
    warm, timed = rows[: 2 * batch_size], rows[2 * batch_size : 2 * batch_size + n]
    recipe = replace(profiles()["quick"], epochs=1, batch_size=batch_size, warmup=0.0, schedule="constant")
    speeds = {PLAIN: _plain(copy.deepcopy(model), warm, timed, recipe, tokenizer.pad_token_id)}
    for name, switches in VARIANTS.items():
        speeds[name] = _fine_tune(model, warm, timed, recipe, tokenizer.pad_token_id, switches)
    bf16 = bf16_missing("cpu")
    if bf16 is None:
        speeds["fine_tune, bf16 autocast"] = _fine_tune(
            model, warm, timed, replace(recipe, precision="bf16"), tokenizer.pad_token_id, {}
        )
    flops, done = example_flops(model, timed), computed_flops(model, timed, batch_size)
    peaks = {"float32": peak_flops(torch.float32)} | ({"bf16": peak_flops(torch.bfloat16)} if bf16 is None else {})
    result: dict[str, str | int | float] = {
        "model": model_name,
        "threads": torch.get_num_threads(),
        "batch_size": batch_size,
        "examples timed": n,
        "machine": platform.processor() or platform.machine(),
        "GFLOP per example (padded row)": round(flops / 1e9, 2),
        "GFLOP per example computed (packed)": round(done / 1e9, 2),
    }
    result.update({f"peak GEMM GFLOP/s, {k}": round(v / 1e9, 1) for k, v in peaks.items()})
    result.update({f"examples/s, compute limit {k}": round(v / flops, 1) for k, v in peaks.items()})
    if bf16 is not None:
        result["bf16"] = f"not measured: {bf16}"
    for name, speed in speeds.items():
        precision = "bf16" if "bf16" in name else "float32"
        packed = name != PLAIN and "padded" not in name
        result[f"examples/s, {name}"] = round(speed, 2)
        result[f"{name}: x plain loop"] = round(speed / speeds[PLAIN], 2)
        result[f"{name}: x its compute limit"] = round(speed * flops / peaks[precision], 3)
        result[f"{name}: share of GEMM peak on FLOPs computed"] = round(
            speed * (done if packed else flops) / peaks[precision], 3
        )
    return result


def _fine_tune(
    model: PreTrainedModel, warm: list[Row], timed: list[Row], recipe: Recipe, pad_id: int, switches: Switches
) -> float:
    trained = copy.deepcopy(model)
    fine_tune(trained, warm, recipe, 0, pad_id, "warm-up", **switches)
    return fine_tune(trained, timed, recipe, 0, pad_id, "bench", **switches).examples_per_second


def computed_flops(model: PreTrainedModel, rows: Sequence[Row], batch_size: int) -> float:
    """Mean FLOPs per example that ``fine_tune`` computes on ``rows`` (its batches, packed where it packs):
    6 x the blocks' weights per fed token, 6 x the LM head's weights per node that predicts."""
    head = model.get_output_embeddings().weight
    body = example_flops(model, [([0], [-100])]) / 6  # the blocks' weights (a one-token row, no answer)
    total = 0.0
    for batch in _batches(rows, batch_size, rng(0, "batches:bench")):  # fine_tune's order for this seed
        if shared_tokens(batch) >= MIN_SHARED:
            packed = pack(batch)
            total += 6 * body * packed.input_ids.shape[1] + 6 * head.numel() * len(packed.keep)
        else:
            total += example_flops(model, batch) * len(batch)
    return total / len(rows)


def _plain(model: PreTrainedModel, warm: list[Row], timed: list[Row], recipe: Recipe, pad_id: int) -> float:
    """The manual's loop: the model's own loss (labels with the prompt masked), AdamW, clipping."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.learning_rate, weight_decay=recipe.weight_decay)
    model.train()

    def epoch(rows: list[Row]) -> None:
        for i in range(0, len(rows), recipe.batch_size):
            batch = collate(rows[i : i + recipe.batch_size], pad_id)
            optimizer.zero_grad()
            model(**batch).loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)
            optimizer.step()

    epoch(warm)
    start = time.perf_counter()
    epoch(timed)
    return len(timed) / (time.perf_counter() - start)
