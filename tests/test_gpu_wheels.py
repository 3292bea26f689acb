"""scripts/gpu-wheels.txt, what issue 55's device check (scripts/gpu_pipeline.py) carries to the device: MLflow,
torchao and openpyxl among its wheels, every one at constraints.txt's pin (the versions the suite runs), each
once (two versions of one package stop the whole install there)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import Version
from test_constraints import read_pins

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("gpu_pipeline", ROOT / "scripts" / "gpu_pipeline.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_device_checks_wheels_are_pinned_as_the_suite_runs_them():
    pins = read_pins((ROOT / "constraints.txt").read_text())
    listed = [line.split("==") for line in _script().wheel_pins()]
    names = [canonicalize_name(name) for name, _ in listed]
    assert len(names) == len(set(names))
    assert {"mlflow", "mlflow-skinny", "mlflow-tracing", "sqlalchemy", "alembic", "torchao", "openpyxl"} <= set(names)
    assert [(n, v) for n, (_, v) in zip(names, listed, strict=True) if pins.get(n) != Version(v)] == []


def test_the_download_line_is_the_device_readmes():
    """CPython 3.12 wheels for the device's x86-64 Linux, binaries only, no dependency followed: what the device
    README prescribes (a wheel of another Python or platform would not install there)."""
    download = _script().DOWNLOAD
    assert download[:7] == ["-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12"]
    assert "--platform=manylinux_2_28_x86_64" in download and "--platform=manylinux2014_x86_64" in download
