# mtkit: every target installs what it needs, so `make demo` and `make test` work on a fresh clone.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Where no GPU is present, install the CPU build of torch first (a plain `torch` pulls a multi-GB
# CUDA build). Override, e.g. `make install TORCH_SPEC=torch TORCH_PIP_ARGS=` on a GPU machine.
HAS_GPU := $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo 1)
ifeq ($(HAS_GPU),1)
TORCH_SPEC ?= torch
TORCH_PIP_ARGS ?=
else
TORCH_SPEC ?= torch==2.13.0
# This machine keeps the CPU wheel on disk; elsewhere take it from PyTorch's CPU index.
TORCH_PIP_ARGS ?= $(if $(wildcard /opt/wheels/torch-*+cpu*),,--extra-index-url https://download.pytorch.org/whl/cpu)
endif
STAMP := $(VENV)/.mtkit-installed
DEMO_DIR ?= work/demo

.PHONY: install test lint format browser argos-venv test-argos demo bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install $(TORCH_PIP_ARGS) "$(TORCH_SPEC)"
	$(BIN)/pip install -e ".[dev,hf,ct2,plot,serve]"
	touch $(STAMP)

lint: install
	$(BIN)/ruff check mtkit tests benchmarks
	$(BIN)/ruff format --check mtkit tests benchmarks

format: install
	$(BIN)/ruff format mtkit tests benchmarks
	$(BIN)/ruff check --fix mtkit tests benchmarks

# The browser test of `mtkit serve`'s page drives Debian's chromium: installed here where the
# system allows it (root with apt-get); elsewhere that test skips, naming what is missing.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
		&& apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends chromium >/dev/null; } \
		|| echo "chromium not installed: the browser test will skip"

# Two pytest-xdist workers (CI has two cores), each test file whole in one worker.
test: lint browser
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -n 2 --dist loadfile

# Argos Translate 1.11 (stanza, spaCy, MiniSBD, CPU torch) in its own venv, .bench/venv-argos:
# tests/export/test_export_argos_install.py installs an exported .argosmodel there and skips,
# naming this target, while it is missing.
argos-venv: install
	TORCH_PIP_ARGS="$(TORCH_PIP_ARGS)" $(BIN)/python benchmarks/argos_env.py

test-argos: argos-venv
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -q tests/export/test_export_argos_install.py

demo: install
	PATH="$(abspath $(BIN)):$$PATH" $(MAKE) -C recipes/multi30k demo WORK=$(abspath $(DEMO_DIR)) \
		MTKIT=$(abspath $(BIN))/mtkit

bench: install
	PATH="$(abspath $(BIN)):$$PATH" TORCH_PIP_ARGS="$(TORCH_PIP_ARGS)" $(BIN)/python benchmarks/run_all.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) work build dist *.egg-info .pytest_cache .ruff_cache .hypothesis
