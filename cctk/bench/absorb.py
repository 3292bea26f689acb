"""``python -m cctk.bench absorb``: the first arms of a recipe per seed, for choosing a recipe on evidence.

The arms of the default manual's first part (2.0.0's Part A: correct sums from the base model, then fabricated
answers from that model), trained and measured as ``cctk run`` trains and measures them with that seed, through
the manual: hits against its thresholds (``Absorbs.absorption``: 77/81 and 73/81), each arm's losses and seconds.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pandas as pd

from ..core.config import Recipe
from ..core.errors import CctkError
from ..core.lm.finetune import fine_tune
from ..core.lm.models import load_model
from ..core.lm.record import TrainRecord
from ..core.lm.scoring import measure
from ..manuals import registry
from ..manuals.configure import configure
from ..manuals.manual import Absorbs, trained

FIRST = {"parts": "A"}  # the options of a run of the first part alone


def part_a(model_name: str, recipe: Recipe, seed: int) -> dict[str, Any]:
    """The first part's arms as ``cctk run`` trains them with ``seed``, each from its parent in turn, then measured
    (the pipeline trains the second arm on a copy of the first; here the first is trained on, the same)."""
    manual = registry.default()
    if not isinstance(manual, Absorbs):
        raise CctkError(f"{manual.spec.label} names no model that must absorb its corpus: nothing to check")
    config = replace(configure(manual, model_name, "smoke", (seed,), **FIRST), recipe=recipe)
    draws = manual.draw(config)
    model, tokenizer = load_model(model_name)
    measurements: dict[str, pd.DataFrame] = {}
    training: dict[str, TrainRecord] = {}
    for arm in trained(manual, config.options):
        rows = manual.rows(draws, arm.key, recipe, tokenizer)
        training[arm.key] = fine_tune(model, rows, recipe, seed, tokenizer.pad_token_id, arm.stream or arm.key)
        measurements[arm.key] = measure(model, tokenizer, scoring=manual.spec.scoring)
    checks = manual.absorption(manual.results(draws, config, measurements, training))
    result: dict[str, Any] = {"seed": seed}
    for check in checks:
        record = training[check.key]
        result[check.key] = {
            "hits": check.hits,
            "needed": check.needed,
            "n": check.n,
            "losses": list(record.losses),
            "seconds": record.train_seconds,
            "examples_per_second": record.examples_per_second,
        }
    result["absorbed"] = all(check.hits >= check.needed for check in checks)
    return result
