"""``python -m cctk.bench gpu``: the first contact with a device, before a long run is trusted to it.

On any device (on a CPU at small sizes, in a minute or two; on a GPU at the roster's sizes, in minutes):
what the device is and which arithmetic it has; its GEMM peaks; the packed training step against the
padded one on the device (loss and gradients); ``measure`` on the device against the CPU; the memory
estimate of ``cctk.memory`` against the peak measured while training roster shapes with random weights
(no Hub); how often a training step reads the device back on the host; and the line a smaller card's
user would get. Models are built from the roster's configurations with random weights: nothing is
downloaded.
"""
from __future__ import annotations

import contextlib
import dataclasses
import platform
import time
import warnings

import torch

from .. import compute, memory, models
from ..config import PROFILES, Recipe
from ..corpus import build_corpus, tokenize
from ..device import check_recipe, resolve
from ..errors import CctkError
from ..facts import ADDITIONS, correct_sums
from ..finetune import batch_loss, fine_tune, to_model
from ..scoring import measure

SHAPES = {"cpu": ("smollm2-135m",), "cuda": ("smollm2-135m", "qwen2.5-0.5b", "phi-1.5")}
T4 = memory.Room(int(14.6 * memory.GIB), 64 * memory.GIB, "cuda", "emulated 16 GB T4", bf16=False)


def run(device_name: str | None = None) -> dict:
    device = resolve(device_name)
    tokenizer = _tokenizer()
    rows = tokenize(build_corpus(correct_sums(), ADDITIONS, 1, seed=1, name="gpu"), tokenizer)
    result = {"device": _describe(device), "torch": torch.__version__, "CUDA": torch.version.cuda or "-"}
    result |= _arithmetic(device)
    result |= _packed_vs_padded(device, tokenizer, rows)
    result |= _measure_here(device, tokenizer)
    for key in SHAPES.get(device.type, SHAPES["cpu"]):
        result |= _memory(device, key, rows, tokenizer.pad_token_id)
    result |= _reads_per_step(device, tokenizer, rows)
    result |= _small_card()
    return result


def _tokenizer():
    from transformers import AutoTokenizer

    folder = models.bundled_folder()
    if folder:
        return AutoTokenizer.from_pretrained(folder)
    gguf_folder, name = models.bundled_gguf()
    return AutoTokenizer.from_pretrained(gguf_folder, gguf_file=name)


def _describe(device: torch.device) -> str:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return f"{device}: {props.name}, {props.total_memory / memory.GIB:.0f} GiB, capability {props.major}.{props.minor}"
    return f"{device}: {platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"


def _arithmetic(device: torch.device) -> dict:
    """Which precisions and optimizers a recipe may ask for here, and the GEMM peak of each."""
    out = {}
    for precision in ("float32", "bf16", "fp16"):
        try:
            check_recipe(Recipe(precision=precision), device)
        except CctkError as error:
            out[f"precision {precision}"] = f"refused: {error}"
            continue
        out[f"precision {precision}"] = f"{compute.peak_gflops(str(device), precision):.0f} GFLOP/s GEMM peak"
    try:
        check_recipe(Recipe(optimizer="adamw8bit"), device)
        out["optimizer adamw8bit"] = "available"
    except CctkError as error:
        out["optimizer adamw8bit"] = f"refused: {error}"
    return out


def _random_model(key: str, device: torch.device, layers: int | None = None):
    """A roster shape with random weights, float32, on ``device`` (``layers``: fewer blocks, for a CPU)."""
    from transformers import AutoModelForCausalLM

    config = models.model_config(key)
    if layers:
        config.num_hidden_layers = layers
    torch.manual_seed(0)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()


def _packed_vs_padded(device: torch.device, tokenizer, rows) -> dict:
    """The packed step's loss and gradients against the padded rows' on the device (float32)."""
    model = _random_model("smollm2-135m", device, layers=2 if device.type == "cpu" else None)
    losses, grads = [], []
    for packing in (True, False):
        model.zero_grad(set_to_none=True)
        loss = batch_loss(model, to_model(rows[:32], tokenizer.pad_token_id, device, packing))
        loss.backward()
        losses.append(loss.item())
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    gap = (grads[0] - grads[1]).norm().item() / grads[1].norm().item()
    return {"packed vs padded loss, relative": f"{abs(losses[0] - losses[1]) / abs(losses[1]):.1e}",
            "packed vs padded gradients, relative to their norm": f"{gap:.1e}"}


def _measure_here(device: torch.device, tokenizer) -> dict:
    """``measure`` of one random model on the device and on the CPU: the largest log-probability gap."""
    model = _random_model("smollm2-135m", torch.device("cpu"), layers=2)
    start = time.perf_counter()
    here = measure(model.to(device), tokenizer)
    seconds = time.perf_counter() - start
    there = measure(model.cpu(), tokenizer)
    gap = (here["logprob"] - there["logprob"]).abs().max()
    return {"measure on the device vs the CPU, largest |logprob gap|": f"{gap:.1e}",
            "measure, 2835 candidates, seconds (2-layer model)": f"{seconds:.2f}"}


def _memory(device: torch.device, key: str, rows, pad_id: int) -> dict:
    """What one arm's training needs, estimated and measured (the allocator's peak on CUDA, the rise of the
    process's resident memory on a CPU), with the paper recipe's batch of 8 for 2 steps."""
    recipe = dataclasses.replace(PROFILES["paper"], epochs=1)
    model = _random_model(key, device)
    longest = max(len(ids) for ids, _ in rows)
    need = memory.estimate(memory.Shape.of_model(model), recipe, longest, device.type)
    memory.release_freed()
    before = memory.process_memory()
    record = fine_tune(model, rows[:16], recipe, 1, pad_id, "bench")
    if device.type == "cuda":
        measured, predicted = record.peak_gpu_memory_bytes, need.weights + need.training
    else:
        measured, predicted = record.peak_cpu_memory_bytes - before, need.training
    del model
    return {f"memory {key} (paper recipe)": f"estimated {memory.gib(predicted)}, measured {memory.gib(measured)} "
                                            f"({predicted / measured:.2f}x)"}


@contextlib.contextmanager
def _counting_reads(device: torch.device):
    """Count reads of the device inside each training step (not while a batch is built on the host, nor
    the epoch's own reads): CUDA's own count of synchronising calls, or on a CPU every way a tensor's value
    reaches Python. Yields the list of each step's count."""
    from .. import finetune

    steps: list[int] = []
    real_step = finetune._DeviceGuard.step

    def counted_step(guard, *args, **kwargs):
        before = _reads(device, "now")
        real_step(guard, *args, **kwargs)
        steps.append(_reads(device, "now") - before)

    finetune._DeviceGuard.step = counted_step
    _reads(device, "start")
    try:
        yield steps
    finally:
        finetune._DeviceGuard.step = real_step
        _reads(device, "stop")


_READ = {"count": 0, "saved": {}, "caught": None}
READ_NAMES = ("item", "tolist", "__bool__", "__float__", "__int__", "nonzero")


def _reads(device: torch.device, what: str) -> int:
    """Start, read or stop the count of device reads (``_counting_reads``)."""
    if device.type == "cuda":
        if what == "start":
            torch.cuda.set_sync_debug_mode("warn")
            _READ["caught"] = warnings.catch_warnings(record=True)
            _READ["list"] = _READ["caught"].__enter__()
            warnings.simplefilter("always")
        elif what == "stop":
            torch.cuda.set_sync_debug_mode("default")
            _READ["caught"].__exit__(None, None, None)
        return sum("synchroniz" in str(w.message) for w in _READ.get("list") or [])
    if what == "start":
        for name in READ_NAMES:
            real = _READ["saved"][name] = getattr(torch.Tensor, name)

            def counted(self, *args, _real=real, **kwargs):
                _READ["count"] += 1
                return _real(self, *args, **kwargs)
            setattr(torch.Tensor, name, counted)
    elif what == "stop":
        for name, real in _READ["saved"].items():
            setattr(torch.Tensor, name, real)
    return _READ["count"]


def _reads_per_step(device: torch.device, tokenizer, rows) -> dict:
    """Reads of the device in each training step of the step an accelerator runs (host checks off); the
    epoch's loss is read apart, twice an epoch."""
    model = _random_model("smollm2-135m", device, layers=2)
    recipe = Recipe(repeats=1, epochs=2, learning_rate=1e-4, batch_size=16)
    fine_tune(model, rows[:16], recipe, 1, tokenizer.pad_token_id, "warm-up", host_checks=False)
    with _counting_reads(device) as steps:
        fine_tune(model, rows, recipe, 1, tokenizer.pad_token_id, "bench", host_checks=False)
    return {"device reads in a training step": f"at most {max(steps)} ({sum(steps)} over {len(steps)} steps; "
                                               "a padded batch's mask costs Transformers one), and 2 an epoch"}


def _small_card() -> dict:
    """What a 16 GB T4's user is told for phi-1.5 with the manual's recipe, and what fits there."""
    shapes = models.roster_shapes()
    plan = memory.Plan("phi-1.5", shapes["phi-1.5"], PROFILES["paper"], 16, T4, waiting=1, others=shapes)
    return {"phi-1.5, paper recipe, emulated T4": plan.shortfall() or "fits"}

