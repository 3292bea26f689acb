"""Issue 55's device check (scripts/gpu_pipeline.py), its dry run on this CPU: the bundled model's architecture
cut to 2 layers with random weights, Part A of the smoke profile under MLflow (a SQLite store), the report read
back from the store. On the device the same path runs on CUDA, whole, both profiles, with the wheels it carries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cctk.core.lm import models

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_the_device_check_runs_on_the_cpu_and_reports_from_its_store(tmp_path):
    out = tmp_path / "out"
    script = [sys.executable, str(ROOT / "scripts" / "gpu_pipeline.py"), "run", "--device", "cpu"]
    args = ["--layers", "2", "--parts", "A", "--files", models.bundled_folder(), "--out", str(out)]
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([*script, *args], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["gpu-pipeline.log", "mlflow.db", "summary.json"]
    log = (out / "gpu-pipeline.log").read_text()
    assert "2 layers, random" in log and "== smoke: exit 0" in log
    assert "estimated: the training's float32 compute limit is" in log
    assert "x the float32 compute limit of its training" in log  # the pipeline's time against its limit
    summary = json.loads((out / "summary.json").read_text())
    (run,) = summary["runs"]
    assert (run["profile"], run["status"]) == ("smoke", "FINISHED")
    assert run["estimated_limit_seconds"] > 0 and run["limit_ratio"] > 0
    assert set(run["arms"]) == {"base model", "correct sums", "fabricated answers"}
    assert run["arms"]["correct sums"]["steps"] == 12 and run["system_gpu_max"] == {}  # no GPU here
    assert summary["stage_seconds"]["smoke"] > 0
