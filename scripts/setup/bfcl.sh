#!/usr/bin/env bash
# Install BFCL multi-turn's package into the project's venv: the tasks, ground truth, function
# docs, API classes and official checker that the BFCL environments and tests read.
#
#   bash scripts/setup.sh bfcl                 # into .venv (quick when already done)
#   RODS_VENV=/path/to/venv bash scripts/setup.sh bfcl
#
# bfcl-eval declares heavy dependencies (provider SDKs, sentence-transformers, faiss, a numpy
# pin) that its multi-turn API classes and checker never import: it is installed with
# --no-deps, plus mpmath, the one dependency they need. Versions come from
# constraints/cpu.txt. The script is idempotent: a stamp records what was installed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${RODS_VENV:-$ROOT/.venv}"
PINS="$ROOT/constraints/cpu.txt"
STAMP="$VENV/.rods-bfcl"

pin() { grep -E "^$1==" "$PINS" | head -1; }
BFCL="$(pin bfcl-eval)"
MPMATH="$(pin mpmath)"
if [[ -z "$BFCL" || -z "$MPMATH" ]]; then
    echo "setup bfcl: constraints/cpu.txt must pin bfcl-eval and mpmath" >&2
    exit 1
fi
if [[ ! -x "$VENV/bin/python" ]]; then
    echo "setup bfcl: no virtual environment at $VENV (run: bash scripts/setup.sh main)" >&2
    exit 1
fi

# The stamp covers the script's commands (not its comments) and the two pins.
want="$( (grep -v '^ *#' "${BASH_SOURCE[0]}"; echo "$BFCL $MPMATH") | sha256sum | cut -c1-16)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]] \
    && "$VENV/bin/python" -c "import bfcl_eval, mpmath" 2>/dev/null; then
    echo "setup bfcl: $BFCL is installed in $VENV"
    exit 0
fi

echo "setup bfcl: installing $BFCL (--no-deps) and $MPMATH into $VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "$BFCL" "$MPMATH" 2>&1 \
    | { grep -v "is ignored: it is neither a file nor a directory" || true; }
"$VENV/bin/python" - <<'PY'
import importlib
for module in ("gorilla_file_system", "math_api", "message_api", "posting_api", "ticket_api",
               "trading_bot", "travel_booking", "vehicle_control"):
    importlib.import_module(f"bfcl_eval.eval_checker.multi_turn_eval.func_source_code.{module}")
importlib.import_module("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker")
PY
echo "$want" > "$STAMP"
echo "setup bfcl: done"
