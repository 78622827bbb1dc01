"""A tiny local model whose chat template TRL can parse tool calls from.

TRL parses the model's tool calls with transformers' response templates, which
``trl.chat_template_utils.add_response_schema`` knows only for the chat templates of some
model families. The tiny test model of :mod:`rods_agent.models.tiny` has its own ChatML
template; this module gives it TRL's Qwen 2.5 template instead (same special tokens, the
same ``<tool_call>`` format), so GRPOTrainer recognises it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rods_env.errors import ConfigError


def trl_chat_template() -> str:
    """TRL's copy of the Qwen 2.5 chat template (tool calls in ``<tool_call>`` blocks)."""
    from trl.chat_template_utils import qwen2_5_chat_template

    return str(qwen2_5_chat_template)


def build_tiny_trl_model(path: str | Path, **kwargs: Any) -> Path:
    """Write the tiny random Qwen2 model to ``path`` with TRL's Qwen 2.5 chat template.

    Args:
        path: Folder to write.
        **kwargs: Passed to :func:`rods_agent.models.tiny.build_tiny_model` (``layers``,
            ``hidden_size``, ``seed``, ...).

    Returns:
        ``path``.
    """
    from transformers import AutoTokenizer

    from rods_agent.models.tiny import build_tiny_model

    path = build_tiny_model(path, **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.chat_template = trl_chat_template()
    tokenizer.save_pretrained(path)
    return path


def trl_template_names() -> list[str]:
    """Names of the chat templates TRL ships (``trl/chat_templates/<name>.jinja``)."""
    import trl

    folder = Path(trl.__file__).parent / "chat_templates"
    return sorted(p.stem for p in folder.glob("*.jinja"))


def load_chat_template(name_or_path: str) -> str:
    """A chat template: a ``.jinja`` file, or the name of one TRL ships (``qwen3``,
    ``llama3_1``, ``gptoss``, ...; TRL recognizes a model only by its template's exact text).

    Raises:
        ConfigError: neither a file nor a TRL template name.
    """
    path = Path(name_or_path)
    if path.is_file():
        return path.read_text(encoding="utf-8")
    import trl

    shipped = Path(trl.__file__).parent / "chat_templates" / f"{name_or_path}.jinja"
    if shipped.is_file():
        return shipped.read_text(encoding="utf-8")
    raise ConfigError(
        f"--chat-template {name_or_path!r}: no such file, and not a template TRL ships "
        f"({', '.join(n for n in trl_template_names() if not n.endswith('_training'))})"
    )


def trl_template_problem(tokenizer: Any) -> str | None:
    """Why TRL's tool loop cannot use this tokenizer's chat template, or None when it can.

    TRL parses tool calls with a response schema it knows only for templates it recognizes
    byte for byte (``trl.chat_template_utils.add_response_schema``), and its loop needs a
    template that renders a tool-calling conversation.
    """
    import copy

    from trl.chat_template_utils import add_response_schema, supports_tool_calling

    if not supports_tool_calling(tokenizer):
        return (
            "the model's chat template cannot render a tool-calling conversation (no tool "
            "role or no tool calls; Gemma 3's has neither), which TRL's tool loop needs; "
            "pass --chat-template with a template that can"
        )
    try:
        add_response_schema(copy.copy(tokenizer))
    except ValueError:
        return (
            "TRL does not recognize the model's chat template (it matches templates byte for "
            "byte to parse tool calls); pass --chat-template NAME to use TRL's copy of the "
            "family's official template (e.g. qwen3, qwen2_5, llama3_1, gptoss) or a .jinja file"
        )
    return None
