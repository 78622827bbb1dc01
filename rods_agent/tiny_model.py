"""A tiny random Qwen2 chat model built locally, for tests, benchmarks and offline trials.

It emits nonsense (its weights are random), which is what the error paths need; its
tokenizer and chat template are real (byte-level BPE, ChatML with tools), so token
accounting, batching and serving are exercised as with a real model. Nothing is downloaded.

    python -m rods_agent.tiny_model results/tiny-qwen  # then: rods eval --engine transformers --model results/tiny-qwen
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from rods_env.errors import ConfigError

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
TOOL_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")


def _corpus(seed: int = 0, n: int = 1500) -> Iterator[str]:
    """English-like text, JSON tool calls and contact details (deterministic)."""
    from faker import Faker

    fake = Faker("en_US")
    fake.seed_instance(seed)
    rng = random.Random(seed)
    for _ in range(n):
        yield fake.paragraph(nb_sentences=3)
        call = {
            "name": f"{fake.word()}_{fake.word()}",
            "arguments": {
                "order_id": f"#W{rng.randrange(10**7):07d}",
                "email": fake.email(),
                "zip": fake.zipcode(),
                "amount": round(rng.random() * 1000, 2),
            },
        }
        yield json.dumps(call)
        yield f"{fake.address()} {fake.name()} {fake.phone_number()}"


def build_tiny_model(
    path: str | Path,
    *,
    vocab_size: int = 4096,
    hidden_size: int = 128,
    layers: int = 2,
    heads: int = 2,
    kv_heads: int = 1,
    intermediate_size: int = 256,
    max_positions: int = 16384,
    seed: int = 0,
    extra_texts: Iterable[str] = (),
) -> Path:
    """Write a tiny random Qwen2 chat model (weights, config, tokenizer) to ``path``.

    The tokenizer is trained through ``Qwen2Tokenizer.train_new_from_iterator`` so that
    token ids survive a reload by ``AutoTokenizer``; ``<tool_call>`` and friends are added
    as ordinary (non-special) tokens, as in Qwen 2.5, so they survive decoding. The folder
    is written beside ``path`` and renamed into place, so a killed build never leaves a
    folder that looks complete.

    Args:
        extra_texts: More tokenizer training text (training passes the domains' policies
            and tool schemas, which then take about half as many tokens).

    Returns:
        ``path``.

    Raises:
        ConfigError: when ``path`` is a file, or a folder holding something other than a
            model (it is replaced only when empty or a model folder).
    """
    path = Path(path)
    if path.exists() and (
        not path.is_dir() or (any(path.iterdir()) and not (path / "config.json").exists())
    ):
        raise ConfigError(f"{path} exists and is not an empty folder or a model folder")
    tmp = path.with_name(path.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    _write_tiny_model(
        tmp,
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        layers=layers,
        heads=heads,
        kv_heads=kv_heads,
        intermediate_size=intermediate_size,
        max_positions=max_positions,
        seed=seed,
        extra_texts=extra_texts,
    )
    shutil.rmtree(path, ignore_errors=True)
    tmp.replace(path)
    return path


def _write_tiny_model(
    path: Path,
    *,
    vocab_size: int,
    hidden_size: int,
    layers: int,
    heads: int,
    kv_heads: int,
    intermediate_size: int,
    max_positions: int,
    seed: int,
    extra_texts: Iterable[str],
) -> None:
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM, Qwen2Tokenizer

    from rods_agent.engines.chat import CHATML_TOOLS_TEMPLATE

    path.mkdir(parents=True, exist_ok=True)
    base = Qwen2Tokenizer()
    tok = base.train_new_from_iterator(
        [*_corpus(seed), *extra_texts],
        vocab_size=vocab_size - len(TOOL_TOKENS),
        new_special_tokens=list(SPECIAL_TOKENS),
        show_progress=False,  # the trainer's own bars: dozens of them, one build of seconds
    )
    tok.add_tokens(list(TOOL_TOKENS), special_tokens=False)
    tok.eos_token = "<|im_end|>"
    tok.pad_token = "<|endoftext|>"
    tok.chat_template = CHATML_TOOLS_TEMPLATE
    tok.model_max_length = max_positions
    tok.save_pretrained(path)

    n_vocab = len(tok)
    config = Qwen2Config(
        vocab_size=n_vocab,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        bos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
        eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(path)
    GenerationConfig(
        eos_token_id=[config.eos_token_id, config.bos_token_id],
        pad_token_id=config.pad_token_id,
    ).save_pretrained(path)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m rods_agent.tiny_model DIR``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="folder to write the model to")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden-size", type=int, default=128)
    args = parser.parse_args(argv)
    try:
        out = build_tiny_model(args.path, layers=args.layers, hidden_size=args.hidden_size)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
