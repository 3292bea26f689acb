"""``cctk compare`` as a function: the runs checked, gathered, written, and logged as one MLflow run (unless
the reader may not write: ``log=False``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..core.labels import counted
from ..outputs import comparison
from ..store import tracking
from . import gather, report


def run(
    store: tracking.Store,
    sweep_id: str | None,
    runs: list[str] | None,
    out: Path,
    tracking_name: str | None = None,
    echo: Callable[[str], None] = print,
    log: bool = True,
) -> tuple[report.Compared, str | None]:
    """Compare the finished cells of sweep ``sweep_id`` or the pipelines ``runs`` (each once) into
    ``out``; returns what was written and the compare run's id (nested under the sweep, when one is given;
    None where ``log`` is off: a reader who may not write compares all the same)."""
    comparison.check_folder(out)
    sweep = store.sweep(sweep_id) if sweep_id else None  # read once: its cells and how many it planned
    ids = gather.run_ids(store, sweep, runs)  # every check before the run exists
    pipelines = counted(len(ids), "pipeline")
    echo(f"comparing {pipelines}{_unfinished(sweep, len(ids))} ...")
    run_id = None
    if log:
        tags = {"mlflow.source.name": "cctk compare", **({tracking.SWEEP: sweep_id} if sweep_id else {})}
        with store.run("compare", f"compare {len(ids)} runs", tags, parent=sweep_id) as logged:
            logged.params({"runs": ",".join(ids), "sweep": sweep_id or ""})
            logged.note(f"cctk compare of {pipelines}" + (f" of sweep {sweep_id}" if sweep_id else ""))
            compared = report.write(gather.gather(ids, tracking_name), out, sweep_id)
            for entry in comparison.written(compared.folder):  # forest.png/.pdf/.eps and findings.csv among them
                logged.files(entry, entry.name if entry.is_dir() else None)
        run_id = logged.run_id
    else:
        compared = report.write(gather.gather(ids, tracking_name), out, sweep_id)
    if compared.findings:  # the console summary opens with the findings in words, as compare.html does
        echo("findings across seeds:")
        for line in compared.findings:
            echo(f"  {line}")
    return compared, run_id


def _unfinished(sweep: tracking.TrackedRun | None, finished: int) -> str:
    """`` (2 of the sweep's 4 cells finished: ...)`` where a sweep's cells have not all finished (a sweep stopped,
    or a cell failed for good), so that its comparison is not read as the whole grid's; else nothing."""
    if sweep is None:
        return ""
    planned = sweep.params.get("cells", "")
    if not planned.isdigit() or int(planned) <= finished:
        return ""
    return f" ({finished} of the sweep's {planned} cells finished: cctk sweep --resume {sweep.run_id} runs the rest)"
