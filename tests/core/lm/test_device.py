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


MLFLOW_BUILT = "/home/u/.mlflow/envs/mlflow-" + "0123456789abcdef" * 2 + "01234567"


def test_in_an_environment_mlflow_run_built_the_way_out_is_not_make_setup(fake_nvidia_smi, monkeypatch):
    """#55: under ``mlflow run`` (conda, virtualenv or uv) the interpreter runs in an environment MLflow built from
    conda.yaml (``mlflow-<sha1>``), which ``make setup`` and the project's .venv never touch: the line says to
    run with ``--env-manager local`` in that .venv, or to install the build the driver runs into MLflow's
    environment with its own pip, and ``-P device=cpu``, the MLproject's way to the CPU."""
    monkeypatch.setattr(sys, "prefix", MLFLOW_BUILT)
    line = unusable_gpu()
    assert " and this torch build (2.13.0+cpu) has no CUDA: install a CUDA build (this is the environment " in line
    assert f"`mlflow run` built from conda.yaml ({MLFLOW_BUILT}), which make setup does not change: run " in line
    assert "`mlflow run . --env-manager local` in the project's .venv (rm -r .venv && make setup TORCH_INDEX=" in line
    cu126 = f"{sys.executable} -m pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126"
    assert f"or install it into this environment: {cu126}), or pass -P device=cpu to compute on the CPU" in line
    monkeypatch.setattr(torch.version, "cuda", "13.0")  # PyPI's build, as conda.yaml installs it: driver 535 < 580
    line = unusable_gpu()
    assert "cannot use: the build needs an NVIDIA driver >= 580; " in line and cu126 in line
    assert "--env-manager local" in line and "\n" not in line


def test_an_environment_mlflow_run_built_is_told_by_its_folder():
    assert devices.mlflow_env(MLFLOW_BUILT) == MLFLOW_BUILT  # virtualenv, uv, conda: mlflow-<sha1>
    conda = "/opt/conda/envs/mlflow-" + "a" * 40 + "-" + "b" * 40  # conda's, with its root's hash
    assert devices.mlflow_env(conda) == conda
    for other in ("/work/cctk/.venv", "/opt/conda/envs/mlflow-dev", "/home/u/mlflow-" + "a" * 39):
        assert devices.mlflow_env(other) is None  # --env-manager local: the user's own environment
    assert devices.mlflow_env() is None  # the suite runs in the project's .venv


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
    """What a machine with one CUDA card (a 16 GB T4, compute capability 7.5, unless told) answers through
    ``torch.cuda``, with a caching allocator: ``allocate`` takes blocks from the driver only beyond what it
    holds already (``reserved``), ``release`` keeps them cached; the driver's free memory (``free``,
    ``mem_get_info``) counts every block the allocator holds as taken, as a real driver does."""

    def __init__(self, free: int = 14 * 2**30, total: int = 15 * 2**30, name: str = "Tesla T4", capability=(7, 5)):
        self.free, self.total, self.name, self.capability = free, total, name, capability
        self.reserved = self.allocated = 0
        self.calls = []

    def allocate(self, n: int) -> None:
        self.allocated += n
        grown = max(self.allocated - self.reserved, 0)
        self.reserved += grown
        self.free -= grown
        assert self.free >= 0, "the fake card ran out of memory"

    def release(self, n: int) -> None:
        self.allocated -= n  # the blocks stay in the allocator's cache: the driver still counts them taken

    def is_available(self) -> bool:
        return True

    def device_count(self) -> int:
        return 1

    def mem_get_info(self, device=None) -> tuple[int, int]:
        self.calls.append(("mem_get_info", str(device)))
        return self.free, self.total

    def memory_reserved(self, device=None) -> int:
        return self.reserved

    def memory_allocated(self, device=None) -> int:
        return self.allocated

    def get_device_name(self, device=None) -> str:
        return self.name

    def get_device_capability(self, device=None) -> tuple[int, int]:
        return self.capability


FAKED = (
    "is_available",
    "device_count",
    "mem_get_info",
    "memory_reserved",
    "memory_allocated",
    "get_device_name",
    "get_device_capability",
)


def fake_cuda(monkeypatch, fake: FakeCuda) -> FakeCuda:
    """``torch.cuda`` and ``torch.version.cuda`` of ``fake``'s machine, in this process."""
    for name in FAKED:
        monkeypatch.setattr(torch.cuda, name, getattr(fake, name))
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    return fake


@pytest.fixture
def t4(monkeypatch):
    """``torch.cuda`` and ``torch.version.cuda`` of a T4 machine, in this process."""
    return fake_cuda(monkeypatch, FakeCuda())


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


def _qwen_on(fake: FakeCuda):
    from cctk.core.lm import memory, models
    from cctk.manuals.v2.config import PROFILES

    shape = models.roster_shapes()["qwen2.5-0.5b"]
    return memory.Plan("qwen2.5-0.5b", shape, PROFILES["paper"], 16, room(torch.device("cuda:0")), waiting=1)


def test_what_the_allocator_caches_from_the_arm_before_counts_as_free(t4):
    """#55: an arm ends with its whole peak still reserved by the caching allocator (the pipeline never empties
    it), which ``mem_get_info`` reports taken; the next arm's check counts those blocks as this process's free
    memory (the allocator frees its cache and retries before it runs out), and passes where the driver's
    figure alone would refuse it."""
    from cctk.core.lm import memory

    plan, cuda0 = _qwen_on(t4), torch.device("cuda:0")
    need = plan.estimate
    rest = need.device - need.weights
    t4.allocate(need.weights)  # the first arm's copy of the model, moved to the card
    devices.check_placed(plan, cuda0)
    t4.allocate(rest)  # its training's peak
    t4.release(need.device)  # the arm ends, its model back on the host: every block stays cached
    assert t4.reserved == need.device and t4.free == 14 * 2**30 - need.device
    t4.allocate(need.weights)  # the next arm's model, in the cached blocks
    assert rest > t4.free - memory.margin(t4.free)  # what the driver says free would refuse it
    devices.check_placed(plan, cuda0)
    assert room(cuda0).device == t4.free + t4.reserved - t4.allocated == 14 * 2**30 - need.weights


def test_a_model_placed_for_a_block_is_checked_on_the_card_and_its_out_of_memory_is_one_line(t4):
    """``placed``, which ``cctk measure``, ``krtest eval`` and ``train`` and every arm of a KR-Test study move their
    model with: the model itself handed back once on the card; the rest of the plan checked there before the block
    runs; an allocator's error inside the block one line naming where it ran."""
    from cctk.core.errors import OutOfMemory

    plan, cuda0, model = _qwen_on(t4), torch.device("cuda:0"), torch.nn.Module()
    arm = "the full fine-tuning arm"
    with devices.placed(model, plan, cuda0, arm) as moved:
        assert moved is model
    t4.free = plan.estimate.device - plan.estimate.weights  # the rest fits, its margin does not
    refused = r"^qwen2\.5-0\.5b is on cuda:0 \(Tesla T4\), and the rest of this recipe "
    ran = []
    with pytest.raises(OutOfMemory, match=refused), devices.placed(model, plan, cuda0, arm):
        ran.append(True)
    assert ran == []  # refused before the block
    t4.free = 14 * 2**30
    one_line = (
        r"^out of memory on cuda:0 in the full fine-tuning arm \(CUDA out of memory\. Tried to allocate 2\.00 GiB\)"
    )
    with pytest.raises(OutOfMemory, match=one_line), devices.placed(model, plan, cuda0, arm):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")


def test_a_share_of_a_gpu_counts_what_the_process_already_holds(t4, monkeypatch):
    """A sweep's cell given half of a 15 GiB card: its share less what its tensors hold, where that is less than
    the free and cached memory."""
    t4.allocate(3 * 2**30)
    t4.release(2**30)  # 2 GiB held by tensors, 1 GiB cached
    cuda0 = torch.device("cuda:0")
    assert room(cuda0).device == (14 - 3 + 1) * 2**30
    monkeypatch.setenv(devices.GPU_SHARE, "0.5")
    assert room(cuda0).device == int(7.5 * 2**30) - 2 * 2**30


def test_phi_15_with_8bit_adamw_passes_every_arms_check_on_a_24gb_card(monkeypatch):
    """#55's case: phi-1.5 at the paper recipe with ``--optimizer adamw8bit`` (docs/gpus.md's advice for a 24 GB
    card) on an L4's 22 GiB: the run's own plan (``stages.memory_plan``), the v2 manual's 13 arms in the
    pipeline's order, each arm's model placed in the blocks the allocator cached from the arm before, its
    check passed, its training's peak and its measurement allocated and released. Reading only the driver's
    free memory, the second arm was refused."""
    from cctk.core.lm import memory
    from cctk.manuals.configure import make_config
    from cctk.manuals.registry import get
    from cctk.pipeline import stages

    total = int(memory.CARDS["L4/A10 24 GB"][0] * memory.GIB)
    card = fake_cuda(monkeypatch, FakeCuda(total - memory.CUDA_CONTEXT, total, "NVIDIA L4", (8, 9)))
    cuda0 = torch.device("cuda:0")
    config = make_config("phi-1.5", "paper", (1,), optimizer="adamw8bit")
    protocol = get(config.protocol)
    _, plan = stages.check_device(config, protocol, "cuda:0")
    need = plan.estimate
    arms = stages.training_order(protocol.models(config.options))
    checked = []
    for arm in arms:
        card.allocate(need.weights)
        if arm.parent is not None:  # trained: checked once placed, as stages._train_and_measure does
            devices.check_placed(plan, cuda0)
            checked.append(arm.key)
            card.allocate(need.training)
            card.release(need.training)
        card.allocate(need.measurement)
        card.release(need.measurement + need.weights)  # measured, then back on the host
    assert len(checked) == 13 and card.reserved == need.device
    assert card.free < need.device - need.weights  # the driver alone: no room for the rest of an arm


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
