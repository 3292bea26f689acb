#!/bin/sh
# Installs into the venv the build of torch that this machine needs, at the version pinned in
# constraints.txt; `make setup` runs it before the package itself. Plain POSIX sh.
#
#   TORCH=auto (default)  the CUDA build where an NVIDIA GPU answers `nvidia-smi -L`, the CPU build elsewhere
#   TORCH=cuda            PyPI's wheel: on Linux the CUDA build (several GB with its nvidia-* libraries)
#   TORCH=cpu             a local CPU wheel where one lies in $WHEELS (this project's machines: no network
#                         needed for torch), else PyTorch's CPU wheel index; on macOS PyPI's wheel (CPU/MPS)
#
# Environment: PIP (the venv's `pip install` with its options; required), TORCH, WHEELS (default
# /opt/wheels), TORCH_CPU_INDEX (default PyTorch's CPU wheel index), CONSTRAINTS (default constraints.txt).
set -eu
: "${PIP:?PIP must name the venv pip install command}"
TORCH=${TORCH:-auto}
WHEELS=${WHEELS:-/opt/wheels}
TORCH_CPU_INDEX=${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
CONSTRAINTS=${CONSTRAINTS:-constraints.txt}

# The version comes from constraints.txt (one pin for every build: `torch==2.13.0` matches the CPU build
# 2.13.0+cpu and PyPI's CUDA build alike).
version=$(sed -n 's/^torch==//p' "$CONSTRAINTS")
if [ -z "$version" ]; then
    echo "install-torch: no torch==VERSION line in $CONSTRAINTS" >&2
    exit 2
fi

kind=$TORCH
if [ "$kind" = auto ]; then
    if nvidia-smi -L >/dev/null 2>&1; then kind=cuda; else kind=cpu; fi
fi

case $kind in
cuda)
    echo "torch $version: the CUDA build, from PyPI (TORCH=$TORCH)"
    # PIP_FIND_LINKS=' ' (a blank, not empty: pip ignores an empty value) hides any folder of local
    # wheels in pip's configuration for this one command: a local CPU file torch-$version+cpu sorts above
    # PyPI's $version and would win the == pin on a GPU machine that has one.
    PIP_FIND_LINKS=' ' $PIP -c "$CONSTRAINTS" "torch==$version"
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
