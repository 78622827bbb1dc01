"""Model engines: one protocol, local (transformers, vLLM) and remote (OpenAI-compatible).

Every engine takes a batch of :class:`GenerationRequest` (OpenAI-format messages, tool
schemas, optionally the exact prompt token ids) and returns one :class:`Completion` per
request (text, sampled token ids, per-token log-probabilities). A failed generation is a
completion with ``finish_reason == "error"``, never an exception.

:class:`EngineOptions` and :func:`build_engine` build any of them from typed settings (the
``rods eval`` options are derived from the same dataclass).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rods_agent.console.options import option
from rods_agent.engines.base import (
    Completion,
    Engine,
    EngineError,
    GenerationRequest,
    SamplingParams,
)
from rods_agent.engines.chat import CHATML_TOOLS_TEMPLATE, ChatTemplate
from rods_agent.engines.formats import get_tool_format, register_tool_format, tool_formats
from rods_env.errors import ConfigError, RodsError

if TYPE_CHECKING:
    from rods_env.task import Task

ENGINES: tuple[str, ...] = ("openai", "transformers", "vllm")
"""Model engines by name (``oracle``, the gold replay, is not a model)."""

ENGINE_CHOICES: tuple[str, ...] = (*ENGINES, "oracle", "random")
"""Every ``--engine``: the models, and two scripted agents (``oracle`` replays the gold
calls; ``random`` calls random tools with words of the conversation, a floor to compare
with)."""


def _json_object(text: str) -> dict[str, object]:
    """A JSON object from the command line (ValueError naming the problem otherwise)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg}): {text!r}") from None
    if not isinstance(value, dict):
        raise ValueError(f"not a JSON object: {text!r}")
    return value


@dataclass(frozen=True)
class EngineOptions:
    """Which model to reach and how (the ``model`` options of ``rods eval``).

    Attributes:
        engine: ``openai``, ``transformers``, ``vllm``, ``oracle`` or ``random``.
        model: Model name on the server, or a local model folder.
        base_url: OpenAI-compatible API root.
        api_key_env: Name of the environment variable with the API key (never its value).
        concurrency: Requests in flight at once (openai).
        timeout: Seconds per HTTP request (openai).
        retries: HTTP retries on 408/409/429/5xx, timeouts and connection errors (openai).
        logprobs: Ask the server for log-probabilities (openai).
        token_ids: Ask the server for sampled token ids, vLLM's ``return_token_ids`` (openai).
        tokenizer: The served model's folder: token-in/token-out requests (openai, vLLM).
        extra_body: JSON fields merged into every request body (openai).
        device: Device of the transformers engine.
        dtype: Torch dtype of local engines.
        seed: Seed of local engines' sampling (not sent to servers).
        max_model_len: vLLM's context length (default: 8,192; ``rods eval`` passes
            ``--max-episode-tokens``).
        thinking: The chat template's ``enable_thinking`` switch (Qwen3): ``on``, ``off`` or
            None (the template's default). Local engines and the openai engine's token mode
            render it themselves; its chat mode sends ``chat_template_kwargs`` (vLLM, SGLang).
        call_end: The text that ends a tool call in the served model's output, where a
            rollout stops generation (openai chat mode; e.g. ``</tool_call>`` for a
            Hermes-style model served without a tool parser). Token mode and local engines
            read it from the chat template.
    """

    engine: str = field(
        default="openai",
        metadata=option(
            "how to reach the model (oracle: replay the gold calls, a check of the pool; "
            "random: random tool calls, a floor)",
            choices=ENGINE_CHOICES,
        ),
    )
    model: str | None = field(
        default=None, metadata=option("model name on the server, or a local model folder")
    )
    base_url: str = field(
        default="http://127.0.0.1:8000/v1", metadata=option("OpenAI-compatible API root")
    )
    api_key_env: str = field(
        default="OPENAI_API_KEY",
        metadata=option(
            "name of the environment variable holding the API key (its value is never written)"
        ),
    )
    concurrency: int = field(
        default=16, metadata=option("episodes live at once; HTTP requests in flight")
    )
    timeout: float = field(default=120.0, metadata=option("seconds per HTTP request"))
    retries: int = field(
        default=5, metadata=option("HTTP retries on 408/409/429/5xx, timeouts, lost connections")
    )
    logprobs: bool = field(default=False, metadata=option("ask the server for log-probabilities"))
    token_ids: bool = field(
        default=False,
        metadata=option("ask the server for sampled token ids (vLLM's return_token_ids)"),
    )
    tokenizer: str | None = field(
        default=None,
        metadata=option(
            "folder of the served model's tokenizer: send token ids to /completions and keep "
            "the episode as one token sequence (vLLM; for training rollouts)"
        ),
    )
    extra_body: Mapping[str, object] | None = field(
        default=None,
        metadata=option("JSON object merged into every request body", parse=_json_object),
    )
    device: str = field(default="cpu", metadata=option("device of the transformers engine"))
    dtype: str = field(default="float32", metadata=option("torch dtype of local engines"))
    seed: int | None = field(
        default=None,
        metadata=option("seed of local engines' sampling (not sent to servers)"),
    )
    max_model_len: int | None = field(
        default=None,
        metadata=option("vLLM context length (default: --max-episode-tokens)"),
    )
    thinking: Literal["on", "off"] | None = field(
        default=None,
        metadata=option(
            "the chat template's enable_thinking switch (Qwen3; default: the template's own)"
        ),
    )

    call_end: str | None = field(
        default=None,
        metadata=option(
            "text that ends a tool call in the served model's output, where a turn stops "
            "(openai chat mode, e.g. '</tool_call>'; token mode and local engines read it "
            "from the chat template)"
        ),
    )

    @property
    def thinking_switch(self) -> bool | None:
        """``thinking`` as the template's ``enable_thinking`` value (None: leave it unset)."""
        return None if self.thinking is None else self.thinking == "on"

    def __post_init__(self) -> None:
        if self.thinking not in (None, "on", "off"):
            raise ConfigError(f"thinking must be on or off, got '{self.thinking}'")
        if self.engine not in ENGINE_CHOICES:
            raise ConfigError(
                f"unknown engine '{self.engine}'; engines: {', '.join(ENGINE_CHOICES)}"
            )
        if self.model is None and self.engine not in ("oracle", "random"):
            raise ConfigError(f"engine '{self.engine}' needs a model (--model)")
        for name in ("concurrency", "timeout"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"--{name} must be positive, got {getattr(self, name)}")
        if self.retries < 0:
            raise ConfigError(f"--retries must be at least 0, got {self.retries}")

    @property
    def model_name(self) -> str:
        """The model as results name it (``oracle`` for the gold replay, ``random`` for the
        random agent)."""
        return self.model if self.model is not None else self.engine


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_WEIGHTS = ("*.safetensors", "pytorch_model*.bin", "*.safetensors.index.json", "*.gguf")
_TOKENIZER = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


def check_model_folder(model: str, *, weights: bool = True) -> None:
    """Check that ``model`` names a complete local model folder, before loading it.

    A name of the form ``org/name`` that is not a local path is left to the loader (it
    may be in the Hugging Face cache).

    Raises:
        EngineError: in one line: the folder does not exist, is a file, is empty, or lacks
            its config, weights or tokenizer.
    """
    path = Path(model).expanduser()
    if not path.exists():
        if _HUB_ID.match(model):
            return
        raise EngineError(f"model folder '{model}' does not exist")
    if not path.is_dir():
        raise EngineError(f"'{model}' is a file; give the model's folder")
    names = sorted(p.name for p in path.iterdir())
    if not names:
        raise EngineError(f"model folder '{model}' is empty")
    missing = []
    if "config.json" not in names:
        missing.append("config.json")
    if weights and not any(next(path.glob(g), None) for g in _WEIGHTS):
        missing.append("weights (model.safetensors or pytorch_model.bin)")
    if not any(n in names for n in _TOKENIZER):
        missing.append("a tokenizer (tokenizer.json or tokenizer_config.json)")
    if missing:
        shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
        raise EngineError(
            f"model folder '{model}' is incomplete: it lacks {' and '.join(missing)} (it has: {shown})"
        )


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    text = text if len(text) <= 300 else text[:297] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def oracle_agents(tasks: Sequence[Task]) -> Any:
    """``make_agent`` of a :class:`~rods_agent.engines.scripted.ScriptedEngine` that solves
    ``tasks``: rods' :class:`~rods_env.oracle.OracleAgent` for a rods domain's task, the
    benchmark's own oracle for a benchmark domain's (in the user mode the environment
    reports in ``info["user"]``)."""
    from rods_env.benchmark import BenchmarkDomain
    from rods_env.oracle import oracle_agent
    from rods_env.registry import load_any_domain

    by_id = {t.id: t for t in tasks}
    domains = {name: load_any_domain(name) for name in {t.domain for t in tasks}}

    def make_agent(info: Mapping[str, Any]) -> Any:
        task = by_id[str(info["task_id"])]
        domain = domains[task.domain]
        if isinstance(domain, BenchmarkDomain):
            mode = "solo" if info.get("user") == "solo" else "scripted"
            return domain.oracle_agent(task, user_mode=mode)
        return oracle_agent(domain, task)

    return make_agent


def oracle_engine(tasks: Sequence[Task]) -> Engine:
    """An engine that replays each task's gold calls (a solvability check of a pool)."""
    from rods_agent.engines.scripted import ScriptedEngine

    return ScriptedEngine(oracle_agents(tasks))


def random_engine(seed: int | None = None) -> Engine:
    """An engine of :class:`rods_env.RandomToolAgent` agents: random tools with arguments
    copied from the conversation, seeded per episode (``derive_seed(seed, episode key)``),
    so a rerun gives the same episodes."""
    from rods_agent.engines.base import derive_seed
    from rods_agent.engines.scripted import ScriptedEngine
    from rods_env.oracle import RandomToolAgent

    def make_agent(info: Mapping[str, Any]) -> RandomToolAgent:
        return RandomToolAgent(seed=derive_seed(seed or 0, "random", info["episode"]))

    return ScriptedEngine(make_agent)


def build_engine(
    options: EngineOptions, tasks: Sequence[Task] = (), *, progress: bool = True
) -> Engine:
    """The engine ``options`` ask for, with one-line errors when it cannot be built.

    Args:
        options: The engine settings.
        tasks: The tasks to be run (the ``oracle`` engine replays their gold calls).
        progress: False silences transformers' loading bars.

    Raises:
        EngineError: when the model cannot be reached or loaded (a missing or incomplete
            folder, vLLM not installed), in one line.
    """
    if options.engine == "oracle":
        return oracle_engine(tasks)
    if options.engine == "random":
        return random_engine(options.seed)
    model = options.model_name
    if options.engine == "openai":
        from rods_agent.engines.openai_api import OpenAIEngine

        extra_body = dict(options.extra_body or {})
        if options.tokenizer is not None:
            check_model_folder(options.tokenizer, weights=False)
        elif options.thinking is not None:
            # chat mode: the server renders the template, and takes its switches here
            given = extra_body.get("chat_template_kwargs")
            kwargs = dict(given) if isinstance(given, Mapping) else {}
            kwargs["enable_thinking"] = options.thinking_switch
            extra_body["chat_template_kwargs"] = kwargs
        return OpenAIEngine(
            options.base_url,
            model,
            api_key_env=options.api_key_env,
            concurrency=options.concurrency,
            timeout=options.timeout,
            max_retries=options.retries,
            logprobs=options.logprobs,
            token_ids=options.token_ids,
            extra_body=extra_body,
            tokenizer=options.tokenizer,
            thinking=options.thinking_switch,
            call_end=options.call_end,
        )
    if options.engine == "vllm":
        from rods_agent.engines.vllm_engine import vllm_available

        if not vllm_available():
            raise EngineError(
                "--engine vllm needs vLLM, which is not installed in this environment; on CPU "
                "run `bash scripts/setup.sh vllm` and use .venv-vllm/bin/rods"
            )
    check_model_folder(model)
    from rods_agent.console.progress import is_terminal

    if not progress or not is_terminal(sys.stderr):
        quiet_transformers()  # off a terminal their bars would only litter a log file
    load_errors: tuple[type[BaseException], ...] = (OSError, ValueError, KeyError, RuntimeError)
    try:
        from safetensors import SafetensorError  # a corrupt weights file

        load_errors += (SafetensorError,)
    except ImportError:
        pass
    try:
        if options.engine == "transformers":
            from rods_agent.engines.hf import TransformersEngine

            # keeping each conversation's keys and values between turns gives the same
            # completions (tests/agent/test_engines.py) and prefills only each turn's news
            return TransformersEngine(
                model,
                device=options.device,
                dtype=options.dtype,
                thinking=options.thinking_switch,
                reuse_kv=True,
            )
        from rods_agent.engines.vllm_engine import VLLMEngine

        return VLLMEngine(
            model,
            dtype=options.dtype,
            max_model_len=options.max_model_len or 8192,
            seed=options.seed or 0,
            thinking=options.thinking_switch,
        )
    except RodsError as exc:
        raise EngineError(" ".join(str(exc).split())) from None
    except load_errors as exc:
        raise EngineError(f"cannot load model '{model}': {_one_line(exc)}") from None


def quiet_transformers() -> None:
    """No loading bars from transformers and huggingface_hub (for this process)."""
    import transformers

    transformers.utils.logging.disable_progress_bar()
    try:
        from huggingface_hub.utils import disable_progress_bars
    except ImportError:
        return
    disable_progress_bars()


def make_engine(kind: str, model: str, **options: Any) -> Engine:
    """Build an engine by name, passing ``options`` to its constructor as they are.

    Args:
        kind: ``"openai"``, ``"transformers"`` or ``"vllm"``.
        model: Model name on the server (openai) or model folder (local engines).
        **options: Keyword arguments of the engine's constructor.

    Raises:
        EngineError: for an unknown kind, naming the ones that exist.
    """
    if kind == "openai":
        from rods_agent.engines.openai_api import OpenAIEngine

        return OpenAIEngine(model=model, **options)
    if kind == "transformers":
        from rods_agent.engines.hf import TransformersEngine

        return TransformersEngine(model, **options)
    if kind == "vllm":
        from rods_agent.engines.vllm_engine import VLLMEngine

        return VLLMEngine(model, **options)
    raise EngineError(f"unknown engine '{kind}'; engines: {', '.join(ENGINES)}")


__all__ = [
    "CHATML_TOOLS_TEMPLATE",
    "ENGINES",
    "ENGINE_CHOICES",
    "ChatTemplate",
    "Completion",
    "Engine",
    "EngineError",
    "EngineOptions",
    "GenerationRequest",
    "SamplingParams",
    "build_engine",
    "check_model_folder",
    "get_tool_format",
    "make_engine",
    "oracle_agents",
    "oracle_engine",
    "register_tool_format",
    "tool_formats",
]
