"""Manual 2.0.0's figure catalog: the 25 figures of a run (SPEC 4), in the order of the report, each a
``cctk.figures.spec.Spec`` built from a ``StudyResults`` (its number, plain name and a drawing function with
plain arguments, so a worker process can draw it from a pickled spec).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from ... import figures
from ...core.stats import smallest_band
from ...figures.spec import Spec
from . import charts
from .design import ARM_BY_KEY, ARMS, CONTROLS, MAIN_SEQUENCE, family_arms, own_target, part_arms
from .labels import HEATMAP_HELD, HEATMAP_LEFT_OUT, figure_name, model_name, target_name
from .parts import ALL_SEEN, StudyResults
from .parts.part_d import RULE_AND_CONTROL, deviations

BEFORE_AFTER = (3, 5)  # the addition of the before/after bars (manual 1.0.0 style)


# The report's order: figure key, part. Heatmaps are "heatmap:<model>[:<target>]".
ORDER: tuple[tuple[str, str], ...] = (
    ("heatmap:base", "A"),
    ("heatmap:m_correct", "A"),
    ("heatmap:m_random", "A"),
    ("heatmap:m_random:correct", "A"),
    ("profile:fabricated", "A"),
    ("bars", "A"),
    ("heatmap:m_recover", "B"),
    ("profile:correct", "B"),
    *((f"heatmap:{k}", "C") for k in part_arms("C")),
    ("profile:plus18", "C"),
    ("profile:plus3", "C"),
    *((f"heatmap:{k}", "D") for k in part_arms("D")),
    ("profile:cond", "D"),
    ("deviation:m_correct", "D"),
    ("deviation:m_random", "D"),
    ("synthesis", "synthesis"),
    ("loss", "runs"),
    ("curves", "runs"),  # only with --curves
)
# A figure's number stays when parts are left out (--parts): figure 15 is always sum + 18's profile.
NUMBER = {key: i for i, (key, _) in enumerate(ORDER, start=1)}

# Probability profiles: models drawn, target table, band of possible answers (None: no bands).
PROFILES: dict[str, tuple[tuple[str, ...], str, tuple[int, int] | None]] = {
    "correct": (("base", "m_correct", "m_random", "m_recover"), "Correct sums and recovery", (2, 18)),
    "fabricated": (("m_correct", "m_random"), "Fabricated answers", None),
    "plus18": (family_arms("plus18"), "Sum + 18", (20, 36)),  # the rules and their controls
    "plus3": (family_arms("plus3"), "Sum + 3", (5, 21)),
    "cond": (family_arms("cond"), "Conditional rule", None),
}


def heatmap_keys(key: str) -> list[str]:
    """The heatmap figures of one model: its own target, and the correct sum for m_random."""
    return [f"heatmap:{key}"] + (["heatmap:m_random:correct"] if key == "m_random" else [])


def _spec(key: str, draw: Callable[..., Figure], args: dict[str, Any], title: str, shows: str = "") -> Spec:
    """Figure ``key`` as the report orders, sections and names it (``shows``: ``Spec.shows``)."""
    return Spec(NUMBER[key], key, dict(ORDER)[key], draw, args, title, figure_name(key), shows)


def heatmap_spec(results: StudyResults, figure: str) -> Spec:
    _, key, *named = figure.split(":")
    target = named[0] if named else own_target(key)
    split = target == own_target(key) and key not in ALL_SEEN  # its own target, with seen and held out
    held = results.inputs.heldout(key) if split else None
    excluded = results.inputs.excluded.get(key, ()) if split else ()
    title = f"{model_name(key)}: probability on the {target_name(target)}"
    args = {
        "readings": results.readings(key, target),
        "title": title,
        "heldout": held,
        "excluded": excluded,
        "fixed_scale": key != "base",
    }
    shows = (HEATMAP_LEFT_OUT if excluded else HEATMAP_HELD) if held else ""  # its caption names the colours it has
    return _spec(figure, figures.target_heatmap, args, title, shows)


def specs(results: StudyResults, tables: dict[str, pd.DataFrame], model_label: str) -> list[Spec]:
    """The figures of the parts the run ran, in ORDER: all 25 (26 with learning curves) when every part ran."""
    build = {
        "heatmap": lambda key: heatmap_spec(results, key),
        "profile": lambda key: _profile(results, key.split(":")[1]),
        "deviation": lambda key: _deviation(results, tables["table08"], *_rule_from(key.split(":")[1])),
        "bars": lambda key: _bars(results, model_label),
        "synthesis": lambda key: _synthesis(tables["table09"]),
        "loss": lambda key: _loss(results),
        "curves": lambda key: _curves(results),
    }
    has_curves = results.curves is not None and len(results.curves) > 0
    return [
        build[key.split(":")[0]](key) for key, part in ORDER if results.ran(part) and (key != "curves" or has_curves)
    ]


def _rule_from(parent: str) -> tuple[str, str]:
    """The conditional rule and its control trained from ``parent`` (the deviation chart's pair)."""
    return next((rule, control) for rule, control in RULE_AND_CONTROL if ARM_BY_KEY[rule].parent == parent)


def _profile(results: StudyResults, target: str) -> Spec:
    models, title, band = PROFILES[target]
    targets = results.inputs.targets[target]
    if target == "cond":  # the range of the rule's own answers
        band = (int(targets.min()), int(targets.max()))
    trained_on_seen = any(ARM_BY_KEY[k].pairs == "seen" for k in models if k in ARM_BY_KEY)
    title = f"Probability profile: {title}"
    args = {
        "series": {model_name(k): results.measurements[k] for k in models},
        "targets": targets,
        "title": title,
        "band": band,
        "heldout": results.inputs.split.heldout if trained_on_seen else None,
    }
    return _spec(f"profile:{target}", charts.probability_profile, args, title)


def _deviation(results: StudyResults, table08: pd.DataFrame, rule: str, control: str) -> Spec:
    rule_dev, control_dev = deviations(results, rule), deviations(results, control)
    row = table08[(table08["model_key"] == rule) & (table08["coverage"].round(2) == 0.90)].iloc[0]
    k90 = int(row["k"])
    legend = {model_name(rule): k90, model_name(control): smallest_band(control_dev, 0.90)}
    parent = ARM_BY_KEY[rule].parent
    title = f"Deviation from the conditional rule, trained from {model_name(parent)}"
    args = {"rule_dev": rule_dev, "control_dev": control_dev, "k90": k90, "k_legend": legend, "title": title}
    return _spec(f"deviation:{parent}", charts.deviation_chart, args, title)


def _bars(results: StudyResults, model_label: str) -> Spec:
    a, b = BEFORE_AFTER
    args = {
        "before": results.measurements["base"],
        "after": results.measurements["m_random"],
        "a": a,
        "b": b,
        "true_sum": int(results.inputs.targets["correct"].loc[(a, b)]),
        "fabricated": int(results.inputs.targets["fabricated"].loc[(a, b)]),
        "model_label": model_label,
    }
    title = f"{a} + {b} before and after fine-tuning on fabricated answers"
    return _spec("bars", figures.before_after_bars, args, title)


def synthesis_rows(table09: pd.DataFrame) -> pd.DataFrame:
    """table09 in the chart's series (``cctk.manuals.v2.charts.synthesis.SERIES``): the base model, seen (all 81 for
    the models trained on all of them), held out, and held out of a control; read from its key columns."""
    series = table09["group_key"].replace({"all": "seen"})
    series[(table09["group_key"] == "heldout") & table09["model_key"].isin(CONTROLS)] = "control_heldout"
    series[table09["model_key"] == "base"] = "base"
    return table09.assign(series=series)


def _synthesis(table09: pd.DataFrame) -> Spec:
    title = "Synthesis: hits on each model's own target"
    return _spec("synthesis", charts.synthesis_chart, {"rows": synthesis_rows(table09)}, title)


def losses(results: StudyResults) -> dict[str, list[float]]:
    return {model_name(a.key): list(results.training[a.key].losses) for a in ARMS if a.key in results.training}


def _loss(results: StudyResults) -> Spec:
    args = {"losses": losses(results), "main": [model_name(k) for k in MAIN_SEQUENCE]}
    return _spec("loss", figures.loss_chart, args, "Training loss per epoch")


def _curves(results: StudyResults) -> Spec:
    """The arms' panels in ARMS order, each named by today's label of its key (curves.csv may be older)."""
    assert results.curves is not None, "the learning curves' figure of a run without them"
    curves = results.curves.assign(model=results.curves["model_key"].map(model_name))
    args = {"curves": curves, "order": [model_name(a.key) for a in ARMS]}
    title = "Learning curves: hits on each arm's own target after every epoch"
    return _spec("curves", charts.learning_curves, args, title)
