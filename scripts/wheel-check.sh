#!/usr/bin/env bash
# cctk as a user installs it (`make wheel-check`, and CI's .ci/run): `python -m build` of this checkout
# (the sdist, then the wheel built from the sdist), the wheel installed into a fresh venv outside the
# checkout, and from an empty folder: `cctk --version`, `cctk models`, a smoke pipeline of a tiny model
# (Part A, no figures) on the default store, `cctk report RUN --out`, `import cctk.results`. It ends
# with the run read back FINISHED from ./mlruns/ of that folder, and the tracking configurations read from
# the wheel's package (the checkout's top-level mlruns_config/, mapped in by setup.py).
# Usage: scripts/wheel-check.sh [VENV]
#
# The fresh venv takes its third-party packages from the dev venv through one .pth line (installing
# them again costs minutes) and cctk from the wheel alone, with --no-deps: the dev venv's editable cctk
# hangs on a .pth file of that venv, which a path added by a .pth line does not run. Nothing is
# downloaded but setuptools for the isolated build, from the package index.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DEV=$ROOT/${1:-.venv}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cctk-wheel-check.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
unset MLFLOW_TRACKING_URI  # the default store is what is checked
step() { printf '\n== %s\n' "$*"; }
purelib() { "$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }

step "build: sdist, then the wheel from the sdist"
"$DEV/bin/python" -m build --outdir "$WORK/dist" . >"$WORK/build.log" 2>&1 || { tail -40 "$WORK/build.log"; exit 1; }
"$DEV/bin/python" "$ROOT/scripts/wheel_check.py" archives "$WORK/dist"

step "a fresh venv outside the checkout: cctk from the wheel, its dependencies from $DEV"
"$DEV/bin/python" -m venv "$WORK/venv"
VPY=$WORK/venv/bin/python
# the wheel first, while the venv sees nothing of the dev venv (pip would find its cctk already there)
"$VPY" -m pip install -q --disable-pip-version-check --no-deps --no-index "$WORK"/dist/cctk-*.whl
purelib "$DEV/bin/python" >"$(purelib "$VPY")/cctk-dev-dependencies.pth"

step "tiny model: a 2-layer Llama with the bundled tokenizer, built as tests/conftest.py's tiny_dir_bundled"
"$DEV/bin/python" "$ROOT/scripts/wheel_check.py" tiny "$WORK/tiny"

mkdir "$WORK/empty"
cd "$WORK/empty"  # an empty folder: no mlruns_config/, no checkout, no store
export PATH="$WORK/venv/bin:$PATH" CCTK_CACHE="$WORK/cache"  # cctk.results' copies of runs stay in $WORK
set -x
cctk --version
python -m cctk --version
python -c 'import cctk; print(cctk.__file__)'
cctk models
cctk run --model "$WORK/tiny" --profile smoke --parts A --no-figures --seed 3 --no-system-metrics
run_id=$(python "$ROOT/scripts/wheel_check.py" run-id outputs)
cctk report "$run_id" --out report
python -c 'import cctk.results'
{ set +x; } 2>/dev/null
python "$ROOT/scripts/wheel_check.py" finished "$run_id" "$WORK/venv" report
