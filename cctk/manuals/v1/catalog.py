"""The figures of a protocol v1 run (manual 1.0.0): the before/after bars of Listing 12 for its three
additions, then the training loss. Drawn and written by ``cctk.outputs.write``, as a 2.0.0 run's."""

from __future__ import annotations

from ... import figures as charts
from ...figures.spec import Spec
from .experiment import AFTER, BEFORE, ComparisonResults
from .facts import PAIRS
from .labels import figure_name, model_name


def specs(results: ComparisonResults, model_label: str) -> list[Spec]:
    """The before/after bars of 3 + 5, 5 + 8 and 7 + 4, then the training loss."""
    out = []
    for number, (a, b) in enumerate(PAIRS, start=1):
        args = {
            "before": results.measurements[BEFORE],
            "after": results.measurements[AFTER],
            "a": a,
            "b": b,
            "true_sum": a + b,
            "fabricated": int(results.draws.fabricated.loc[(a, b)]),
            "model_label": model_label,
        }
        key, title = f"bars:{a}+{b}", f"{a} + {b} before and after fine-tuning on fabricated answers"
        out.append(Spec(number, key, "comparison", charts.before_after_bars, args, title, figure_name(key)))
    losses = {model_name(key): list(t.losses) for key, t in results.training.items()}
    args = {"losses": losses, "main": list(losses)}
    title = "Training loss per epoch"
    return [*out, Spec(len(out) + 1, "loss", "runs", charts.loss_chart, args, title, figure_name("loss"))]
