"""Batched multi-turn rollouts: many episodes at once, one generation call per step.

At each step every live episode asks for its next completion; the engine gets them all in
one batch; then each completion is applied to its own environment. A finished episode
frees its slot for the next one (continuous batching), so the batch stays full.

With a local engine (one that has a ``chat`` template) the whole conversation is kept as
one token sequence -- the prompt, then each completion exactly as sampled, then each
observation rendered through the chat template -- with an assistant mask (1 on sampled
tokens, the end-of-turn token included) and the sampled log-probabilities aligned to it.
This is what GRPO trains on: only assistant tokens carry loss. See
:mod:`rods_agent.engines.chat` for how observations are tokenized and how the sequence is
checked against a re-rendering of the full conversation.

A failed generation, an exception in the environment or the user simulator, and a
completion that does not parse are all recorded data: the first two end the episode with
termination ``"error"``; the last becomes an error observation, as the environment answers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from rods_agent.engines.base import Completion, Engine, GenerationRequest, SamplingParams
from rods_agent.engines.formats import get_tool_format
from rods_env.errors import ConfigError
from rods_env.task import Task

log = logging.getLogger(__name__)

Termination = Literal["user_stop", "max_turns", "max_tokens", "terminal_tool", "error"]
TERMINATIONS: tuple[str, ...] = ("user_stop", "max_turns", "max_tokens", "terminal_tool", "error")
_ENV_TERMINATION = {
    "user_stop": "user_stop",
    "terminal_tool": "terminal_tool",
    "max_steps": "max_turns",
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
    """

    sampling: SamplingParams = field(default_factory=SamplingParams)
    max_turns: int = 30
    max_tokens: int = 8192
    batch_size: int = 32
    tool_format: str = "auto"
    check_tokens: bool = True

    def __post_init__(self) -> None:
        for name in ("max_turns", "max_tokens", "batch_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        get_tool_format(self.tool_format)


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode to run: a task, the trial number, and the environment's reset seed."""

    task: Task
    trial: int = 0
    seed: int | None = None

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

    def to_dict(self, *, tokens: bool = True) -> dict[str, Any]:
        """A JSON-able dict (without the token arrays when ``tokens`` is False)."""
        data = asdict(self)
        if not tokens:
            for name in ("token_ids", "assistant_mask", "logprobs"):
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
        episodes: Episodes finished.
        completion_tokens: Tokens generated.
        batches: Generation calls.
    """

    wall_seconds: float = 0.0
    gen_seconds: float = 0.0
    env_seconds: float = 0.0
    episodes: int = 0
    completion_tokens: int = 0
    batches: int = 0

    @property
    def env_share(self) -> float:
        """Share of wall time spent in the environment and the user simulator."""
        return self.env_seconds / self.wall_seconds if self.wall_seconds else 0.0


class _Episode:
    """A live episode: its environment, its token sequence and its record so far."""

    def __init__(
        self, index: int, spec: EpisodeSpec, env: Any, engine: Engine, config: RolloutConfig
    ):
        self.index, self.spec, self.env, self.config = index, spec, env, config
        self.chat = getattr(engine, "chat", None)
        self.format = get_tool_format(config.tool_format)
        self.record = EpisodeRecord(task_id=spec.task.id, trial=spec.trial)
        self.done = False
        self.info: dict[str, Any] = {}
        self.render: list[dict[str, Any]] = []  # messages as the model saw them
        self.tools: list[dict[str, Any]] | None = None
        self.ends_with_prompt = True
        self.conv_tokens = 0  # conversation length in tokens (estimate for remote engines)
        self._n_env_messages = 0

    # -- start -----------------------------------------------------------------------------
    def start(self) -> None:
        t0 = time.perf_counter()
        try:
            _, info = self.env.reset(seed=self.spec.seed, options={"task": self.spec.task})
        except Exception as exc:
            self.record.env_seconds += time.perf_counter() - t0
            self._fail(f"env.reset failed: {type(exc).__name__}: {exc}")
            return
        self.record.env_seconds += time.perf_counter() - t0
        self.info = info
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
            self._finish("max_tokens")

    def budget(self) -> int:
        """Tokens the next completion may use: what is left of the conversation budget,
        less the tokens that will close the assistant message."""
        reserve = self.chat.suffix_tokens if self.chat is not None else 0
        return self.config.max_tokens - self.conv_tokens - reserve

    def request(self) -> GenerationRequest:
        r = self.record
        return GenerationRequest(
            messages=self.info["messages"],
            tools=self.info.get("tools") or None,
            prompt_token_ids=r.token_ids if self.chat is not None else None,
            max_tokens=min(self.config.sampling.max_tokens, self.budget()),
            key=self.spec.key,
            info=self.info,
        )

    # -- one step --------------------------------------------------------------------------
    def apply(self, completion: Completion) -> None:
        """Apply a completion: account its tokens, step the environment, add the observation."""
        r = self.record
        if completion.error is not None or completion.finish_reason == "error":
            self._fail(completion.error or "the engine returned an error")
            return
        r.completion_tokens += completion.n_tokens
        if self.chat is not None:
            lps = list(completion.logprobs)
            if len(lps) != len(completion.token_ids):
                lps = (lps + [0.0] * len(completion.token_ids))[: len(completion.token_ids)]
            self._append(completion.token_ids, mask=1, logprobs=lps)
            self._append(self.chat.close_ids(completion.token_ids), mask=0)
        else:
            prompt = (
                completion.prompt_tokens
                if completion.prompt_tokens is not None
                else self.conv_tokens
            )
            self.conv_tokens = int(prompt) + completion.n_tokens
        self.render.append({"role": "assistant", "content": completion.text})
        self.ends_with_prompt = False

        action = self.format(completion)
        t0 = time.perf_counter()
        try:
            _, reward, terminated, truncated, info = self.env.step(action)
        except Exception as exc:
            r.env_seconds += time.perf_counter() - t0
            r.n_steps += 1
            self._fail(f"env.step failed: {type(exc).__name__}: {exc}")
            return
        r.env_seconds += time.perf_counter() - t0
        r.n_steps += 1
        r.rewards.append(float(reward))
        self.info = info
        messages = info["messages"]
        new = _after_assistant(messages, self._n_env_messages)
        self._n_env_messages = len(messages)

        if terminated or truncated:
            self._finish(_ENV_TERMINATION.get(str(info.get("termination")), "max_turns"))
            return
        if r.n_steps >= self.config.max_turns:
            self._finish("max_turns")
            return
        if self.chat is not None:
            try:
                obs_ids = self.chat.observation_ids(new, self.tools, history=self.render)
            except Exception as exc:
                self._fail(f"chat template failed on the observation: {type(exc).__name__}: {exc}")
                return
            if len(obs_ids) + 1 > self.budget():
                self._finish("max_tokens")
                return
            self._append(obs_ids, mask=0)
            self.render.extend(dict(m) for m in new)
            self.ends_with_prompt = True
        elif self.budget() < 1:
            self._finish("max_tokens")

    def _append(
        self, ids: Sequence[int], *, mask: int, logprobs: Sequence[float] | None = None
    ) -> None:
        r = self.record
        r.token_ids.extend(int(i) for i in ids)
        r.assistant_mask.extend([mask] * len(ids))
        r.logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))
        self.conv_tokens = len(r.token_ids)

    # -- end -------------------------------------------------------------------------------
    def _fail(self, error: str) -> None:
        log.debug("episode %s: %s", self.spec.key, error)
        self.record.errors.append(error)
        self._finish("error")

    def _finish(self, termination: str) -> None:
        r = self.record
        info = self.info
        r.termination = termination
        r.messages = [dict(m) for m in info.get("messages", [])]
        r.progress = float(info.get("progress", 0.0))
        r.success = bool(info.get("success", False))
        r.turn_results = list(info.get("turn_results", []))
        if self.config.check_tokens and self.chat is not None and r.token_ids:
            try:
                r.token_check = self.chat.check(
                    r.token_ids,
                    self.render,
                    self.tools,
                    add_generation_prompt=self.ends_with_prompt,
                )
            except Exception as exc:
                r.token_check = "mismatch"
                r.errors.append(f"token check failed: {exc}")
        self.done = True


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

    Returns:
        The records in the order of ``specs``.
    """
    config = config or RolloutConfig()
    stats = stats if stats is not None else RolloutStats()
    t_start = time.perf_counter()
    pending = iter(enumerate(specs))
    free_envs: list[Any] = []
    live: list[_Episode] = []
    records: dict[int, EpisodeRecord] = {}
    end_episode = getattr(engine, "end_episode", None)

    def done(ep: _Episode) -> None:
        records[ep.index] = ep.record
        free_envs.append(ep.env)
        stats.episodes += 1
        stats.completion_tokens += ep.record.completion_tokens
        stats.env_seconds += ep.record.env_seconds
        if callable(end_episode):
            end_episode(ep.spec.key)
        if on_record is not None:
            on_record(ep.record)

    exhausted = False
    while True:
        while not exhausted and len(live) < config.batch_size:
            nxt = next(pending, None)
            if nxt is None:
                exhausted = True
                break
            index, spec = nxt
            ep = _Episode(index, spec, free_envs.pop() if free_envs else make_env(), engine, config)
            ep.start()
            if ep.done:
                done(ep)
            else:
                live.append(ep)
        if not live:
            break
        requests = [ep.request() for ep in live]
        t0 = time.perf_counter()
        try:
            completions = engine.generate(requests, config.sampling)
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
        still = []
        for ep, completion in zip(live, completions, strict=True):
            ep.record.gen_seconds += dt
            ep.apply(completion)
            if ep.done:
                done(ep)
            else:
                still.append(ep)
        live = still
    stats.wall_seconds += time.perf_counter() - t_start
    return [records[i] for i in sorted(records)]
