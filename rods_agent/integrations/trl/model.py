"""A tiny local model whose chat template TRL can parse tool calls from.

TRL parses the model's tool calls with transformers' response templates, which
``trl.chat_template_utils.add_response_schema`` knows only for the chat templates of some
model families. The tiny test model of :mod:`rods_agent.tiny_model` has its own ChatML
template; this module gives it TRL's Qwen 2.5 template instead (same special tokens, the
same ``<tool_call>`` format), so GRPOTrainer recognises it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def trl_chat_template() -> str:
    """TRL's copy of the Qwen 2.5 chat template (tool calls in ``<tool_call>`` blocks)."""
    from trl.chat_template_utils import qwen2_5_chat_template

    return str(qwen2_5_chat_template)


def build_tiny_trl_model(path: str | Path, **kwargs: Any) -> Path:
    """Write the tiny random Qwen2 model to ``path`` with TRL's Qwen 2.5 chat template.

    Args:
        path: Folder to write.
        **kwargs: Passed to :func:`rods_agent.tiny_model.build_tiny_model` (``layers``,
            ``hidden_size``, ``seed``, ...).

    Returns:
        ``path``.
    """
    from transformers import AutoTokenizer

    from rods_agent.tiny_model import build_tiny_model

    path = build_tiny_model(path, **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.chat_template = trl_chat_template()
    tokenizer.save_pretrained(path)
    return path
