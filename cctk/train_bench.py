"""``python -m cctk.bench train``: how close fine-tuning runs to what the machine can do.

Three loops train a fresh copy of the model on the same examples (a fabricated-answers corpus):
the plain PyTorch loop of the manual (the Hugging Face loss over every position, AdamW), cctk's
``fine_tune`` in float32 and with bf16 autocast. The compute limit is the FLOPs an example needs
(6 x the transformer blocks' weights x its tokens, plus the LM head on the positions that predict an
answer token) over the peak matrix-product rate of this machine, measured on a large GEMM.
"""
from __future__ import annotations

import copy
import math
import platform
import time
from dataclasses import replace

import torch

from .config import PROFILES, Recipe
from .corpus import build_corpus, collate, tokenize
from .facts import ADDITIONS, fabricated_answers
from .finetune import fine_tune
from .models import load_model


def run(model_name: str, steps: int, batch_size: int) -> dict:
    model, tokenizer = load_model(model_name)
    n = steps * batch_size
    repeats = math.ceil((n + 2 * batch_size) / len(ADDITIONS))  # enough for the warm-up and the timed steps
    rows = tokenize(build_corpus(fabricated_answers(1), ADDITIONS, repeats, seed=1, name="bench"), tokenizer)
    warm, timed = rows[:2 * batch_size], rows[2 * batch_size: 2 * batch_size + n]
    recipe = replace(PROFILES["quick"], epochs=1, batch_size=batch_size, warmup=0.0, schedule="constant")
    speeds = {"plain PyTorch loop, float32": _plain(copy.deepcopy(model), warm, timed, recipe, tokenizer.pad_token_id)}
    for precision in ("float32", "bf16"):
        trained = copy.deepcopy(model)
        fine_tune(trained, warm, replace(recipe, precision=precision), 0, tokenizer.pad_token_id, "warm-up")
        record = fine_tune(trained, timed, replace(recipe, precision=precision), 0, tokenizer.pad_token_id, "bench")
        speeds[f"cctk fine_tune, {precision}"] = record.examples_per_second
    flops = example_flops(model, timed)
    peaks = {"float32": peak_flops(torch.float32), "bf16": peak_flops(torch.bfloat16)}
    result = {"model": model_name, "threads": torch.get_num_threads(), "batch_size": batch_size,
              "examples timed": n, "machine": platform.processor() or platform.machine(),
              "GFLOP per example": round(flops / 1e9, 2)}
    for name, rate in peaks.items():
        result[f"peak GEMM GFLOP/s, {name}"] = round(rate / 1e9, 1)
    for name, speed in speeds.items():
        result[f"examples/s, {name}"] = round(speed, 2)
    for name, rate in peaks.items():
        result[f"examples/s, compute limit {name}"] = round(rate / flops, 1)
    plain = speeds["plain PyTorch loop, float32"]
    for precision in ("float32", "bf16"):
        speed = speeds[f"cctk fine_tune, {precision}"]
        result[f"fine_tune {precision} / plain loop"] = round(speed / plain, 2)
        result[f"fine_tune {precision} / its limit"] = round(speed * flops / peaks[precision], 3)
    return result


def _plain(model, warm, timed, recipe, pad_id: int) -> float:
    """The manual's loop: the model's own loss (labels with the prompt masked), AdamW, clipping."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.learning_rate, weight_decay=recipe.weight_decay)
    model.train()

    def epoch(rows) -> None:
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


def example_flops(model, rows) -> float:
    """Mean FLOPs of one training example: forward + backward (3 x 2 x weights x tokens) through the
    transformer blocks at every position, through the LM head at the answer positions only."""
    head = model.get_output_embeddings().weight
    body = sum(m.weight.numel() for name, m in model.named_modules()
               if isinstance(m, torch.nn.Linear) and m.weight is not head)
    tokens = sum(len(ids) for ids, _ in rows) / len(rows)
    answers = sum(sum(1 for x in labels if x != -100) for _, labels in rows) / len(rows)
    return 6 * body * tokens + 6 * head.numel() * answers


def peak_flops(dtype: torch.dtype, size: int = 2048, seconds: float = 1.5) -> float:
    """The matrix-product rate this machine reaches: repeated ``size``-cube GEMMs in ``dtype``."""
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    a @ b  # warm-up
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        count += 1
    return 2 * size**3 * count / (time.perf_counter() - start)


def part_a(model_name: str, recipe: Recipe, seed: int) -> dict:
    """The Part A arms as the pipeline trains them, for choosing a recipe: correct sums from the base
    model, then fabricated answers from that model; hits on their own targets, losses and seconds.

    Same corpora, batch order, training and measurement as ``cctk run`` with ``seed`` (the pipeline
    trains the second arm on a copy of the first; here the first is trained on, which is the same).
    """
    from .experiments import ABSORBED
    from .lineage import ARM_BY_KEY, build_study_inputs
    from .readings import read
    from .scoring import measure

    inputs = build_study_inputs(seed)
    model, tokenizer = load_model(model_name)
    result = {"seed": seed}
    for key, (target, needed) in ABSORBED.items():
        arm = ARM_BY_KEY[key]
        corpus = build_corpus(inputs.targets[arm.target], inputs.corpus_pairs(key), recipe.repeats, seed, key)
        record = fine_tune(model, tokenize(corpus, tokenizer), recipe, seed, tokenizer.pad_token_id, key)
        hits = int(read(measure(model, tokenizer), inputs.targets[target])["hit"].sum())
        result[key] = {"hits": hits, "needed": needed, "n": len(ADDITIONS), "losses": list(record.losses),
                       "seconds": record.train_seconds, "examples_per_second": record.examples_per_second}
    result["absorbed"] = all(result[key]["hits"] >= result[key]["needed"] for key in ABSORBED)
    return result
