"""What KR-Test training will take, said before it starts, and what it took against its compute limit.

A KR-Test arm's time is its training and its evaluations (the items scored and the validation perplexity
every K steps and at the last). Before the first arm trains, ``forecast`` prints the training's compute
limit (``cctk.core.lm.compute``: each arm's rows over its epochs, their FLOPs at the device's GEMM peak
measured at the start; a LoRA arm's frozen weights take no weight gradients: 4 x rather than 6 x) and the
evaluations to come, each as long as the untouched model's took; where an arm's training time over its limit
was timed on such a device (``TRAINING_RATIO``), the whole. At each arm's end ``arm_metrics`` logs its limit
and its training's ratio to it, as a pipeline run does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...core.lm import compute
from ..measurement.train import TrainConfig

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from ...core.lm.corpus import Row
    from ..measurement.train import Trained

# KR-Test training time over its compute limit, where it was timed: the default study of the bundled model on its
# generated data set on two CPU cores, its three arms' 278.6 s of training against a limit of 181.7 s (full 1.49x,
# LoRA on attention 1.52x, on the FFN 1.60x; 2026-12-07, docs/krtest.md). None on a GPU yet (issue 55).
TRAINING_RATIO = {"cpu": (1.53, "the bundled model's study arms took on two CPU cores")}


def evaluations(config: TrainConfig, rows: int) -> int:
    """The evaluations an arm of ``config`` makes while it trains on ``rows`` rows: every ``eval_every`` optimizer
    steps and at the last (step 0 apart: the untouched model's)."""
    total = config.recipe.steps(rows)
    return total // config.eval_every + (1 if total % config.eval_every else 0)


def planned_cost(model: PreTrainedModel, rows: Sequence[Row], arm: TrainConfig, peak: float) -> compute.Cost:
    """The compute limit of ``arm`` training ``model`` (untouched: no adapter yet) on ``rows`` at ``peak`` GFLOP/s:
    its rows over its epochs, at 6 x the weights a token for full fine-tuning and 4 x for LoRA."""
    per_row = compute.example_flops(model, rows, trains_weights=arm.method == "full") / 1e9
    return compute.planned_cost([(len(rows) * arm.recipe.epochs, per_row)], peak, arm.recipe.precision)


def forecast(
    arms: Sequence[tuple[TrainConfig, compute.Cost]], rows: int, per_eval: float, device_type: str
) -> tuple[str, dict[str, float]]:
    """The line printed before the first arm trains, and its metrics (``estimated_limit_seconds``,
    ``estimated_eval_seconds``; ``estimated_seconds`` where ``TRAINING_RATIO`` knows the device): the arms'
    compute limit (each arm's ``planned_cost``, at one peak), the evaluations at ``per_eval`` seconds each (as the
    untouched model's took)."""
    costs = [cost for _, cost in arms]
    ((precision, peak_gflops, pinned),) = {(c.precision, c.peak_gflops, c.pinned) for c in costs}  # one arithmetic
    cost = compute.Cost(sum(c.examples for c in costs), sum(c.gflop for c in costs), peak_gflops, precision, pinned)
    limit, count = cost.limit_seconds, sum(evaluations(arm, rows) for arm, _ in arms)
    peak = "the GEMM peak pinned" if cost.pinned else "this machine's GEMM peak at the start"
    steps = sorted({arm.eval_every for arm, _ in arms})
    every = "every step" if steps == [1] else f"every {'/'.join(map(str, steps))} steps"
    line = (
        f"estimated: the training's {cost.precision} compute limit is {limit / 60:.1f} min ({cost.examples:,} rows "
        f"x {cost.gflop_per_example:.2f} GFLOP at {cost.peak_gflops:,.0f} GFLOP/s, {peak}); {count} evaluation"
        f"{'s' * (count != 1)} ({every} and the last) at {per_eval:.1f} s{' each' * (count != 1)}, "
        f"as the untouched model's took: {count * per_eval / 60:.1f} min"
    )
    metrics = {"estimated_limit_seconds": limit, "estimated_eval_seconds": count * per_eval}
    if device_type not in TRAINING_RATIO:
        return line + f"; no KR-Test training has been timed against its limit on a {device_type} device yet", metrics
    ratio, where = TRAINING_RATIO[device_type]
    metrics["estimated_seconds"] = whole = ratio * limit + count * per_eval
    return line + (
        f"; the training and its evaluations about {whole / 60:.1f} min (the training {ratio:.2f}x its limit, as "
        f"{where})"
    ), metrics


def arm_metrics(trained: Trained, cost: compute.Cost) -> dict[str, float]:
    """An arm's compute limit (``cost``: its own, ``planned_cost`` of it alone before it trained) and its
    training's time over it (``limit_ratio``; its evaluations left out), as a pipeline run logs them."""
    return {
        "compute_limit_seconds": cost.limit_seconds,
        "limit_ratio": trained.train_seconds / cost.limit_seconds,
        "gflop_per_example": cost.gflop_per_example,
        "gemm_peak_gflops": cost.peak_gflops,
    }
