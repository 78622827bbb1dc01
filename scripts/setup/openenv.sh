#!/usr/bin/env bash
# OpenEnv in the project's venv: `rods serve`, its typed client, `openenv validate` and TRL
# through the client (docs/hubs.md).
#
#   bash scripts/setup.sh openenv          # seconds; quick when already done
#   RODS_VENV=/path/to/venv bash scripts/setup.sh openenv
#
# openenv 0.10.0 declares gradio for its optional web UI (/web), which pins pillow<13 and is
# not needed to serve, validate or train; so openenv is installed with --no-deps and what its
# server, client and CLI import comes from the `openenv` extra, pinned by constraints/cpu.txt.
# Idempotent: a stamp covers this script's commands and the pins.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${RODS_VENV:-$ROOT/.venv}"
PINS="$ROOT/constraints/cpu.txt"
STAMP="$VENV/.rods-setup-openenv"

want="$( (grep -v '^ *#' "${BASH_SOURCE[0]}"; grep -i -E '^(openenv|fastapi|uvicorn|websockets|fastmcp|mcp|jsonschema|tomli|tomli_w)==' "$PINS") | sha256sum | cut -c1-16)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]] && "$VENV/bin/python" -c "import openenv.core" 2>/dev/null; then
    echo "setup openenv: OpenEnv is up to date in $VENV"
    exit 0
fi
if [[ ! -x "$VENV/bin/python" ]]; then
    echo "setup openenv: no virtual environment at $VENV (run: bash scripts/setup.sh main)" >&2
    exit 1
fi
start=$SECONDS
pip_install() {
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$@" 2>&1 \
        | { grep -v -e "is ignored: it is neither a file nor a directory" \
                    -e "dependency resolver does not currently take into account" \
                    -e " requires .*, which is not installed" -e " requires .*, but you have " || true; }
}
echo "setup openenv: installing openenv (--no-deps) and what it imports into $VENV"
pip_install -c "$PINS" -e "$ROOT[openenv]"
pip_install --no-deps "$(grep -i '^openenv==' "$PINS")"
"$VENV/bin/python" - <<'PY'
import importlib.metadata as md

from openenv.core.env_server.http_server import create_app  # noqa: F401
from openenv.core.env_server.mcp_environment import MCPEnvironment  # noqa: F401
from openenv.core.mcp_client import MCPToolClient  # noqa: F401

print("setup openenv: openenv", md.version("openenv"), "fastmcp", md.version("fastmcp"),
      "mcp", md.version("mcp"))
PY
echo "$want" > "$STAMP"
echo "setup openenv: done in $((SECONDS - start)) s"
