#!/usr/bin/env bash
# verifiers v1 (Prime Intellect's Environments Hub) in a venv of its own, .venv-verifiers, for
# the rods taskset (rods_agent/integrations/verifiers, hubs/verifiers; docs/hubs.md).
#
#   bash scripts/setup.sh verifiers          # a minute; quick when already done
#   RODS_VERIFIERS_VENV=/path/to/venv bash scripts/setup.sh verifiers
#
# verifiers 0.4.0 pins mcp==2.0.0 and openai<3, which the main venv's OpenEnv (fastmcp 3,
# mcp 1.x) excludes, so it gets its own venv, pinned by constraints/verifiers.txt, with rods
# (its base install), BFCL and τ²-bench (the bfcl and tau2 parts) and uv.
# verifiers runs its agent's chat loop as a PEP 723 script that uv syncs on first use; the
# script's dependencies are downloaded here once (chat-program-wheels), so the tests run it
# offline (UV_NO_INDEX=1, UV_FIND_LINKS). Idempotent: a stamp covers this script and the pins.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${RODS_VERIFIERS_VENV:-$ROOT/.venv-verifiers}"
PINS="$ROOT/constraints/verifiers.txt"
STAMP="$VENV/.rods-setup-verifiers"
WHEELS="$VENV/chat-program-wheels"

want="$( (grep -v '^ *#' "${BASH_SOURCE[0]}"; grep -v '^ *#' "$PINS") | sha256sum | cut -c1-16)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]] && "$VENV/bin/python" -c "import verifiers.v1" 2>/dev/null; then
    echo "setup verifiers: verifiers is up to date in $VENV"
else
    start=$SECONDS
    [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
    pip_install() {
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$@" 2>&1 \
            | { grep -v -e "is ignored: it is neither a file nor a directory" || true; }
    }
    echo "setup verifiers: installing verifiers, uv and rods into $VENV"
    pip_install -c "$PINS" "$(grep -i '^verifiers==' "$PINS")" "$(grep -i '^uv==' "$PINS")"
    pip_install -c "$PINS" -e "$ROOT"
    # the chat program's own dependencies, as verifiers declares them
    mapfile -t deps < <("$VENV/bin/python" - <<'PY'
import re

from verifiers.v1.harnesses.utils.launch import CHAT_PROGRAM

for dep in re.findall(r'"([^"]+)"', CHAT_PROGRAM.split("dependencies = ", 1)[1].split("\n", 1)[0]):
    print(dep)
PY
)
    rm -rf "$WHEELS"
    "$VENV/bin/python" -m pip download --quiet --disable-pip-version-check -c "$PINS" \
        --only-binary=:all: -d "$WHEELS" "${deps[@]}" 2>&1 \
        | { grep -v -e "is ignored: it is neither a file nor a directory" || true; }
    # (no `pip check`: BFCL and τ²-bench are installed with --no-deps by their own scripts)
    "$VENV/bin/python" -c "import importlib.metadata as md; print('setup verifiers: verifiers', md.version('verifiers'), 'mcp', md.version('mcp'), 'uv', md.version('uv'))"
    echo "$want" > "$STAMP"
    echo "setup verifiers: done in $((SECONDS - start)) s"
fi
# every rods env in this venv too (each script is idempotent on its own)
RODS_VENV="$VENV" bash "$ROOT/scripts/setup/bfcl.sh"
RODS_VENV="$VENV" bash "$ROOT/scripts/setup/tau2.sh"
