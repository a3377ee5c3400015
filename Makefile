# kit — `make reproduce` and `make test` do all set-up themselves on a fresh machine.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
KIT := $(VENV)/bin/kit
# kit's caches (models, quantized checkpoints, engine venvs) stay inside the checkout
export KIT_HOME ?= $(CURDIR)/.kit
# Python's compiled modules for every process make starts (kit, the tests, the engines' servers)
# in one folder of the checkout, never beside the sources. Without them (PYTHONDONTWRITEBYTECODE
# set, as on some CI images; the venvs are installed without .pyc) each process compiles what it
# imports again: importing vLLM's server takes 27 s instead of 11 on 2 cores, and a server's
# three processes each do it (a cpu-tiny boot: 78 s against 44)
export PYTHONPYCACHEPREFIX ?= $(CURDIR)/build/pycache
unexport PYTHONDONTWRITEBYTECODE

HAS_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo 1)
# RECIPE not given: the recipe for this rig, `kit recipe pick` (the GPUs NVML shows against each
# recipe's rig: block; no GPU: recipes/cpu-tiny.yaml). Picked once, when a target first needs it
# (kit's venv exists by then); where no recipe fits, it lists them all and make stops.
RECIPE ?= $(eval RECIPE := $(shell $(KIT) recipe pick || echo .no-recipe))$(if $(filter \
  .no-recipe,$(RECIPE)),$(error no recipe for this rig (see above): make reproduce RECIPE=recipes/NAME.yaml))$(RECIPE)
REPORTS ?= reports
# reports are signed with kit's own key, where every kit command looks for it: kit.key in kit's
# config dir (KIT_CONFIG_DIR, else $XDG_CONFIG_HOME/kit, else ~/.config/kit), or KIT_SIGNING_KEY.
# `make reproduce` creates it on first use; no make target deletes it.
KIT_CONFIG_DIR ?= $(or $(XDG_CONFIG_HOME),$(HOME)/.config)/kit
SIGNING_KEY := $(or $(KIT_SIGNING_KEY),$(KIT_CONFIG_DIR)/kit.key)
# more of kit reproduce: SET="bench.runs=3 a.b=v" (each a --set) and ARGS="--no-sign ..."
SET ?=
ARGS ?=
KIT_ARGS = $(foreach s,$(SET),--set $(s)) $(ARGS)
PYTEST_ARGS ?=

# the container stack: image, up, bench, down, verify, base-image, test-container
include mk/container.mk
# kit report html in headless Chromium: test-browser
include mk/browser.mk

.PHONY: help venv key reproduce build bench report test unit integration lint fmt typecheck schema \
        schema-check clean distclean

help: ## list targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-14s %s\n", $$1, $$2}'

# uv creates the venv (no ensurepip needed) and fills it from one download cache shared with
# the engine venvs; pip's configured indexes and wheel folders are passed on (kit/installer.py)
$(VENV)/.kit-installed: pyproject.toml kit/installer.py
	$(PYTHON) -m kit.installer venv $(VENV) --seed -e '.[build,dev,html,fleet]'
	touch $@

venv: $(VENV)/.kit-installed ## create .venv with kit, its build stages and dev tools

$(SIGNING_KEY): | $(VENV)/.kit-installed
	$(KIT) keys generate --dir $(dir $(SIGNING_KEY)) --name $(basename $(notdir $(SIGNING_KEY)))

key: $(SIGNING_KEY) ## create the signing key used by make reproduce (once; kit's config dir)

reproduce: venv $(SIGNING_KEY) $(if $(HAS_DOCKER),$(if $(HAS_GPU),$(if $(filter pypi,$(ENGINE_FROM)),cuda-base-image),base-image)) ## build, serve, bench and signed report for RECIPE (in containers when Docker is there)
ifeq ($(HAS_DOCKER),1)
	@echo "kit: Docker engine found: running $(RECIPE) in containers (compose.yaml)"
	$(KIT) reproduce --runtime compose $(RECIPE) -o $(REPORTS) $(KIT_ARGS)
else
	@echo "kit: no Docker engine: running $(RECIPE) natively"
	$(KIT) reproduce $(RECIPE) -o $(REPORTS) $(KIT_ARGS)
endif

build: venv ## model + quantization for RECIPE (cached)
	$(KIT) build $(RECIPE)

report: venv ## one offline HTML page for REPORT=path/report.json (KEY=signer.pub), written beside it
	@test -n "$(REPORT)" || { echo "make report: set REPORT=path/report.json" >&2; exit 2; }
	$(KIT) report html $(REPORT) $(if $(KEY),--key $(KEY))

# make table REPORTS="examples/reports/*.report.json" KEYS=examples/keys: verified reports only
TABLE_REPORTS ?= $(if $(filter command line,$(origin REPORTS)),$(REPORTS),examples/reports/*.report.json)
KEYS ?= examples/keys
TABLE_DIR ?= build/table
.PHONY: table

table: venv ## BENCHMARKS.md and benchmarks.html in build/table/ from REPORTS (verified against KEYS)
	$(KIT) report table $(TABLE_REPORTS) --keys $(KEYS) -o $(TABLE_DIR)/BENCHMARKS.md \
	  --html $(TABLE_DIR)/benchmarks.html
	@echo "wrote $(TABLE_DIR)/BENCHMARKS.md and $(TABLE_DIR)/benchmarks.html"

test: venv lint typecheck schema-check unit test-browser integration test-container ## every check and test (needs no GPU; runs Docker for real)

unit: venv ## fast tests, no server: tests/unit (kit's code) and tests/repo (the repository's own files)
	$(PY) -m pytest tests/unit tests/repo -q $(PYTEST_ARGS)

integration: venv ## tests against a real vLLM CPU server (slow: builds the engine venv once; prints the 25 slowest steps)
	$(PY) -m pytest tests/integration -q --durations=25 $(PYTEST_ARGS)

lint: venv ## ruff check + format check, and the import layers (lint-imports)
	$(VENV)/bin/ruff check kit tests experiments
	$(VENV)/bin/ruff format --check kit tests experiments
	$(VENV)/bin/lint-imports

fmt: venv ## fix what lint reports
	$(VENV)/bin/ruff check --fix kit tests experiments
	$(VENV)/bin/ruff format kit tests experiments

typecheck: venv ## mypy --strict on the package
	$(VENV)/bin/mypy kit

schema: venv ## regenerate schemas/*.json from the models
	$(KIT) schema --out schemas

schema-check: venv ## fail if schemas/*.json drifted from the models (fix: make schema)
	$(KIT) schema --out schemas --check

.PHONY: fixtures check-dflash2

fixtures: venv ## regenerate tests/fixtures/reports from tests/factories.py
	$(PY) tests/make_fixtures.py

# The DFlash2 backport's CPU checks (experiments/dflash2-cpu-check.py and its three modules,
# against references and vLLM 0.28.0's own): not part of make test, as they download two vLLM
# wheels and Triton (about 1 GB) for one patch series. Run them when patches/vllm-0.26.0 changes.
check-dflash2: venv ## check patches/vllm-0.26.0 (DFlash2 backport) on the CPU, without a GPU
	scripts/check-dflash2-series.sh build/dflash2-check

clean: ## remove reports and test output
	rm -rf $(REPORTS) .pytest_cache .mypy_cache .ruff_cache

distclean: clean ## also remove .venv and kit's caches (.kit); the signing key is kept
	rm -rf $(VENV) .kit build/pycache
