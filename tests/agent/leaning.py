"""A tiny model that leans towards one token (test helper): the weak model of issue 41 that
closes its tool call and then goes on writing, in miniature."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def leaning_engine(model_dir: Path, token: str = "</tool_call>", bias: float = 6.0) -> Any:
    """The transformers engine on ``model_dir`` with ``bias`` added to ``token``'s logit at
    every position (a forward hook on the output layer, so the learner's scoring of the same
    model sees it too). With the tiny model's 4,096 tokens, a bias of 6 makes a sampled
    ``</tool_call>`` frequent (a few in 24 tokens) without making it the only token."""
    from rods_agent.engines.hf import TransformersEngine

    engine = TransformersEngine(model_dir)
    target = engine.chat.tokenizer.convert_tokens_to_ids(token)

    def lean(module: Any, inputs: Any, output: Any) -> Any:
        output = output.clone()
        output[..., target] += bias
        return output

    engine.model.get_output_embeddings().register_forward_hook(lean)
    return engine
