"""run_info.json: the facts of a run in machine-readable form (hardware, software, recipe, seeds, runs)."""
from __future__ import annotations

import json
import os
import platform
import sys
from dataclasses import asdict
from importlib import metadata
from pathlib import Path

from .. import __version__
from ..config import Config
from ..experiments import Results
from ..facts import CANDIDATES, END_MARKER
from ..lineage import ARMS
from ..models import model_id
from ..names import model_name

SEED_ROLES = {
    "seeds[0]": "every random draw of the run: the held-out split, the fabricated answers, the control answers, "
                "the corpus shuffles, the batch order and dropout of every fine-tuning run (re-seeded at its "
                "start), and the bootstrap of the deviation bands",
    "seeds[1:]": "reserved for repetitions; not used by this run",
}


def hardware() -> dict:
    """Processor, cores, memory and, when CUDA is available, the GPU (name, memory)."""
    info = {"processor": _processor(), "machine": platform.machine(), "system": platform.platform(),
            "cores_logical": os.cpu_count(), "cores_available": len(os.sched_getaffinity(0))
            if hasattr(os, "sched_getaffinity") else os.cpu_count(), "memory_bytes": _memory()}
    torch = sys.modules.get("torch")  # only asked when the run itself loaded torch
    if torch is not None and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update({"gpu": props.name, "gpu_memory_bytes": int(props.total_memory),
                     "gpu_count": torch.cuda.device_count()})
    else:
        info.update({"gpu": None, "gpu_memory_bytes": None, "gpu_count": 0})
    return info


def software() -> dict:
    versions = {"python": platform.python_version(), "cctk": __version__}
    for package in ("torch", "transformers", "mlflow", "pandas", "numpy", "scipy", "matplotlib"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    torch = sys.modules.get("torch")
    versions["cuda"] = getattr(getattr(torch, "version", None), "cuda", None) if torch else None
    return versions


def _processor() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def run_info(results: Results, config: Config, run: dict, headline: dict) -> dict:
    """Everything SPEC 4 asks of run_info.json; ``run`` holds session, MLflow ids, seconds, device."""
    return {
        "session": run["session"],
        "model": {"key": config.model, "id": model_id(config.model)},
        "profile": config.profile,
        "recipe": asdict(config.recipe),
        "holdout": config.holdout,
        "heldout_additions": [list(p) for p in results.inputs.split.heldout],
        "seeds": {"values": list(config.seeds), "drawn_fresh": config.seeds_drawn, "roles": SEED_ROLES},
        "candidates": list(CANDIDATES),
        "end_marker": END_MARKER,
        "device": str(run.get("device", "")),
        "hardware": run.get("hardware") or hardware(),
        "software": run.get("software") or software(),
        "mlflow": {"tracking_uri": run.get("tracking_uri"), "experiment_id": run.get("experiment_id"),
                   "run_id": run.get("run_id")},
        "training": {a.key: {"model": model_name(a.key), "parent": model_name(a.parent), **results.training[a.key]}
                     for a in ARMS if a.key in results.training},
        "headline": headline,
        "seconds": run.get("seconds"),
    }


def write(info: dict, path: Path) -> None:
    path.write_text(json.dumps(info, indent=2, ensure_ascii=False, default=_plain) + "\n")


def _plain(value):
    """numpy scalars (and anything else odd) as plain JSON values."""
    return value.item() if hasattr(value, "item") else str(value)
