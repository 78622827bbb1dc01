#!/usr/bin/env bash
# Everything the test suite needs on a fresh machine (README command 2 and .ci/run call this):
#
#   bash scripts/setup.sh tests           # then: .venv/bin/python -m pytest
#
# The main venv, then every other part, each idempotent (docs/setup.md: what each is for).
# Tests that need a part skip without it on a developer's checkout and fail without it under
# RODS_REQUIRE_SETUP=1 (CI): tests/requires.py.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SETUP="$ROOT/scripts/setup"
for part in main vllm tokenizers chromium bfcl; do
    bash "$SETUP/$part.sh"
done
RODS_VENV="${RODS_VLLM_VENV:-$ROOT/.venv-vllm}" bash "$SETUP/bfcl.sh"  # the vLLM tests play BFCL too
for part in gpu-check tau2 openenv verifiers; do
    bash "$SETUP/$part.sh"
done
