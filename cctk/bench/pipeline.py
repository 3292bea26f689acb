"""``python -m cctk.bench pipeline``: a whole pipeline against the compute limit of its training.

The pipeline runs as a user runs it (``cctk run`` in a child process, into its own folder and
tracking store), and measures the GEMM peak of this machine at its end; the bench measures it too,
before and after, so a reader sees how steady the machine was. The ratio is the command's wall time
(start-up, model load, training, measuring, figures, reports, logging) over the compute limit of its
training (training examples x GFLOP per example / GEMM peak).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import torch

from ..core.lm.compute import PINNED, peak_flops
from ..store import tracking

# MLflow's variables that would point the timed run at another store, run or experiment than its own
OWN_STORE = ("MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", *tracking.EXPERIMENT_VARIABLES)
READ = (
    "training_examples",
    "gflop_per_example",
    "gemm_peak_gflops",
    "compute_limit_seconds",
    "pipeline_seconds",
    "m_correct_hits_correct",
    "m_random_hits_fabricated",
)


def run(
    model: str, profile: str = "quick", seed: str | None = None, out: Path | None = None, figures: bool = True
) -> dict[str, str | int | float | bool]:
    folder = Path(out) if out else Path(tempfile.mkdtemp(prefix="cctk-bench-"))
    try:
        before = peak_flops() / 1e9  # measured, CCTK_GEMM_PEAK_GFLOPS or not
        uri = f"sqlite:///{folder.resolve() / 'mlflow.db'}"
        command = [sys.executable, "-m", "cctk", "run", "--model", model, "--profile", profile, "--tracking", uri]
        command += ["--out", str(folder / "outputs")] + (["--seed", str(seed)] if seed else [])
        command += [] if figures else ["--no-figures"]
        # the child measures its peak as a user's run does: a pinned one would make the ratio say nothing
        # and logs to its own store's cctk experiment, whatever experiment the shell (or `mlflow run`) names
        env = {k: v for k, v in os.environ.items() if k not in (*OWN_STORE, PINNED)}
        start = time.perf_counter()
        subprocess.run(command, check=True, env=env)
        wall = time.perf_counter() - start
        after = peak_flops() / 1e9
        store = tracking.Store(tracking.resolve(uri))
        runs = store.search([store.experiment(tracking.EXPERIMENT)], f"tags.`{tracking.KIND}` = 'pipeline'")
        metrics = store.metrics(runs[0].run_id, READ)
    finally:
        if out is None:
            shutil.rmtree(folder, ignore_errors=True)
    return _result(model, profile, metrics, wall, (before, metrics["gemm_peak_gflops"], after)) | {"figures": figures}


def _result(
    model: str, profile: str, m: Mapping[str, float], wall: float, peaks: tuple[float, float, float]
) -> dict[str, str | int | float]:
    gflop = m["training_examples"] * m["gflop_per_example"]
    highest = max(peaks)
    return {
        "model": model,
        "profile": profile,
        "threads": torch.get_num_threads(),
        "training examples (all arms and epochs)": int(m["training_examples"]),
        "GFLOP per example": round(m["gflop_per_example"], 2),
        "GEMM peak GFLOP/s, float32: before / the pipeline's / after": " / ".join(f"{p:.0f}" for p in peaks),
        "compute limit of the training, min (the pipeline's peak)": round(m["compute_limit_seconds"] / 60, 2),
        "wall time of the command, min": round(wall / 60, 2),
        "wall time / compute limit (the pipeline's peak)": round(wall / m["compute_limit_seconds"], 2),
        "wall time / compute limit (the highest peak)": round(wall * highest / gflop, 2),
        "correct sums model: correct sums (of 81)": int(m["m_correct_hits_correct"]),
        "fabricated answers model: fabricated answers (of 81)": int(m["m_random_hits_fabricated"]),
    }
