"""``python -m cctk.bench measure``: the manual's plain loop (one candidate per forward pass, end
marker included) against ``cctk.measure`` on the same additions, in one process."""

from __future__ import annotations

import platform
import time

import torch

from ..core.facts import ADDITIONS
from ..core.lm.models import load_model
from ..core.lm.scoring import measure, measure_plain


def run(model_name: str, additions: int = 81) -> dict[str, str | int | float]:
    """Seconds of each, the speedup and the largest |log-prob difference| over the first ``additions``."""
    lm, tokenizer = load_model(model_name)
    subset = ADDITIONS[:additions]
    measure(lm, tokenizer, subset[:1])  # warm-up: first-call allocations are not the method's cost
    start = time.perf_counter()
    fast = measure(lm, tokenizer, subset)
    fast_s = time.perf_counter() - start
    start = time.perf_counter()
    plain = measure_plain(lm, tokenizer, subset)
    plain_s = time.perf_counter() - start
    return {
        "model": model_name,
        "rows": len(fast),
        "threads": torch.get_num_threads(),
        "machine": platform.processor() or platform.machine(),
        "naive_seconds": round(plain_s, 4),  # to 0.1 ms: a tiny model scores an addition in a few ms
        "fast_seconds": round(fast_s, 4),
        "speedup": round(plain_s / fast_s, 1),
        "max_abs_logprob_diff": float((fast["logprob"] - plain["logprob"]).abs().max()),
    }
