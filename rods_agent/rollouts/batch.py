"""Batched multi-turn rollouts: many episodes at once, one generation call per step.

At each step every live episode asks for its next completion; the engine gets them all in
one batch; then each completion is applied to its own environment. A finished episode
frees its slot for the next one (continuous batching), so the batch stays full.

With a local engine (one that has a ``chat`` template) the whole conversation is kept as
one token sequence -- the prompt, then each completion exactly as sampled, then what the
chat template puts after it (the message's closing, the observation, the generation
prompt) -- with an assistant mask (1 on sampled tokens, the stop token included) and the
sampled log-probabilities aligned to it. This is what GRPO trains on: only assistant tokens
carry loss. See :mod:`rods_agent.engines.chat` for how observations are tokenized from the
template and how the sequence is checked against a re-rendering of the full conversation
(``token_check``; a ``mismatch`` is logged as a warning).

**A turn ends where the call ends.** Generation stops at the end of a completion's first
tool call, the chat family's closing marker (``</tool_call>``; :func:`call_end`), kept as
sampled; the template's closing is appended after it like any observation, so the text a
weak model writes after its call is neither decoded nor trained on
(``RolloutConfig.stop_at_call_end``).

With the default ``tool_format: auto`` a completion reaches the environment as the chat
template's family writes it (:meth:`rods_agent.engines.chat.ChatTemplate.action`): raw text,
whose ``<think>`` reasoning the environment leaves out, or, for gpt-oss's harmony format, the
reply and tool calls without the ``analysis`` channel.

A failed generation, an exception in the environment or the user simulator, and a
completion that does not parse are all recorded data: the first two end the episode with
termination ``"error"``; the last becomes an error observation, as the environment answers.
A local engine that returns fewer log-probabilities than tokens is such an engine error:
a log-probability is never made up.

**One reward for one outcome.** The rollout's own caps (``max_turns``, ``max_tokens``) end
the episode through :meth:`rods_env.env.ToolEnv.truncate`, which scores the open turn exactly
as the environment's own step limit does, so the same point of a conversation gets the same
reward whichever limit cut it; the labels say which did (``max_turns`` / ``max_tokens`` for
the rollout's caps, ``max_steps`` for the environment's).

**Reproducible.** An episode may carry a sampling seed (:class:`EpisodeSpec`); the request
of its k-th completion is seeded with ``derive_seed(sampling_seed, k)``, so with an engine
that honours request seeds the episode's completions do not depend on the rest of the
batch, and a resumed training run repeats them.

**Simulated users played by a model** (:class:`rods_agent.rollouts.user.LLMUser`) are batched across
episodes: give ``run_rollouts`` the users' :class:`rods_agent.rollouts.user.UserBatcher`, and each
round of environment steps (and resets) runs with one generation call for all the user
replies it needs.
"""

from __future__ import annotations

import copy
import functools
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

import gymnasium as gym

from rods_agent.engines.base import (
    Completion,
    Engine,
    GenerationRequest,
    SamplingParams,
    derive_seed,
)
from rods_agent.engines.formats import get_tool_format
from rods_env.env import PROMPTS
from rods_env.episode import EpisodeEnv, Truncatable
from rods_env.errors import ConfigError
from rods_env.task import Task

if TYPE_CHECKING:
    from rods_agent.rollouts.user import UserBatcher

log = logging.getLogger(__name__)

Termination = Literal[
    "user_stop",
    "terminal_tool",
    "max_steps",
    "max_turns",
    "max_tokens",
    "error",
    "agent_stop",
    "too_many_errors",
    "agent_error",
]
TERMINATIONS: tuple[str, ...] = get_args(Termination)
"""How an episode ended: the user is done; a terminal tool ran; the environment's step limit
(``max_steps``); the rollout's turn cap (``max_turns``) or token cap (``max_tokens``); an
engine or environment error. The three caps score the same point of a conversation alike.
Benchmark environments add their own ends: the agent stopped by itself (``agent_stop``,
τ²-bench's solo mode), too many tool errors (``too_many_errors``), a message the benchmark
refuses (``agent_error``). A benchmark's simulated user who fails (``user_error``: its
model raised, or gave nothing) ends the episode as an ``error``, with the reason in
``errors``: it is not the policy's doing."""
_ENV_TERMINATION = {
    "user_stop": "user_stop",
    "terminal_tool": "terminal_tool",
    "max_steps": "max_steps",
    "agent_stop": "agent_stop",
    "too_many_errors": "too_many_errors",
    "agent_error": "agent_error",
    "user_error": "error",  # the simulated user failed: not the policy's doing
}


@dataclass(frozen=True)
class RolloutConfig:
    """Limits and sampling of a rollout.

    Attributes:
        sampling: Sampling parameters of every completion (``max_tokens`` caps one turn).
        max_turns: Most agent steps (completions) per episode.
        max_tokens: Most tokens in the whole conversation, prompt included. Exact for
            local engines (no completion may run past it); for remote engines it is
            checked against the server's token counts after each completion.
        batch_size: Most episodes live at once (one generation batch).
        tool_format: Name of the tool-call format (:mod:`rods_agent.engines.formats`).
        check_tokens: At the end of each episode, compare the kept token sequence with a
            re-rendering of the conversation (recorded in ``token_check``).
        prompt: What an own-domain environment shows (``ToolEnv(prompt=...)``): ``full``
            (the domain's policy and every tool) or ``brief`` (a short policy and the task's
            own tools).
        stop_at_call_end: End a completion where its first tool call ends (the chat
            family's closing marker, ``</tool_call>``; see :func:`call_end`), so that text
            a weak model writes after its call is neither decoded nor trained on: one call
            per assistant message, the environment runs it and the model calls again.
    """

    sampling: SamplingParams = field(default_factory=SamplingParams)
    max_turns: int = 30
    max_tokens: int = 8192
    batch_size: int = 32
    tool_format: str = "auto"
    check_tokens: bool = True
    prompt: str = "full"
    stop_at_call_end: bool = True

    def __post_init__(self) -> None:
        for name in ("max_turns", "max_tokens", "batch_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        get_tool_format(self.tool_format)
        if self.prompt not in PROMPTS:
            raise ConfigError(f"prompt must be one of {', '.join(PROMPTS)}, got {self.prompt!r}")


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode to run.

    Attributes:
        task: The task.
        trial: The trial number (several per task for pass^k and GRPO groups).
        seed: The environment's reset seed.
        sampling_seed: Seed of the episode's completions (and of its simulated user's, when
            a model plays it); None leaves sampling to the engine's own stream.
    """

    task: Task
    trial: int = 0
    seed: int | None = None
    sampling_seed: int | None = None

    @property
    def key(self) -> str:
        """A stable id of the episode: ``task_id#trial``."""
        return f"{self.task.id}#{self.trial}"


@dataclass
class EpisodeRecord:
    """Everything one episode produced.

    Attributes:
        task_id: The task.
        trial: Trial number (several per task for pass^k and GRPO groups).
        messages: The environment's OpenAI-format transcript.
        token_ids: The whole conversation as one token sequence (local engines; empty for
            remote ones).
        assistant_mask: 1 on tokens the model sampled, 0 on prompt/observation tokens.
        logprobs: Sampled log-probability per token, 0 where the mask is 0.
        rewards: Reward of each environment step (progress increases; they sum to the
            final progress unless the episode ended early by error).
        progress: Share of user turns passed, in [0, 1].
        success: The strict success flag (only set when the environment finished).
        termination: ``user_stop``, ``max_turns``, ``max_tokens``, ``terminal_tool`` or ``error``.
        gen_seconds: Wall time of the generation batches this episode waited for.
        env_seconds: Time in this episode's environment (tools, rewards, user simulator).
        n_steps: Completions applied to the environment.
        completion_tokens: Tokens generated in the episode.
        turn_results: The environment's per-turn results.
        token_check: ``exact``, ``text`` or ``mismatch`` against a re-rendering (see
            :meth:`rods_agent.engines.chat.ChatTemplate.check`); ``skipped`` without one.
        errors: Engine or environment errors met (the episode's last one ended it).
        sampling_seed: The episode's sampling seed (:class:`EpisodeSpec`).
        finish_reasons: Each completion's finish reason (``stop`` or ``length``), in order.
        step_spans: ``[start, end)`` of each completion's sampled tokens in ``token_ids``
            (local engines), so a step's reward can be linked to its tokens.
        weights_version: The generator's weights version when the episode started (the
            training policy counts its updates; 0 for a fixed model).
        benchmark_record: A benchmark environment's own record of the episode (its final
            ``info["benchmark_record"]``: τ²-bench's simulation), None elsewhere.
        verdicts: A benchmark environment's verdicts side by side (its final
            ``info["verdicts"]``: ``{"official": {...}, "strict": {...}, "differences":
            [...]}``, see :attr:`rods_env.benchmark.BenchmarkDomain.verdicts`), None
            elsewhere.
    """

    task_id: str
    trial: int = 0
    messages: list[dict[str, Any]] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    assistant_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    progress: float = 0.0
    success: bool = False
    termination: str = "error"
    gen_seconds: float = 0.0
    env_seconds: float = 0.0
    n_steps: int = 0
    completion_tokens: int = 0
    turn_results: list[dict[str, Any]] = field(default_factory=list)
    token_check: str = "skipped"
    errors: list[str] = field(default_factory=list)
    sampling_seed: int | None = None
    finish_reasons: list[str] = field(default_factory=list)
    step_spans: list[list[int]] = field(default_factory=list)
    weights_version: int = 0
    benchmark_record: dict[str, Any] | None = None
    verdicts: dict[str, Any] | None = None

    def to_dict(self, *, tokens: bool = True) -> dict[str, Any]:
        """A JSON-able dict (without the token arrays when ``tokens`` is False)."""
        data = asdict(self)
        if not tokens:
            for name in ("token_ids", "assistant_mask", "logprobs", "step_spans"):
                data.pop(name)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EpisodeRecord:
        """Inverse of :meth:`to_dict`."""
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def comparable(self) -> dict[str, Any]:
        """The record without its timings (equal for equal behaviour)."""
        data = self.to_dict()
        data.pop("gen_seconds")
        data.pop("env_seconds")
        return data


@dataclass
class RolloutStats:
    """Where a rollout's wall time went, summed over all episodes and batches.

    Attributes:
        wall_seconds: Total wall time.
        gen_seconds: Time inside ``engine.generate``.
        env_seconds: Time inside ``env.reset``/``env.step`` (tools, rewards, user simulator).
        user_seconds: Time the simulated users' model took to generate (batched; not in
            ``env_seconds``).
        episodes: Episodes finished.
        completion_tokens: Tokens generated.
        batches: Generation calls.
    """

    wall_seconds: float = 0.0
    gen_seconds: float = 0.0
    env_seconds: float = 0.0
    user_seconds: float = 0.0
    episodes: int = 0
    completion_tokens: int = 0
    batches: int = 0

    @property
    def env_share(self) -> float:
        """Share of wall time spent in the environment and the user simulator."""
        return self.env_seconds / self.wall_seconds if self.wall_seconds else 0.0


class DomainRouter:
    """An environment slot for tasks of any domain: ``route(task)`` gives the environment of
    the task's domain (one per domain, built on first use and reused).

    The rollout calls ``route`` before each reset, so a batch can mix domains, rods' own
    and benchmark domains (their environments come from the registry).

    Args:
        max_steps: The environments' step limit.
        make_user: Builds the user simulator of a new environment (None: the environment's
            default user).
        solo: Run without a user (a benchmark domain's solo mode, e.g. τ²-bench's telecom).
        prompt: What rods domains' environments show (:data:`rods_env.env.PROMPTS`); a
            benchmark's environment shows the benchmark's own prompt, so anything but
            ``full`` is refused for it.
        **env_kwargs: More environment arguments.
    """

    def __init__(
        self,
        *,
        max_steps: int = 40,
        make_user: Callable[[], Any] | None = None,
        solo: bool = False,
        prompt: str = "full",
        **env_kwargs: Any,
    ) -> None:
        self.max_steps = max_steps
        self.make_user = make_user
        self.solo = solo
        self.prompt = prompt
        self.env_kwargs = env_kwargs
        self._envs: dict[str, Any] = {}

    def route(self, task: Task) -> Any:
        """The environment of ``task``'s domain."""
        env = self._envs.get(task.domain)
        if env is None:
            from rods_env.benchmark import BenchmarkDomain
            from rods_env.env import make_env
            from rods_env.registry import load_any_domain

            kwargs = dict(self.env_kwargs)
            kwargs.update(env_prompt_kwargs(task.domain, self.prompt))
            if self.solo:
                family = load_any_domain(task.domain)
                if not (isinstance(family, BenchmarkDomain) and "solo" in family.user_modes):
                    raise ConfigError(f"{task.domain} has no solo mode: its tasks need a user")
                kwargs["solo"] = True
            else:
                kwargs["user"] = self.make_user() if self.make_user is not None else None
            env = make_env(task.domain, max_steps=self.max_steps, **kwargs)
            self._envs[task.domain] = env
        return env


def env_prompt_kwargs(domain: str, prompt: str) -> dict[str, Any]:
    """The environment arguments that make ``domain``'s environment show ``prompt``.

    Raises:
        ConfigError: ``prompt`` is not ``full`` and ``domain`` is a benchmark (whose
            prompt is the benchmark's own).
    """
    if prompt == "full":
        return {}
    from rods_env.benchmark import BenchmarkDomain
    from rods_env.registry import load_any_domain

    if isinstance(load_any_domain(domain), BenchmarkDomain):
        raise ConfigError(
            f"{domain} shows the benchmark's own prompt; prompt={prompt!r} is for rods domains"
        )
    return {"prompt": prompt}


def call_end(engine: Engine) -> str | None:
    """The text that ends one tool call in ``engine``'s output: its chat template's
    :attr:`~rods_agent.engines.chat.ChatTemplate.call_end`, else the engine's own
    ``call_end`` (a remote engine in chat mode), else None (no such marker)."""
    chat = getattr(engine, "chat", None)
    if chat is not None:
        return getattr(chat, "call_end", None)
    end = getattr(engine, "call_end", None)
    inner = getattr(engine, "engine", None)  # a wrapper (the evaluation's metered engine)
    return end if end is not None or inner is None else call_end(inner)


def _unwrapped(env: Any) -> Any:
    """The environment under Gymnasium's wrappers (``gymnasium.make`` adds some)."""
    return env.unwrapped if isinstance(env, gym.Env) else env


_Outcome = tuple[Any, BaseException | None, float]
"""What an environment call gave: its result, the exception it raised, its own seconds."""


def _timed(fn: Callable[[], Any]) -> Callable[[], _Outcome]:
    """``fn`` run with its exception and wall time captured (the sequential runner)."""

    def call() -> _Outcome:
        t0 = time.perf_counter()
        try:
            return fn(), None, time.perf_counter() - t0
        except Exception as exc:
            return None, exc, time.perf_counter() - t0

    return call


class _Episode:
    """A live episode: its environment, its token sequence and its record so far.

    Each step has three parts so that the environment calls of many episodes can run as
    one round (batching the simulated users' model calls): :meth:`prepare` accounts the
    completion and returns the action, the runner calls :meth:`env_step`, and
    :meth:`after_step` adds the observation or ends the episode.
    """

    def __init__(
        self, index: int, spec: EpisodeSpec, env: Any, engine: Engine, config: RolloutConfig
    ):
        self.index, self.spec, self.env, self.config = index, spec, env, config
        self.slot = env  # what make_env built (a router stays a router)
        self.chat = getattr(engine, "chat", None)
        self.format = get_tool_format(config.tool_format)
        self.record = EpisodeRecord(
            task_id=spec.task.id,
            trial=spec.trial,
            sampling_seed=spec.sampling_seed,
            weights_version=int(getattr(engine, "weights_version", 0) or 0),
        )
        self.done = False
        self.info: dict[str, Any] = {}
        self.render: list[dict[str, Any]] = []  # messages as the model saw them
        self.tools: list[dict[str, Any]] | None = None
        self.ends_with_prompt = True
        self.conv_tokens = 0  # conversation length in tokens (estimate for remote engines)
        self._n_env_messages = 0
        self._sampled: list[int] = []  # the last completion's ids, until its closing is added
        if config.tool_format == "auto" and self.chat is not None:
            self.format = self.chat.action

    # -- start -----------------------------------------------------------------------------
    def env_reset(self) -> tuple[str, dict[str, Any]]:
        """The environment call of :meth:`start` (seeds a model-played user first)."""
        if isinstance(self.env, DomainRouter):  # the environment of the task's domain
            self.env = self.env.route(self.spec.task)
        inner = _unwrapped(self.env)
        if isinstance(inner, EpisodeEnv):  # a model-played user draws from this seed
            inner.seed_user(self.spec.sampling_seed)
        return self.env.reset(seed=self.spec.seed, options={"task": self.spec.task})

    def start(self, outcome: _Outcome) -> None:
        """Begin the episode from the outcome of :meth:`env_reset`."""
        result, exc, seconds = outcome
        self.record.env_seconds += seconds
        if exc is not None:
            self._fail(f"env.reset failed: {type(exc).__name__}: {exc}", truncate=False)
            return
        _, info = result
        self.info = info
        if info.get("termination"):  # the conversation ended at once (a user who stops)
            self.record.rewards.append(float(info.get("progress", 0.0)))
            self._finish(_ENV_TERMINATION.get(str(info["termination"]), "max_steps"))
            return
        messages = info["messages"]
        self._n_env_messages = len(messages)
        self.render = [dict(m) for m in messages]
        self.tools = list(info.get("tools") or []) or None
        if self.chat is not None:
            try:
                ids = self.chat.prompt_ids(self.render, self.tools)
            except Exception as exc:
                self._fail(f"chat template failed: {type(exc).__name__}: {exc}")
                return
            self._append(ids, mask=0)
        if self.budget() < 1:
            self._cap("max_tokens")

    def budget(self) -> int:
        """Tokens the next completion may use: what is left of the conversation budget,
        less the tokens that will close the assistant message."""
        reserve = self.chat.suffix_tokens if self.chat is not None else 0
        return self.config.max_tokens - self.conv_tokens - reserve

    def request(self) -> GenerationRequest:
        r = self.record
        seed = self.spec.sampling_seed
        return GenerationRequest(
            messages=self.info["messages"],
            tools=self.info.get("tools") or None,
            prompt_token_ids=r.token_ids if self.chat is not None else None,
            max_tokens=min(self.config.sampling.max_tokens, self.budget()),
            key=self.spec.key,
            info=self.info,
            seed=None if seed is None else derive_seed(seed, r.n_steps),
        )

    # -- one step --------------------------------------------------------------------------
    def prepare(self, completion: Completion) -> Any:
        """Account a completion's tokens; the action for the environment, or None when the
        completion failed (the episode is then over)."""
        r = self.record
        if completion.error is not None or completion.finish_reason == "error":
            self._fail(completion.error or "the engine returned an error")
            return None
        if self.chat is not None:
            if len(completion.logprobs) != len(completion.token_ids):
                self._fail(
                    f"the engine returned {len(completion.logprobs)} log-probabilities for "
                    f"{len(completion.token_ids)} sampled tokens"
                )
                return None
            start = len(r.token_ids)
            self._append(completion.token_ids, mask=1, logprobs=completion.logprobs)
            r.step_spans.append([start, len(r.token_ids)])
            self._sampled = list(completion.token_ids)
            self.render.append(self.chat.message(completion.text))
        else:
            prompt = (
                completion.prompt_tokens
                if completion.prompt_tokens is not None
                else self.conv_tokens
            )
            self.conv_tokens = int(prompt) + completion.n_tokens
            self.render.append(completion.message())
        r.completion_tokens += completion.n_tokens
        r.finish_reasons.append(completion.finish_reason)
        self.ends_with_prompt = False
        return self.format(completion)

    def env_step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """The environment call of a step."""
        return self.env.step(action)

    def after_step(self, outcome: _Outcome) -> None:
        """Record the step's reward; add the observation, or end the episode."""
        r = self.record
        result, exc, seconds = outcome
        r.env_seconds += seconds
        r.n_steps += 1
        if exc is not None:
            self._fail(f"env.step failed: {type(exc).__name__}: {exc}", truncate=False)
            return
        _, reward, terminated, truncated, info = result
        r.rewards.append(float(reward))
        self.info = info
        messages = info["messages"]
        new = _after_assistant(messages, self._n_env_messages)
        self._n_env_messages = len(messages)

        if terminated or truncated:
            self._finish(_ENV_TERMINATION.get(str(info.get("termination")), "max_steps"))
            return
        if r.n_steps >= self.config.max_turns:
            self._cap("max_turns")
            return
        if self.chat is not None:
            try:
                obs_ids = self.chat.continuation_ids(
                    self._sampled, self.render[-1], new, self.tools, history=self.render[:-1]
                )
            except Exception as exc:
                self._fail(f"chat template failed on the observation: {type(exc).__name__}: {exc}")
                return
            if len(obs_ids) + 1 > self.budget():
                self._cap("max_tokens")
                return
            self._append(obs_ids, mask=0)
            self._sampled = []
            self.render.extend(dict(m) for m in new)
            self.ends_with_prompt = True
        elif self.budget() < 1:
            self._cap("max_tokens")

    def _append(
        self, ids: Sequence[int], *, mask: int, logprobs: Sequence[float] | None = None
    ) -> None:
        r = self.record
        r.token_ids.extend(int(i) for i in ids)
        r.assistant_mask.extend([mask] * len(ids))
        if logprobs is not None:
            r.logprobs.extend(float(x) for x in logprobs)
        else:  # prompt and observation tokens: not sampled, no loss (mask 0)
            r.logprobs.extend([0.0] * len(ids))
        self.conv_tokens = len(r.token_ids)

    # -- end -------------------------------------------------------------------------------
    def _cap(self, label: str) -> None:
        """End the episode by one of the rollout's own caps, scored as the env's step limit."""
        self._truncate_env(label)
        self._finish(label)

    def _truncate_env(self, label: str) -> None:
        """Let the environment score the open turn (``ToolEnv.truncate``); the increase of
        progress is this last step's reward, as when the env's own limit cuts."""
        inner = _unwrapped(self.env)
        if not isinstance(inner, Truncatable) or not self.info:
            return
        before = float(self.info.get("progress", 0.0))
        t0 = time.perf_counter()
        try:
            info = inner.truncate(label)
        except Exception as exc:
            self.record.errors.append(f"env.truncate failed: {type(exc).__name__}: {exc}")
            return
        finally:
            self.record.env_seconds += time.perf_counter() - t0
        self.info = info
        gain = float(info.get("progress", 0.0)) - before
        if gain:
            if self.record.rewards:
                self.record.rewards[-1] += gain
            else:
                self.record.rewards.append(gain)

    def _fail(self, error: str, *, truncate: bool = True) -> None:
        log.debug("episode %s: %s", self.spec.key, error)
        self.record.errors.append(error)
        if truncate:  # the environment is sound: score the conversation where it stopped
            self._truncate_env("error")
        self._finish("error")

    def _close(self) -> None:
        """Add the closing of the last assistant message when the episode ends after it."""
        if self.chat is None or self.ends_with_prompt or not self.record.step_spans:
            return
        try:
            ids = self.chat.continuation_ids(self._sampled, self.render[-1])
        except Exception as exc:
            self.record.errors.append(f"chat template failed on the closing: {exc}")
            return
        self._append(ids, mask=0)
        self._sampled = []

    def _finish(self, termination: str) -> None:
        r = self.record
        info = self.info
        self._close()
        r.termination = termination
        if info.get("user_error"):
            r.errors.append(f"the user failed: {info['user_error']}")
        r.messages = [dict(m) for m in info.get("messages", [])]
        r.progress = float(info.get("progress", 0.0))
        r.success = bool(info.get("success", False))
        r.turn_results = list(info.get("turn_results", []))
        record = info.get("benchmark_record")
        r.benchmark_record = dict(record) if isinstance(record, Mapping) else None
        verdicts = info.get("verdicts")
        r.verdicts = copy.deepcopy(dict(verdicts)) if isinstance(verdicts, Mapping) else None
        if self.config.check_tokens and self.chat is not None and r.token_ids:
            try:
                r.token_check = self.chat.check(
                    r.token_ids,
                    self.render,
                    self.tools,
                    spans=r.step_spans,
                    add_generation_prompt=self.ends_with_prompt,
                )
            except Exception as exc:
                r.token_check = "mismatch"
                r.errors.append(f"token check failed: {exc}")
            if r.token_check == "mismatch":
                _warn_mismatch(r.task_id)
        self.done = True


_WARNED: set[str] = set()


def _warn_mismatch(task_id: str) -> None:
    """Say once per process that a kept sequence differs from the chat template's rendering
    beyond the assistant turns (a bug in the token accounting for this template)."""
    if "mismatch" in _WARNED:
        return
    _WARNED.add("mismatch")
    log.warning(
        "episode of %s: its token sequence differs from the chat template's rendering of the "
        "conversation outside the sampled completions (token_check 'mismatch'); training "
        "scores what the generator saw, but the prompts differ from the template's",
        task_id,
    )


def _after_assistant(
    messages: Sequence[Mapping[str, Any]], n_before: int
) -> list[Mapping[str, Any]]:
    """The messages the environment added after the assistant message of this step."""
    i = n_before
    if i < len(messages) and messages[i].get("role") == "assistant":
        return list(messages[i + 1 :])
    for j in range(len(messages) - 1, n_before - 1, -1):  # defensive: find it
        if messages[j].get("role") == "assistant":
            return list(messages[j + 1 :])
    return list(messages[n_before:])


def run_rollouts(
    engine: Engine,
    make_env: Callable[[], Any],
    specs: Iterable[EpisodeSpec],
    config: RolloutConfig | None = None,
    *,
    on_record: Callable[[EpisodeRecord], None] | None = None,
    stats: RolloutStats | None = None,
    users: UserBatcher | None = None,
) -> list[EpisodeRecord]:
    """Run episodes with continuous batching.

    Args:
        engine: Any engine (model, remote server, or scripted policy).
        make_env: Builds a fresh environment; at most ``config.batch_size`` are built and
            each is reused for later episodes (``reset`` gives a clean state).
        specs: The episodes to run (consumed lazily).
        config: Limits and sampling.
        on_record: Called with each record as soon as its episode finishes.
        stats: Filled with where the time went.
        users: The batcher shared by the environments' model-played users
            (:class:`rods_agent.rollouts.user.LLMUser` built with it); each round of environment
            resets and steps then makes one generation call for all their replies.

    Returns:
        The records in the order of ``specs``.
    """
    config = config or RolloutConfig()
    stats = stats if stats is not None else RolloutStats()
    sampling = config.sampling
    end = call_end(engine) if config.stop_at_call_end else None
    if end is not None:
        sampling = sampling.with_stop(end)
    t_start = time.perf_counter()
    user_seconds_before = users.gen_seconds if users is not None else 0.0
    pending = iter(enumerate(specs))
    free_envs: list[Any] = []
    live: list[_Episode] = []
    records: dict[int, EpisodeRecord] = {}
    end_episode = getattr(engine, "end_episode", None)

    def run_round(calls: Sequence[Callable[[], Any]]) -> list[_Outcome]:
        if users is not None:
            return users.run(calls)
        return [_timed(call)() for call in calls]

    def done(ep: _Episode) -> None:
        records[ep.index] = ep.record
        free_envs.append(ep.slot)
        stats.episodes += 1
        stats.completion_tokens += ep.record.completion_tokens
        stats.env_seconds += ep.record.env_seconds
        if callable(end_episode):
            end_episode(ep.spec.key)
        if on_record is not None:
            on_record(ep.record)

    exhausted = False
    while True:
        starting: list[_Episode] = []
        while not exhausted and len(live) + len(starting) < config.batch_size:
            nxt = next(pending, None)
            if nxt is None:
                exhausted = True
                break
            index, spec = nxt
            env = free_envs.pop() if free_envs else make_env()
            starting.append(_Episode(index, spec, env, engine, config))
        for ep, outcome in zip(starting, run_round([ep.env_reset for ep in starting]), strict=True):
            ep.start(outcome)
            if ep.done:
                done(ep)
            else:
                live.append(ep)
        if not live:
            if exhausted:
                break
            continue
        requests = [ep.request() for ep in live]
        t0 = time.perf_counter()
        try:
            completions = engine.generate(requests, sampling)
        except Exception as exc:  # engines should not raise; if one does, it is still data
            completions = [Completion.failed(f"engine raised {type(exc).__name__}: {exc}")] * len(
                live
            )
        dt = time.perf_counter() - t0
        stats.gen_seconds += dt
        stats.batches += 1
        if len(completions) != len(live):
            completions = [
                Completion.failed("engine returned a wrong number of completions")
            ] * len(live)
        stepping: list[tuple[_Episode, Any]] = []
        for ep, completion in zip(live, completions, strict=True):
            ep.record.gen_seconds += dt
            action = ep.prepare(completion)
            if not ep.done:
                stepping.append((ep, action))
        calls = [functools.partial(ep.env_step, action) for ep, action in stepping]
        for (ep, _), outcome in zip(stepping, run_round(calls), strict=True):
            ep.after_step(outcome)
        still = []
        for ep in live:
            if ep.done:
                done(ep)
            else:
                still.append(ep)
        live = still
    stats.wall_seconds += time.perf_counter() - t_start
    if users is not None:
        stats.user_seconds += users.gen_seconds - user_seconds_before
    return [records[i] for i in sorted(records)]
