#!/usr/bin/env bash
# The wheels scripts/gpu_check.sh needs on a GPU machine without network: rods' dependencies
# that those machines lack (torch, transformers, numpy, PyYAML, tqdm and tokenizers are
# there), at the versions of this project's .venv (constraints/cpu.txt), with pydantic-core
# for CPython 3.10-3.14 (the GPU machine's Python is not known here):
#
#   bash scripts/setup.sh gpu-check      # ~14 MB into .gpu-check/wheels (git-ignored); then instant
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WHEELS="$ROOT/.gpu-check/wheels"
DEPS=(gymnasium cloudpickle farama-notifications pydantic pydantic-core annotated-types
      typing-inspection typing-extensions faker omegaconf
      bfcl-eval mpmath)  # BFCL multi-turn for `gpu_check.sh --paper` (bfcl-eval without its deps, as the bfcl part)

PIP="${PIP:-$ROOT/.venv/bin/pip}"
pins=()
for dep in "${DEPS[@]}"; do
    version="$("$ROOT/.venv/bin/python" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$dep")"
    pins+=("$dep==$version")
done
stamp="$(printf '%s\n' "${pins[@]}" | sha256sum | cut -c1-16)"
if [[ -f "$WHEELS/.stamp" && "$(cat "$WHEELS/.stamp")" == "$stamp" ]]; then
    echo "setup gpu-check: $WHEELS is up to date"
    exit 0
fi
rm -rf "$WHEELS" && mkdir -p "$WHEELS"
echo "setup gpu-check: downloading ${pins[*]}"
pure=()
for pin in "${pins[@]}"; do
    if [[ "$pin" == pydantic-core==* ]]; then core="$pin"; else pure+=("$pin"); fi
done
"$PIP" download -q --no-deps -d "$WHEELS" "${pure[@]}" 2> >(grep -v "is ignored" >&2)
for py in 3.10 3.11 3.12 3.13 3.14; do
    "$PIP" download -q --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
        --python-version "$py" -d "$WHEELS" "$core" 2> >(grep -v "is ignored" >&2)
done
echo "$stamp" > "$WHEELS/.stamp"
echo "setup gpu-check: $(du -sh "$WHEELS" | cut -f1) in $WHEELS"
