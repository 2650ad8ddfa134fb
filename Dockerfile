# syntax=docker/dockerfile:1
#
# desched's container image built by Docker or Podman, on python:3.11-slim. scripts/build-image
# builds the equivalent image without a container daemon or a base image from a registry (Debian
# packages and PyPI wheels, mmdebstrap and umoci); that is the build the tests run and
# docs/deploy.md describes. Either way, push the image to your registry and point the chart
# (image.repository) or your kustomize overlay (images:) at it: no public desched image exists.
#
#   docker build -t REGISTRY/desched:0.1.0 . && docker push REGISTRY/desched:0.1.0
#   docker build --build-arg PLUGINS=./plugins/my-plugin -t REGISTRY/desched:0.1.0 .   # with a plugin
#   docker run --rm -v "$PWD/examples:/policy-dir:ro" REGISTRY/desched:0.1.0 validate --policy /policy-dir/policy.yaml
#
# The runtime image holds a virtualenv with desched and its runtime dependencies only (no test
# tools), runs as the numeric non-root user 65532, and writes nothing at run time, so it works with
# `readOnlyRootFilesystem: true`. Byte code is compiled at build time; PYTHONDONTWRITEBYTECODE=1
# keeps Python from trying to write .pyc files next to the read-only sources.

ARG PYTHON_IMAGE=python:3.11-slim

# --- build: install the package and its dependencies into /opt/desched ---------------------------
FROM ${PYTHON_IMAGE} AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

RUN python -m venv /opt/desched

WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src

# `.` installs the runtime dependencies from [project.dependencies] only; the `test` extra is
# not requested.
RUN /opt/desched/bin/pip install --no-compile .

# Plugin packages installed beside desched (docs/writing-plugins.md), as pip arguments: a
# project or wheel copied under plugins/ in the build context (`--build-arg
# PLUGINS=./plugins/my-plugin`), or a name on your package index. The context is bound for
# this step only (writable: a project's build files are discarded).
ARG PLUGINS=""
RUN --mount=type=bind,target=/context,rw \
    if [ -n "$PLUGINS" ]; then cd /context && /opt/desched/bin/pip install --no-compile $PLUGINS; fi

# Byte code is (re)compiled with unchecked hashes so it stays valid whatever timestamps the
# image layers end up with; then every plugin must load (`desched plugins` fails the build if
# one does not).
RUN /opt/desched/bin/python -m compileall -q -f --invalidation-mode unchecked-hash /opt/desched/lib \
 && /opt/desched/bin/desched --version \
 && /opt/desched/bin/desched plugins

# --- runtime ----------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}

LABEL org.opencontainers.image.title="desched" \
      org.opencontainers.image.description="A Kubernetes descheduler compatible with kubernetes-sigs/descheduler and koord-descheduler policies" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV PATH=/opt/desched/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

COPY --from=build /opt/desched /opt/desched

# 65532 is the conventional "nonroot" uid/gid of distroless images; it owns nothing in the image.
USER 65532:65532
WORKDIR /

# Metrics (/metrics) and health (/healthz, /readyz), plain HTTP.
EXPOSE 10258 10259

ENTRYPOINT ["desched"]
# One descheduling cycle with the policy mounted from a ConfigMap (deploy/ mounts it here).
CMD ["run", "--policy", "/policy-dir/policy.yaml", "--once"]
