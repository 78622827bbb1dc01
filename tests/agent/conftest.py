"""Fixtures of the agent tests: a tiny random chat model built locally, retail tasks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session", autouse=True)
def _one_thread() -> None:
    """Pin torch to one thread: the CI machine has two cores shared with other jobs."""
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Qwen2 chat model with a ChatML-with-tools template (built once, ~1 s)."""
    pytest.importorskip("transformers")
    from rods_agent.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def broken_template_model(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with a chat template that cannot render a message that follows an
    assistant message (as Gemma 3's cannot render a ``tool`` message): the opening renders,
    every observation fails, so every episode ends in ``error``."""
    import shutil

    from transformers import AutoTokenizer

    to = tmp_path_factory.mktemp("broken-template") / "model"
    shutil.copytree(tiny_model_dir, to)
    tokenizer = AutoTokenizer.from_pretrained(to)
    tokenizer.chat_template = (
        "{%- for m in messages %}{%- if not loop.first and loop.previtem.role == 'assistant' %}"
        "{{ raise_exception('Conversation roles must alternate') }}{%- endif %}{%- endfor %}"
        + tokenizer.chat_template
    )
    tokenizer.save_pretrained(to)
    return to


@pytest.fixture(scope="session")
def tiny_engine(tiny_model_dir: Path):
    """The transformers engine on the tiny model (CPU, float32)."""
    from rods_agent.engines.hf import TransformersEngine

    return TransformersEngine(tiny_model_dir)


@pytest.fixture(scope="session")
def retail():
    """The retail domain."""
    from rods_env.registry import load_domain

    return load_domain("retail")


@pytest.fixture(scope="session")
def retail_tasks(retail):
    """A few retail seed tasks of different skills (test split)."""
    tasks = retail.seed_tasks("test")
    seen, picked = set(), []
    for t in tasks:
        if t.skill not in seen:
            seen.add(t.skill)
            picked.append(t)
    return picked[:6]
