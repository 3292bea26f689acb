"""scripts/install-torch.sh (``make setup``'s first step) says what it installed and, after a CUDA build,
whether torch sees the GPU: run here with a fake ``pip`` (it records what it was asked), a fake
``nvidia-smi`` (a T4 on driver 550, CUDA 12.4 at most) and a fake ``torch`` (the build it reports)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "install-torch.sh"
FAKE_TORCH = """import os
__version__ = os.environ["FAKE_TORCH_VERSION"]
class version:
    cuda = os.environ.get("FAKE_TORCH_CUDA") or None
class cuda:
    is_available = staticmethod(lambda: os.environ.get("FAKE_CUDA_AVAILABLE") == "1")
    device_count = staticmethod(lambda: 1)
    get_device_name = staticmethod(lambda i=0: "Tesla T4")
"""
NVIDIA_SMI = """#!/bin/sh
case "$1" in
-L) echo "GPU 0: Tesla T4 (UUID: GPU-0)" ;;
--query-gpu=driver_version) echo "550.54.15" ;;
*) echo "| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |" ;;
esac
"""


@pytest.fixture
def machine(tmp_path):
    """(run, pip log): ``run(env, gpu=True)`` runs the script with the fakes and returns the process."""
    bin_dir, torch_dir = tmp_path / "bin", tmp_path / "site" / "torch"
    bin_dir.mkdir()
    torch_dir.mkdir(parents=True)
    (torch_dir / "__init__.py").write_text(FAKE_TORCH)
    log = tmp_path / "pip.log"
    (bin_dir / "pip").write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    (bin_dir / "python").write_text(f'#!/bin/sh\nPYTHONPATH={tmp_path / "site"} exec {sys.executable} "$@"\n')
    (bin_dir / "nvidia-smi").write_text(NVIDIA_SMI)
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    (tmp_path / "constraints.txt").write_text("numpy==2.0.0\ntorch==2.13.0\n")
    (tmp_path / "wheels").mkdir()

    def run(env: dict, gpu: bool = True) -> subprocess.CompletedProcess:
        if not gpu:
            (bin_dir / "nvidia-smi").unlink(missing_ok=True)
        full = {
            "PATH": f"{bin_dir}:/usr/bin:/bin",
            "PIP": f"{bin_dir / 'pip'} install -qq",
            "CONSTRAINTS": str(tmp_path / "constraints.txt"),
            "WHEELS": str(tmp_path / "wheels"),
            **env,
        }
        return subprocess.run(["sh", str(SCRIPT)], env=full, capture_output=True, text=True, cwd=tmp_path)

    return run, log


def test_a_cuda_build_the_driver_cannot_run_fails_in_one_line_with_what_to_do(machine):
    """PyPI's torch for CUDA 13 on a driver of CUDA 12.4: it installs, then torch sees no GPU; make setup
    used to succeed quietly and every command computed on the CPU."""
    run, log = machine
    done = run({"FAKE_TORCH_VERSION": "2.13.0", "FAKE_TORCH_CUDA": "13.0", "FAKE_CUDA_AVAILABLE": "0"})
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "torch 2.13.0: the CUDA build, from PyPI (TORCH=auto)",
        "installed torch 2.13.0 (CUDA 13.0)",
    ]
    (line,) = done.stderr.splitlines()
    assert line.startswith(
        "install-torch: torch 2.13.0 (CUDA 13.0) cannot use this machine's GPU: the build needs "
        "an NVIDIA driver >= 580, this machine has driver 550.54.15 (CUDA 12.4 at most); "
    )
    assert "make setup TORCH_INDEX=https://download.pytorch.org/whl/cu126" in line and "(TORCH=cpu)" in line
    assert log.read_text().split() == ["install", "-qq", "-c", str(log.parent / "constraints.txt"), "torch==2.13.0"]


def test_torch_index_installs_that_cuda_build_and_checks_it_sees_the_gpu(machine):
    run, log = machine
    index = "https://download.pytorch.org/whl/cu126"
    done = run(
        {
            "TORCH_INDEX": index,
            "FAKE_TORCH_VERSION": "2.13.0+cu126",
            "FAKE_TORCH_CUDA": "12.6",
            "FAKE_CUDA_AVAILABLE": "1",
        }
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"torch 2.13.0: the CUDA build of {index} (TORCH_INDEX)",
        "installed torch 2.13.0+cu126 (CUDA 12.6)",
        "torch sees 1 CUDA device(s): Tesla T4",
    ]
    assert f"--extra-index-url {index} torch==2.13.0" in log.read_text()


def test_the_cpu_build_says_what_it_installed_and_checks_no_gpu(machine):
    """No NVIDIA GPU: the CPU build, as before (from PyTorch's CPU index where no local wheel lies), then
    the line of what was installed; nothing is asked of CUDA."""
    run, log = machine
    done = run({"FAKE_TORCH_VERSION": "2.13.0+cpu", "FAKE_TORCH_CUDA": "", "FAKE_CUDA_AVAILABLE": "0"}, gpu=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "installed torch 2.13.0+cpu (CUDA none)"
    assert "--extra-index-url https://download.pytorch.org/whl/cpu torch==2.13.0" in log.read_text()


def test_a_cuda_build_without_nvidia_smi_says_to_install_the_driver(machine):
    run, _ = machine
    done = run(
        {"TORCH": "cuda", "FAKE_TORCH_VERSION": "2.13.0", "FAKE_TORCH_CUDA": "13.0", "FAKE_CUDA_AVAILABLE": "0"},
        gpu=False,
    )
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert "sees no GPU and nvidia-smi is not here: install the NVIDIA driver" in line


@pytest.mark.skipif(os.name != "posix", reason="POSIX sh")
def test_the_script_is_plain_posix_sh():
    assert subprocess.run(["sh", "-n", str(SCRIPT)]).returncode == 0
