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
    from rods_agent.models.tiny import build_tiny_model

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


# -- real model families (tokenizers from scripts/setup.sh tokenizers) ------------------------
FAMILY_CASES = [
    ("qwen3", True),
    ("qwen3", False),
    ("qwen2_5", None),
    ("llama3_1", None),
    ("gemma3", None),
    ("gptoss", None),
]
"""(family, thinking): Qwen3 with thinking on and off, the others with their template's default."""


def case_id(case: tuple[str, bool | None]) -> str:
    family, thinking = case
    return family if thinking is None else f"{family}-{'think' if thinking else 'nothink'}"


def require_tokenizer(family: str) -> Path:
    """The family's tokenizer folder; skips (fails under RODS_REQUIRE_SETUP=1) without it."""
    from rods_agent.models.tiny import tokenizers_dir
    from tests.requires import require

    path = tokenizers_dir() / family
    require(
        (path / "tokenizer.json").is_file(),
        f"no {family} tokenizer at {path}",
        "bash scripts/setup.sh tokenizers",
    )
    return path


class FamilyModels:
    """Tiny random models of the real families, each built once per test session."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._built: dict[str, Path] = {}
        self._tokenizers: dict[str, object] = {}

    def model(self, family: str) -> Path:
        if family not in self._built:
            from rods_agent.models.tiny import build_tiny_model

            tokenizer = require_tokenizer(family)
            self._built[family] = build_tiny_model(
                self.root / family, family=family, tokenizer=tokenizer, hidden_size=64,
                layers=2, heads=4, kv_heads=2, intermediate_size=128,
            )  # fmt: skip
        return self._built[family]

    def tokenizer(self, family: str):
        if family not in self._tokenizers:
            from transformers import AutoTokenizer

            self._tokenizers[family] = AutoTokenizer.from_pretrained(require_tokenizer(family))
        return self._tokenizers[family]


@pytest.fixture(scope="session")
def family_models(tmp_path_factory: pytest.TempPathFactory) -> FamilyModels:
    """Tiny models (hidden 64, 2 layers) with the real tokenizers, built on first use."""
    pytest.importorskip("transformers")
    return FamilyModels(tmp_path_factory.mktemp("families"))


@pytest.fixture(scope="module")
def evals(tmp_path_factory, retail_tasks):
    """An oracle and a random evaluation of six retail tasks (two trials of random): the
    folders ``rods eval`` writes, for ``rods view``."""
    from rods_agent.engines import oracle_engine, random_engine
    from rods_agent.evaluation.evaluate import evaluate

    root = tmp_path_factory.mktemp("evals")
    meta = {"env": "rods/Retail-v0", "pool": "seeds", "split": "test"}
    evaluate(oracle_engine(retail_tasks), retail_tasks, out=root / "oracle",
             meta={**meta, "model": "oracle", "engine": "oracle"})  # fmt: skip
    evaluate(random_engine(0), retail_tasks, k=2, out=root / "random",
             meta={**meta, "model": "random", "engine": "random"})  # fmt: skip
    return root / "oracle", root / "random"
