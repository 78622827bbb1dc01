#!/usr/bin/env bash
# One prepared check of the GPU training path, for a machine with one GPU and no network:
# a tiny random Qwen3 with Qwen3's real tokenizer and chat template, a warm start on the
# oracle's transcripts and 5 GRPO steps in bf16 on CUDA with the transformers engine. It
# prints tokens/s, the share of step time outside the model, peak GPU memory and how the
# episodes ended, and exits non-zero when any episode ended in `error` (or nothing trained).
#
#   bash scripts/setup.sh gpu-check                    # here, once: wheels for the GPU machine
#   bash scripts/gpu_check.sh                          # there: --device cuda, 5 steps
#   bash scripts/gpu_check.sh --device cpu             # the same path, small, on a CPU
#   bash scripts/gpu_check.sh --experiment             # configs/experiment/gpu.yaml's protocol (rods experiment), in minutes
#   bash scripts/gpu_check.sh --paper --model DIR      # configs/experiment/paper.yaml's first steps (bfcl-paper: static,
#                                                      #   envtuning, rods, 2 steps each, 8 test tasks) with DIR,
#                                                      #   e.g. a Qwen3-4B-Instruct-2507 folder; needs bfcl-eval
#   bash scripts/gpu_check.sh --paper --device cpu     # the same path with the tiny random model, 1 step each
#   bash scripts/gpu_check.sh --tokenizer DIR --out DIR --steps N
#
# The GPU machines have torch (CUDA), transformers, peft and accelerate, but neither vLLM nor
# network nor rods' other dependencies. scripts/setup.sh gpu-check downloads those (14 MB)
# into .gpu-check/wheels; on the GPU machine, when they are not importable, this script
# unpacks them into .gpu-check/site-cpXY and puts that and the repository on PYTHONPATH
# (nothing is installed). Carry .gpu-check/wheels and
# .assets/tokenizers/qwen3 (bash scripts/setup.sh tokenizers) with the repository: ~20 MB.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WHEELS="$ROOT/.gpu-check/wheels"

PYTHON="${PYTHON:-}"
if [[ -z "$PYTHON" ]]; then
    if [[ -x "$ROOT/.venv/bin/python" ]]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

# GPU_CHECK_VENDORED=1 uses the bundled dependencies even where they are installed (to test
# the bundle on a machine that has them).
if [[ "${GPU_CHECK_VENDORED:-}" == 1 ]] || ! "$PYTHON" -c "import gymnasium, pydantic, faker, omegaconf, bfcl_eval, mpmath" 2>/dev/null; then
    tag="$("$PYTHON" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
    SITE="$ROOT/.gpu-check/site-$tag"
    if [[ ! -f "$SITE/.complete" ]]; then
        [[ -d "$WHEELS" ]] || { echo "gpu_check: error: rods' dependencies are missing and there is no $WHEELS (run \`bash scripts/setup.sh gpu-check\` on a machine with the project's .venv, and carry .gpu-check/wheels)" >&2; exit 2; }
        "$PYTHON" - "$WHEELS" "$SITE" "$tag" <<'EOF'
import sys, zipfile
from pathlib import Path

wheels, site, tag = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
site.mkdir(parents=True, exist_ok=True)
for wheel in sorted(wheels.glob("*.whl")):
    tags = wheel.name[:-4].split("-")[-3:]  # python, abi, platform
    if tags[0] not in ("py3", tag) or tags[1] not in ("none", tag):
        continue  # a pydantic-core for another Python
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
(site / ".complete").write_text("")
EOF
    fi
    export PYTHONPATH="$ROOT:$SITE${PYTHONPATH#"$ROOT"}"
    echo "gpu_check: rods' dependencies from $SITE"
fi

exec "$PYTHON" "$ROOT/scripts/gpu_check.py" "$@"
