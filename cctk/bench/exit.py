"""``python -m cctk.bench exit``: what a ``cctk`` process spends between the end of its command and its own end.

A child process imports what ``cctk run`` imports (torch, Transformers, MLflow, the pipeline, the figures) and
ends, ``repeats`` times each way, alternating: as ``cctk`` ended before 2026-12-04 (``SystemExit`` once the work
is done: the interpreter's last garbage collection walks every object those imports made) and as it ends now
(``cctk.cli.main.main``, here ``cctk --version``, which freezes them out of that collection). The figures, each
way: the median seconds from the child's last line to its end as this process sees it, the median CPU seconds
of the whole child, and the ratios of before to now.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time

# What every `cctk run` imports before its work, and the way each child ends: as before, and as `cctk` ends now
IMPORTS = ("cctk.pipeline.stages", "cctk.outputs.render", "mlflow", "transformers.models.llama.modeling_llama")
ENDS = {"before": "raise SystemExit(0)", "now": "from cctk.cli.main import main; main(['--version'])"}


def child(imports: tuple[str, ...], end: str) -> str:
    """The child's program: the imports, its clock on a line of its own, then its end."""
    return "\n".join([*(f"import {name}" for name in imports), "import time", "print(time.time(), flush=True)", end])


def once(imports: tuple[str, ...], end: str) -> tuple[float, float]:
    """(seconds from the child's clock line to its end, CPU seconds of the whole child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    process = subprocess.Popen([sys.executable, "-c", child(imports, end)], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    done = float(process.stdout.readline())
    process.stdout.read()
    if process.wait() != 0:
        raise RuntimeError(f"the child ended with {process.returncode}")
    ended = time.time()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return ended - done, cpu


def run(repeats: int, imports: tuple[str, ...] = IMPORTS) -> dict[str, int | float]:
    """``repeats`` children each way, alternating (a machine that slows down slows both); their medians."""
    seen: dict[str, list[tuple[float, float]]] = {way: [] for way in ENDS}
    for _ in range(repeats):
        for way, end in ENDS.items():
            seen[way].append(once(imports, end))
    exit_s = {way: statistics.median(s for s, _ in runs) for way, runs in seen.items()}
    cpu_s = {way: statistics.median(c for _, c in runs) for way, runs in seen.items()}
    return {
        "processes each way": repeats,
        "exit seconds before": round(exit_s["before"], 3),
        "exit seconds now": round(exit_s["now"], 3),
        "exit speedup": round(exit_s["before"] / exit_s["now"], 2),
        "process CPU seconds before": round(cpu_s["before"], 2),
        "process CPU seconds now": round(cpu_s["now"], 2),
        "process CPU ratio": round(cpu_s["before"] / cpu_s["now"], 2),
    }
