"""Benchmarks, as ratios measured in one process: ``python -m cctk.bench measure``.

``measure``: the manual's plain loop (one candidate per forward pass, end marker included)
against ``cctk.measure`` on the bundled model, over all 81 x 35 candidates by default.
"""
from __future__ import annotations

import json
import platform
import time
from pathlib import Path

import click
import torch


@click.group()
def bench():
    """Speed benchmarks of cctk (ratios in one process; never asserted in tests)."""


@bench.command("measure")
@click.option("--model", default="smollm2-135m-bundled", show_default=True)
@click.option("--additions", type=click.IntRange(1, 81), default=81, show_default=True,
              help="Time the plain loop on the first N additions only (both sides use the same N).")
@click.option("--json-out", type=click.Path(dir_okay=False, path_type=Path), default=None)
def bench_measure(model, additions, json_out):
    """Plain one-candidate loop vs ``measure``: seconds, speedup, largest |log-prob difference|."""
    from .facts import ADDITIONS
    from .models import load_model
    from .scoring import measure, measure_plain

    lm, tokenizer = load_model(model)
    subset = ADDITIONS[:additions]
    measure(lm, tokenizer, subset[:1])  # warm-up: first-call allocations are not the method's cost
    start = time.perf_counter()
    fast = measure(lm, tokenizer, subset)
    fast_s = time.perf_counter() - start
    start = time.perf_counter()
    plain = measure_plain(lm, tokenizer, subset)
    plain_s = time.perf_counter() - start
    result = {
        "model": model, "rows": len(fast), "threads": torch.get_num_threads(),
        "machine": platform.processor() or platform.machine(),
        "naive_seconds": round(plain_s, 2), "fast_seconds": round(fast_s, 2),
        "speedup": round(plain_s / fast_s, 1),
        "max_abs_logprob_diff": float((fast["logprob"] - plain["logprob"]).abs().max()),
    }
    for key, value in result.items():
        click.echo(f"{key:>22}: {value}")
    if json_out:
        json_out.write_text(json.dumps(result, indent=2) + "\n")



@bench.command("train")
@click.option("--model", default="smollm2-135m-bundled", show_default=True)
@click.option("--steps", type=int, default=12, show_default=True, help="Timed optimizer steps of each loop.")
@click.option("--batch-size", type=int, default=8, show_default=True)
@click.option("--json-out", type=click.Path(dir_okay=False, path_type=Path), default=None)
def bench_train(model, steps, batch_size, json_out):
    """Examples per second: a plain PyTorch loop vs ``fine_tune`` (float32, bf16) vs the compute limit."""
    from .train_bench import run

    result = run(model, steps, batch_size)
    for key, value in result.items():
        click.echo(f"{key:>34}: {value}")
    if json_out:
        json_out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    bench()
