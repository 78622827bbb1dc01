"""Tiny random chat models built locally, for tests, benchmarks and offline trials.

They emit nonsense (their weights are random), which is what the error paths need. Two kinds:

* the default: a Qwen2 model with a small byte-level BPE tokenizer trained here and a ChatML
  template with tools (a few MB, no asset needed);
* ``family=``: a model of a real family's architecture with that family's **real** tokenizer
  and official chat template (``qwen3``, ``qwen2_5``, ``llama3_1``, ``gemma3``, ``gptoss``),
  taken from ``.assets/tokenizers/<family>`` (``bash scripts/setup.sh tokenizers``) or a
  folder given as ``tokenizer=``. At hidden size 64 and 2 layers a model is 8-17M parameters,
  nearly all of them the embedding of a 128k-262k vocabulary; every layer uses full attention
  (the real Gemma 3 and gpt-oss interleave sliding-window layers).

So token accounting, templates, batching and serving are exercised as with a real model.
Nothing is downloaded.

    python -m rods_agent.models.tiny results/tiny-qwen  # then: rods eval --engine transformers --model results/tiny-qwen
    python -m rods_agent.models.tiny results/tiny-qwen3 --family qwen3
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rods_env.errors import ConfigError

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")

FAMILIES: dict[str, dict[str, Any]] = {
    "qwen3": {"arch": "qwen3", "eos": ("<|im_end|>", "<|endoftext|>"), "pad": "<|endoftext|>"},
    "qwen2_5": {"arch": "qwen2", "eos": ("<|im_end|>", "<|endoftext|>"), "pad": "<|endoftext|>"},
    "llama3_1": {
        "arch": "llama",
        "eos": ("<|end_of_text|>", "<|eom_id|>", "<|eot_id|>"),
        "pad": "<|finetune_right_pad_id|>",
    },
    "gemma3": {"arch": "gemma3_text", "eos": ("<eos>", "<end_of_turn>"), "pad": "<pad>"},
    "gptoss": {
        "arch": "gpt_oss",
        "eos": ("<|return|>", "<|endoftext|>", "<|call|>"),
        "pad": "<|endoftext|>",
    },
}
"""The real families a tiny model can be built for: architecture, the stop tokens of their
generation config (as the released models ship it), the padding token."""
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


def tokenizers_dir() -> Path:
    """Where the real tokenizers are: ``$RODS_TOKENIZERS_DIR``, else ``.assets/tokenizers`` of
    the source checkout (``bash scripts/setup.sh tokenizers`` fills it)."""
    env = os.environ.get("RODS_TOKENIZERS_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / ".assets" / "tokenizers"


def family_tokenizer(family: str) -> Path:
    """The tokenizer folder of a real family.

    Raises:
        ConfigError: an unknown family, or a folder that is not there.
    """
    if family not in FAMILIES:
        raise ConfigError(f"unknown model family '{family}'; families: {', '.join(FAMILIES)}")
    path = tokenizers_dir() / family
    if not (path / "tokenizer.json").is_file():
        raise ConfigError(
            f"no {family} tokenizer at {path}: run `bash scripts/setup.sh tokenizers` "
            "(or set RODS_TOKENIZERS_DIR)"
        )
    return path


def build_tiny_model(
    path: str | Path,
    *,
    family: str | None = None,
    tokenizer: str | Path | None = None,
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
        family: A real family (:data:`FAMILIES`): its architecture, its real tokenizer and
            chat template (the size arguments apply; ``vocab_size`` and ``extra_texts`` do
            not). None: the Qwen2 model with a tokenizer trained here.
        tokenizer: The family's tokenizer folder (default :func:`family_tokenizer`).
        extra_texts: More tokenizer training text (training passes the domains' policies
            and tool schemas, which then take about half as many tokens).

    Returns:
        ``path``.

    Raises:
        ConfigError: when ``path`` is a file, or a folder holding something other than a
            model (it is replaced only when empty or a model folder); an unknown family or
            a missing tokenizer.
    """
    path = Path(path)
    source = None
    if family is not None:
        source = Path(tokenizer) if tokenizer is not None else family_tokenizer(family)
        if family not in FAMILIES:
            raise ConfigError(f"unknown model family '{family}'; families: {', '.join(FAMILIES)}")
    if path.exists() and (
        not path.is_dir() or (any(path.iterdir()) and not (path / "config.json").exists())
    ):
        raise ConfigError(f"{path} exists and is not an empty folder or a model folder")
    tmp = path.with_name(path.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    if family is not None:
        assert source is not None
        _write_family_model(
            tmp,
            family,
            source,
            hidden_size=hidden_size,
            layers=layers,
            heads=heads,
            kv_heads=kv_heads,
            intermediate_size=intermediate_size,
            max_positions=max_positions,
            seed=seed,
        )
        shutil.rmtree(path, ignore_errors=True)
        tmp.replace(path)
        return path
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


def _write_family_model(
    path: Path,
    family: str,
    tokenizer_dir: Path,
    *,
    hidden_size: int,
    layers: int,
    heads: int,
    kv_heads: int,
    intermediate_size: int,
    max_positions: int,
    seed: int,
) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    spec = FAMILIES[family]
    path.mkdir(parents=True, exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(tokenizer_dir / name, path / name)
    tok = AutoTokenizer.from_pretrained(path)

    def token_id(token: str) -> int:
        tid = tok.convert_tokens_to_ids(token)
        if not isinstance(tid, int) or tid < 0 or tid == tok.unk_token_id:
            raise ConfigError(f"{tokenizer_dir}: the {family} tokenizer has no {token}")
        return tid

    eos = [token_id(t) for t in spec["eos"]]
    pad = token_id(spec["pad"])
    bos = tok.bos_token_id if tok.bos_token_id is not None else pad
    arch: dict[str, Any] = {
        "vocab_size": len(tok),
        "hidden_size": hidden_size,
        "intermediate_size": intermediate_size,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": hidden_size // heads,
        "max_position_embeddings": max_positions,
        "tie_word_embeddings": True,
        "bos_token_id": bos,
        "eos_token_id": eos[0],
        "pad_token_id": pad,
    }
    if spec["arch"] in ("gemma3_text", "gpt_oss"):
        arch["layer_types"] = ["full_attention"] * layers
    if spec["arch"] == "gemma3_text":
        arch["query_pre_attn_scalar"] = hidden_size // heads
    if spec["arch"] == "gpt_oss":
        arch.update(num_local_experts=4, num_experts_per_tok=2)
    config = AutoConfig.for_model(spec["arch"], **arch)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(path)
    GenerationConfig(eos_token_id=eos, pad_token_id=pad, bos_token_id=bos).save_pretrained(path)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m rods_agent.models.tiny DIR``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="folder to write the model to")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument(
        "--family", choices=sorted(FAMILIES), default=None, help="a real family's tokenizer"
    )
    args = parser.parse_args(argv)
    try:
        out = build_tiny_model(
            args.path,
            family=args.family,
            layers=args.layers,
            hidden_size=args.hidden_size,
            heads=max(2, args.hidden_size // 16) if args.family else 2,
            kv_heads=1,
            intermediate_size=2 * args.hidden_size,
        )
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
