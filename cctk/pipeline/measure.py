"""``cctk measure``: measure one untouched model, write its table and heatmap, track it in MLflow."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from .. import __version__
from ..core.facts import CANDIDATES, END_MARKER, correct_sums
from ..core.lm.device import measurement_plan, placed, resolve as resolve_device
from ..core.lm.models import ModelSource, check_available, load_model, model_config
from ..core.lm.scoring import measure
from ..core.readings import GroupSummary, read, summarize
from ..figures import save_figure, target_heatmap
from ..store import tracking


def run(
    model: str,
    out: Path,
    tracking_name: str | None = None,
    echo: Callable[[str], None] = print,
    device: str | None = None,
) -> GroupSummary:
    """Measure ``model`` on ``device``; returns the summary on the correct sums (hits, prob_target, ...)."""
    where = resolve_device(device)
    found = check_available(model)
    plan = measurement_plan(model, model_config(model), where)  # before anything is loaded
    store = tracking.connect(tracking_name)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)

    echo(f"loading {model} ...")
    lm, tokenizer = load_model(found, keep=False)  # the only copy: no pristine twin waits in host memory
    with placed(lm, plan, where, "the measurement") as lm:
        start = time.perf_counter()
        table = measure(lm, tokenizer)
        seconds = time.perf_counter() - start
    table.to_csv(out / "measurement.csv", index=False)
    readings = read(table, correct_sums())
    summary = summarize(readings)
    figure = target_heatmap(readings, title=f"{model}: probability on the correct sum", fixed_scale=False)
    figures = save_figure(figure, out, "target_heatmap_correct_sum")
    echo(f"measured {summary.n} x {len(CANDIDATES)} candidates in {seconds:.1f} s")
    echo(f"hits on the correct sum: {summary.hits}/{summary.n}")

    # `mlflow run . -e measure` created the run this one becomes (it was left empty beside a second one)
    with store.run("measure", f"measure {found.key}", {tracking.KEY: found.key}, attach=True) as logged:
        _log(logged, found, out, figures, summary, seconds)
    echo(store.link(logged.run_id))
    return summary


def _log(
    run: tracking.LiveRun, model: ModelSource, out: Path, figures: list[Path], summary: GroupSummary, seconds: float
) -> None:
    run.params(
        {
            "model": model.key,
            "model_id": model.id,
            "candidates": f"{CANDIDATES[0]}..{CANDIDATES[-1]}",
            "end_marker": repr(END_MARKER),
            "cctk_version": __version__,
        }
    )
    run.metrics(
        {
            "hits_correct": summary.hits,
            "prob_target": summary.prob_target,
            "surprise": summary.surprise,
            "mass_impossible": summary.mass_impossible,
            "measure_seconds": seconds,
        }
    )
    run.files(out / "measurement.csv")
    for path in figures:
        run.files(path, "figures")
