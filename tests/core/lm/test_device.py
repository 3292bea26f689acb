"""The device a command computes on: a GPU that this torch cannot use ends in one line (never the CPU and its
recipe in silence), and the CUDA branches of the device checks, run here through fakes of ``torch.cuda``."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from cctk.cli.mlproject import check_device_first
from cctk.core.config import Recipe
from cctk.core.errors import CctkError
from cctk.core.lm import device as devices
from cctk.core.lm.device import check_recipe, resolve, room, unusable_gpu

T4_LINE = r"^this machine has an NVIDIA GPU \(Tesla T4, driver 535\.183\.01, CUDA 12\.2 at most\)"


def test_a_gpu_this_torch_cannot_use_ends_in_one_line(fake_nvidia_smi):
    """Finding 1 of #46: with nvidia-smi answering and a CPU torch, ``resolve()`` returned the CPU (and the
    auto profile then the quick recipe), without a word."""
    with pytest.raises(CctkError, match=T4_LINE + r" and this torch build \(2\.13\.0\+cpu\) has no CUDA") as error:
        resolve()
    line = str(error.value)
    assert "\n" not in line
    assert "make setup TORCH_INDEX=https://download.pytorch.org/whl/cu126" in line  # driver 535 < 580: CUDA 12.6
    assert line.endswith("or pass --device cpu to compute on the CPU")
    assert resolve("cpu") == torch.device("cpu")  # asked for: the CPU, no question


def test_without_nvidia_smi_or_with_every_gpu_hidden_the_cpu_is_the_default(fake_nvidia_smi, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # Ray's for a task that asks no GPU: a choice, not a loss
    assert resolve() == torch.device("cpu")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert unusable_gpu(smi=lambda *args: None) is None  # no nvidia-smi, or one that fails
    assert unusable_gpu(smi=lambda *args: "No devices were found\n") is None


def test_a_cuda_build_the_driver_is_too_old_for_and_one_that_sees_no_gpu(fake_nvidia_smi, monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    line = unusable_gpu()
    assert line.startswith(T4_LINE[1:].replace("\\", "") + " that torch 2.13.0+cpu (CUDA 13.0) cannot use: the build")
    assert "needs an NVIDIA driver >= 580; update the driver, or install a build for an older CUDA" in line
    monkeypatch.setattr(torch.version, "cuda", "12.6")  # driver 535 runs it: something else hides the GPU
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    assert unusable_gpu().endswith(
        "does not see: check CUDA_VISIBLE_DEVICES (7) and the driver (nvidia-smi), "
        "or pass --device cpu to compute on the CPU"
    )


def test_the_mlproject_entry_checks_the_device_before_the_command(fake_nvidia_smi):
    """``python -m cctk.cli.mlproject`` (every MLproject entry point) ends in one line, exit 1, before any
    command starts; ``-P device=cpu`` goes on."""
    entry = [sys.executable, "-m", "cctk.cli.mlproject"]
    done = subprocess.run([*entry, "measure", "--model", "x", "--device", ""], capture_output=True, text=True)
    assert done.returncode == 1 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("Error: this machine has an NVIDIA GPU (Tesla T4")
    check_device_first(["--model", "x", "--device", "cpu"])  # a device given: the command checks it


class FakeCuda:
    """What a machine with one 16 GB T4 (compute capability 7.5) answers through ``torch.cuda``."""

    def __init__(self, free: int = 14 * 2**30):
        self.free, self.calls = free, []

    def is_available(self) -> bool:
        return True

    def device_count(self) -> int:
        return 1

    def mem_get_info(self, device=None) -> tuple[int, int]:
        self.calls.append(("mem_get_info", str(device)))
        return self.free, 15 * 2**30

    def get_device_name(self, device=None) -> str:
        return "Tesla T4"

    def get_device_capability(self, device=None) -> tuple[int, int]:
        return 7, 5


@pytest.fixture
def t4(monkeypatch):
    """``torch.cuda`` and ``torch.version.cuda`` of a T4 machine, in this process."""
    fake = FakeCuda()
    for name in ("is_available", "device_count", "mem_get_info", "get_device_name", "get_device_capability"):
        monkeypatch.setattr(torch.cuda, name, getattr(fake, name))
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    return fake


def test_the_cuda_branches_of_resolve_room_and_check_recipe_on_a_fake_t4(t4):
    assert resolve() == torch.device("cuda")  # the default where torch uses a GPU
    assert resolve("cuda:0") == torch.device("cuda:0")
    with pytest.raises(CctkError, match=r"^--device cuda:1: there are 1 CUDA devices \(cuda:0\.\.cuda:0\)$"):
        resolve("cuda:1")
    free = room(torch.device("cuda:0"))
    assert (free.device, free.device_type, free.name, free.bf16) == (14 * 2**30, "cuda", "cuda:0 (Tesla T4)", False)
    assert t4.calls == [("mem_get_info", "cuda:0")]
    check_recipe(Recipe(precision="fp16"), torch.device("cuda:0"))  # the T4's half precision
    check_recipe(Recipe(optimizer="adamw8bit"), torch.device("cuda:0"))  # torchao is installed with cctk
    with pytest.raises(CctkError, match=r"^--precision bf16 needs native bf16 arithmetic: Tesla T4 \(compute "):
        check_recipe(Recipe(precision="bf16"), torch.device("cuda:0"))


def test_no_cuda_device_visible_to_a_cuda_build(t4, monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    with pytest.raises(CctkError, match=r"^--device cuda: no CUDA device is visible"):
        devices.resolve("cuda")


def test_free_memory_read_again_once_the_model_is_placed(t4):
    """The check before any work had 14 GiB free; once the model is on the T4 another process has taken memory:
    the rest of the job no longer fits what is left less the margin, and the run ends in one line (the
    ``OutOfMemory`` an arm's FAILED status carries) instead of an allocator's error midway."""
    from cctk.core.errors import OutOfMemory
    from cctk.core.lm import memory, models
    from cctk.manuals.v2.config import PROFILES

    shape = models.roster_shapes()["qwen2.5-0.5b"]
    plan = memory.Plan("qwen2.5-0.5b", shape, PROFILES["paper"], 16, room(torch.device("cuda:0")), waiting=1)
    assert plan.shortfall() is None
    rest = plan.estimate.device - plan.estimate.weights
    t4.free = memory.free_for(rest) + 2**20
    devices.check_placed(plan, torch.device("cuda:0"))  # the rest and its margin fit
    t4.free = rest + 2**20  # fits, but not with the margin kept free
    with pytest.raises(OutOfMemory, match=r"^qwen2\.5-0\.5b is on cuda:0 \(Tesla T4\), and the rest of this recipe "):
        devices.check_placed(plan, torch.device("cuda:0"))
    devices.check_placed(plan, torch.device("cpu"))  # nothing to read on a CPU


def test_bench_gpu_empties_the_allocator_cache_before_it_reads_what_is_free(t4):
    """``bench gpu`` plans each shape against the free memory read after the cache of the shapes before it was
    emptied (it read it once, with them cached: a 16 GB card would call phi-1.5 too big)."""
    from cctk.bench.gpu import free_room

    order = []

    class Cache:
        def empty_cache(self):
            order.append("empty_cache")

    real = t4.mem_get_info
    t4.mem_get_info = lambda device=None: (order.append("mem_get_info"), real(device))[1]
    torch.cuda.mem_get_info = t4.mem_get_info
    assert free_room(torch.device("cuda:0"), cache=Cache()).device == t4.free
    assert order == ["empty_cache", "mem_get_info"]
