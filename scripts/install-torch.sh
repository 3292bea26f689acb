#!/bin/sh
# Installs into the venv the build of torch that this machine needs, at the version pinned in
# constraints.txt; `make setup` runs it before the package itself. Plain POSIX sh.
#
#   TORCH=auto (default)  the CUDA build where an NVIDIA GPU answers `nvidia-smi -L`, the CPU build elsewhere
#   TORCH=cuda            PyPI's wheel: on Linux the CUDA build (several GB with its nvidia-* libraries; for
#                         current torch a CUDA 13 build, which needs an NVIDIA driver >= 580), or the build
#                         of TORCH_INDEX, a PyTorch wheel index for one CUDA version
#                         (TORCH_INDEX=https://download.pytorch.org/whl/cu126: CUDA 12.6, drivers >= 525)
#   TORCH=cpu             a local CPU wheel where one lies in $WHEELS (this project's machines: no network
#                         needed for torch), else PyTorch's CPU wheel index; on macOS PyPI's wheel (CPU/MPS)
#
# Then it says what it installed (torch's version and CUDA version) and, for a CUDA build, whether torch
# sees the GPU: where it does not and `nvidia-smi` answers, it fails with one line naming the driver the
# build needs, the driver the machine has, and how to install another build (TORCH_INDEX=, TORCH=cpu).
#
# Environment: PIP (the venv's `pip install` with its options; required), TORCH, TORCH_INDEX, WHEELS
# (default /opt/wheels), TORCH_CPU_INDEX (default PyTorch's CPU wheel index), CONSTRAINTS (default
# constraints.txt), PYTHON (default the python beside PIP's pip).
set -eu
: "${PIP:?PIP must name the venv pip install command}"
TORCH=${TORCH:-auto}
TORCH_INDEX=${TORCH_INDEX:-}
WHEELS=${WHEELS:-/opt/wheels}
TORCH_CPU_INDEX=${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
CONSTRAINTS=${CONSTRAINTS:-constraints.txt}
PYTHON=${PYTHON:-$(dirname "${PIP%% *}")/python}

# The version comes from constraints.txt (one pin for every build: `torch==2.13.0` matches the CPU build
# 2.13.0+cpu and PyPI's CUDA build alike).
version=$(sed -n 's/^torch==//p' "$CONSTRAINTS")
if [ -z "$version" ]; then
    echo "install-torch: no torch==VERSION line in $CONSTRAINTS" >&2
    exit 2
fi

kind=$TORCH
if [ "$kind" = auto ]; then
    if [ -n "$TORCH_INDEX" ] || nvidia-smi -L >/dev/null 2>&1; then kind=cuda; else kind=cpu; fi
fi

case $kind in
cuda)
    # PIP_FIND_LINKS=' ' (a blank, not empty: pip ignores an empty value) hides any folder of local
    # wheels in pip's configuration for this one command: a local CPU file torch-$version+cpu sorts above
    # PyPI's $version and would win the == pin on a GPU machine that has one.
    if [ -n "$TORCH_INDEX" ]; then
        # beside the usual index, as the CPU index below: its torch-$version+cuXYZ sorts above PyPI's $version
        echo "torch $version: the CUDA build of $TORCH_INDEX (TORCH_INDEX)"
        PIP_FIND_LINKS=' ' $PIP -c "$CONSTRAINTS" --extra-index-url "$TORCH_INDEX" "torch==$version"
    else
        echo "torch $version: the CUDA build, from PyPI (TORCH=$TORCH)"
        PIP_FIND_LINKS=' ' $PIP -c "$CONSTRAINTS" "torch==$version"
    fi
    ;;
cpu)
    if [ "$(uname -s)" = Darwin ]; then
        echo "torch $version: PyPI's macOS build (CPU and MPS)"
        $PIP -c "$CONSTRAINTS" "torch==$version"
    elif ls "$WHEELS"/torch-"$version"+cpu-*.whl >/dev/null 2>&1 &&
         $PIP --no-index --no-deps --find-links "$WHEELS" "torch==$version" 2>/dev/null; then
        # The local file is installed without any network; now its dependencies, at the pinned versions,
        # from the usual index (torch itself is satisfied and not fetched again).
        echo "torch $version: the CPU build, from the local wheel in $WHEELS"
        $PIP -c "$CONSTRAINTS" "torch==$version"
    else
        # PyTorch's CPU index, added beside the usual index (PyPI, or the one pip is configured with,
        # which keeps serving torch's dependencies), serves torch-$version+cpu: a local label sorts
        # above the plain version, so the == pin takes the CPU build over PyPI's CUDA build.
        echo "torch $version: the CPU build, from $TORCH_CPU_INDEX"
        $PIP -c "$CONSTRAINTS" --extra-index-url "$TORCH_CPU_INDEX" "torch==$version"
    fi
    ;;
*)
    echo "install-torch: TORCH must be auto, cpu or cuda (got '$TORCH')" >&2
    exit 2
    ;;
esac

# What was installed, and whether a CUDA build sees the GPU (a build for a newer CUDA than the driver's
# installs without complaint, and every command would then compute on the CPU). NumPy comes with the package's
# dependencies, after torch: torch's warning that it is missing says nothing here.
export PYTHONWARNINGS="ignore:Failed to initialize NumPy"
# shellcheck disable=SC2016
"$PYTHON" -c 'import torch; print("installed torch", torch.__version__, "(CUDA", (torch.version.cuda or "none") + ")")'
[ "$kind" = cuda ] || exit 0
if "$PYTHON" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    "$PYTHON" -c 'import torch; print("torch sees", torch.cuda.device_count(), "CUDA device(s):", torch.cuda.get_device_name(0))'
    exit 0
fi
cuda=$("$PYTHON" -c 'import torch; print(torch.version.cuda or "")')
command -v nvidia-smi >/dev/null 2>&1 || { echo "install-torch: torch $version (CUDA ${cuda:-none}) sees no GPU and nvidia-smi is not here: install the NVIDIA driver, or use the CPU build (rm -r .venv && make setup TORCH=cpu)" >&2; exit 1; }
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' ')
most=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1)
case $cuda in
"") needs="a CUDA build (this one has no CUDA)" ;;
13.*) needs="an NVIDIA driver >= 580" ;;
12.*) needs="an NVIDIA driver >= 525" ;;
11.*) needs="an NVIDIA driver >= 450" ;;
*) needs="a driver for CUDA $cuda" ;;
esac
echo "install-torch: torch $version (CUDA ${cuda:-none}) cannot use this machine's GPU: the build needs $needs, this machine has driver ${driver:-unknown} (CUDA ${most:-unknown} at most); update the driver, or install a build for an older CUDA from a PyTorch wheel index (rm -r .venv && make setup TORCH_INDEX=https://download.pytorch.org/whl/cu126, CUDA 12.6; which CUDA versions torch $version has: https://pytorch.org/get-started/previous-versions/), or the CPU build (TORCH=cpu)" >&2
exit 1
