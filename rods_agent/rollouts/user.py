"""LLMUser: the simulated user of rods_env, played by a language model through any engine.

It satisfies :class:`rods_env.user.UserSimulator`, so it plugs into the environment
(``gymnasium.make("rods/Retail-v0", user=LLMUser(engine))``); the deterministic
:class:`rods_env.ScriptedUser` stays the default. The model writes what the user says, from
a persona, the user's facts and the current turn's request; when a turn ends is decided as
by the scripted user, from the environment's view of the turn (goal reached, or patience
used up), so rewards never depend on how the model phrases things.

It also satisfies :class:`rods_env.user.ScenarioUser`, the protocol of benchmarks whose
users follow written instructions (``gymnasium.make("rods/Tau2-Airline-v0",
user=LLMUser(engine))``: τ²-bench's user guidelines and the task's scenario). There the
environment keeps the conversation and its rules (the stop tokens end it), and the model
writes every user message, tool calls included (τ²-bench's telecom user works a phone).

**Batching across episodes.** The environment asks its user for a reply inside
``env.step``, one episode at a time, and the :class:`~rods_env.user.UserSimulator` protocol
is synchronous. A :class:`UserBatcher` shared by the users of many environments batches
their model calls anyway: the rollout runs one round of ``env.step`` calls through
:meth:`UserBatcher.run`, each call on its own thread, and the threads take turns (only one
runs at a time, in a fixed order, so nothing in the environments runs concurrently and the
result is deterministic). A user that needs the model parks its request and yields; when
every call of the round has either finished or parked, the batcher answers all parked
requests with one ``engine.generate`` call and resumes them. Outside ``run`` a user asks the
engine directly, so an environment with an ``LLMUser`` still works on its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rods_agent.engines.base import (
    Completion,
    Engine,
    GenerationRequest,
    SamplingParams,
    derive_seed,
)
from rods_agent.engines.formats import auto_format
from rods_env.errors import RodsError
from rods_env.task import Task
from rods_env.user import TurnView, UserReply

STOP_MARK = "###STOP###"

USER_TEMPERATURE = 0.7
"""The default sampling temperature of a model-played user."""

SCENARIO_MAX_TOKENS = 512
"""Most tokens of one message of a user playing a benchmark's scenario (longer messages and
tool calls than rods' users write). A :class:`UserBatcher` that serves such users needs a
cap at least this high: a request's own cap can only lower the batch's."""

_SYSTEM = """You are playing a customer talking to a customer-service agent. Stay in character.
Your name is {name}. {persona}
Facts you know (say one only when the agent asks for it{hidden}):
{facts}
{situation}
Write only what the customer says next: one or two short sentences, no role labels. Do not
invent facts you were not given. If you want to end the conversation, write {stop}."""


class _Round:
    """The shared state of one :meth:`UserBatcher.run` (threads taking turns)."""

    def __init__(self, n: int) -> None:
        self.go = [threading.Semaphore(0) for _ in range(n)]
        self.back = threading.Semaphore(0)
        self.parked: dict[int, GenerationRequest] = {}
        self.answers: dict[int, Completion] = {}
        self.blocked = [0.0] * n


class UserBatcher:
    """Batches the model calls of simulated users across episodes (see the module doc).

    Args:
        engine: The engine that plays the users.
        sampling: Sampling of the users' messages.

    Attributes:
        gen_seconds: Time spent in ``engine.generate`` for users.
        requests: User replies generated.
        batches: Generation calls made.
    """

    def __init__(self, engine: Engine, sampling: SamplingParams) -> None:
        self.engine = engine
        self.sampling = sampling
        self.gen_seconds = 0.0
        self.requests = 0
        self.batches = 0
        self._local = threading.local()

    def _generate(self, requests: Sequence[GenerationRequest]) -> list[Completion]:
        t0 = time.perf_counter()
        try:
            out = self.engine.generate(list(requests), self.sampling)
        except Exception as exc:  # an engine should not raise; a user falls back on errors
            out = [Completion.failed(f"engine raised {type(exc).__name__}: {exc}")] * len(requests)
        if len(out) != len(requests):
            out = [Completion.failed("engine returned a wrong number of completions")] * len(
                requests
            )
        self.gen_seconds += time.perf_counter() - t0
        self.requests += len(requests)
        self.batches += 1
        return out

    def ask(self, request: GenerationRequest) -> Completion:
        """A user's completion: batched with the other users' when inside :meth:`run`."""
        ctx = getattr(self._local, "ctx", None)
        if ctx is None:
            return self._generate([request])[0]
        rnd, i = ctx
        t0 = time.perf_counter()
        rnd.parked[i] = request
        rnd.back.release()
        rnd.go[i].acquire()
        rnd.blocked[i] += time.perf_counter() - t0
        return rnd.answers.pop(i)

    def run(
        self, calls: Sequence[Callable[[], Any]]
    ) -> list[tuple[Any, BaseException | None, float]]:
        """Run ``calls`` (environment resets or steps) taking turns, answering the users'
        model requests in batches.

        Returns:
            Per call: its result, the exception it raised (or None), and its own seconds
            (wall time less the time it waited for its turn and for the model).
        """
        n = len(calls)
        if n == 0:
            return []
        rnd = _Round(n)
        results: list[Any] = [None] * n
        errors: list[BaseException | None] = [None] * n
        elapsed = [0.0] * n

        def worker(i: int) -> None:
            self._local.ctx = (rnd, i)
            rnd.go[i].acquire()
            t0 = time.perf_counter()
            try:
                results[i] = calls[i]()
            except Exception as exc:
                errors[i] = exc
            finally:
                elapsed[i] = time.perf_counter() - t0
                self._local.ctx = None
                rnd.back.release()

        threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n)]
        for t in threads:
            t.start()
        turn = list(range(n))
        while turn:
            for i in turn:  # one at a time: i runs until it finishes or parks a request
                rnd.go[i].release()
                rnd.back.acquire()
            waiting = sorted(rnd.parked)
            if waiting:
                answers = self._generate([rnd.parked.pop(i) for i in waiting])
                rnd.answers.update(zip(waiting, answers, strict=True))
            turn = waiting
        for t in threads:
            t.join()
        return [(results[i], errors[i], max(0.0, elapsed[i] - rnd.blocked[i])) for i in range(n)]


@dataclass
class LLMUser:
    """A user simulator whose words come from a model.

    Args:
        engine: Any engine (a small local model, a served one).
        sampling: Sampling of the user's messages (a ``batcher``'s own when it has one).
        patience: Replies in one turn without its goal reached before the user gives it up.
        batcher: Batch this user's model calls with other episodes' (see
            :class:`UserBatcher`); None asks the engine one reply at a time.
        scenario_max_tokens: Most tokens of one message when playing a benchmark's
            scenario (:meth:`respond`): its users write longer messages and tool calls.
    """

    engine: Engine
    sampling: SamplingParams = field(
        default_factory=lambda: SamplingParams(max_tokens=96, temperature=USER_TEMPERATURE)
    )
    patience: int = 4
    batcher: UserBatcher | None = None
    scenario_max_tokens: int = SCENARIO_MAX_TOKENS
    _seed: int | None = field(default=None, init=False, repr=False)
    _calls: int = field(default=0, init=False, repr=False)
    _task: Task | None = field(default=None, init=False, repr=False)
    _turn: int = field(default=0, init=False, repr=False)
    _history: list[dict[str, str]] = field(default_factory=list, init=False, repr=False)
    _replies: int = field(default=0, init=False, repr=False)
    errors: list[str] = field(default_factory=list, init=False, repr=False)

    # -- protocol --------------------------------------------------------------------------
    def seed_episode(self, seed: int | None) -> None:
        """Seed the next episode's replies (the rollout calls this before each reset)."""
        self._seed = seed

    def start(self, task: Task) -> str:
        """Reset for ``task`` and return the user's first message."""
        self._task, self._turn, self._replies = task, 0, 0
        self._history = []
        self._calls = 0
        request = task.turns[0].request
        text = self._say(f"Open the conversation and ask for this: {request}", fallback=request)
        self._history.append({"role": "assistant", "content": text})
        return text

    def reply(self, message: str, view: TurnView) -> UserReply:
        """Answer the agent's message; advance or stop as the turn's state says."""
        task = self._task
        if task is None:
            raise RuntimeError("LLMUser.reply called before start()")
        self._history.append({"role": "user", "content": message})
        self._turn = view.turn
        last = view.turn + 1 >= len(task.turns)
        if view.goal_reached or self._replies >= self.patience:
            abandoned = not view.goal_reached
            lead = (
                "You give up on this request."
                if abandoned
                else "The agent has done what you asked."
            )
            if last:
                text = self._say(
                    f"{lead} Thank the agent and say goodbye.", fallback="Thank you, goodbye!"
                )
                kind = "abandon" if abandoned else "stop"
                return self._answer(UserReply(text, advance=True, stop=True, kind=kind))
            self._turn, self._replies = view.turn + 1, 0
            request = task.turns[self._turn].request
            text = self._say(f"{lead} Now ask for this: {request}", fallback=request)
            return self._answer(
                UserReply(text, advance=True, kind="abandon" if abandoned else "advance")
            )
        self._replies += 1
        text = self._say(
            "Answer the agent's last message. Confirm an action only if it is what you asked for.",
            fallback=task.turns[view.turn].request,
        )
        if STOP_MARK in text:
            text = text.replace(STOP_MARK, "").strip() or "Goodbye."
            return self._answer(UserReply(text, advance=True, stop=True, kind="stop"))
        return self._answer(UserReply(text, kind="answer"))

    # -- ScenarioUser (benchmarks' written user instructions) -----------------------------
    def begin_scenario(self, task: Any) -> None:
        """A new conversation starts (its replies are seeded from the episode's seed)."""
        self._calls = 0

    def respond(
        self,
        system: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> str | dict[str, Any]:
        """The model's next message as the user of a benchmark's scenario: its text, or
        its structured tool calls when the engine returns some.

        Raises:
            RodsError: when the engine fails (the episode cannot go on, and the failure is
                not the agent's).
        """
        seed = None if self._seed is None else derive_seed(self._seed, "user", self._calls)
        self._calls += 1
        request = GenerationRequest(
            messages=[{"role": "system", "content": system}, *messages],
            tools=list(tools) if tools else None,
            max_tokens=self.scenario_max_tokens,
            seed=seed,
        )
        if self.batcher is not None:
            completion = self.batcher.ask(request)
        else:
            completion = self.engine.generate([request], self.sampling)[0]
        if completion.error:
            self.errors.append(completion.error)
            raise RodsError(f"the user's model failed: {completion.error}")
        return auto_format(completion)

    # -- internals -------------------------------------------------------------------------
    def _answer(self, reply: UserReply) -> UserReply:
        self._history.append({"role": "assistant", "content": reply.text})
        return reply

    def system_prompt(self, situation: str) -> str:
        """The instructions the model gets for its next message."""
        task = self._task
        assert task is not None
        turn = task.turns[self._turn]
        hidden = ""
        if turn.hidden_facts:
            hidden = f"; never volunteer {', '.join(turn.hidden_facts)} before being asked"
        facts = "\n".join(f"- {k}: {v}" for k, v in task.user.facts.items()) or "- (none)"
        goal = f"Your current request: {turn.request}"
        return _SYSTEM.format(
            name=task.user.name,
            persona=task.user.persona,
            hidden=hidden,
            facts=facts,
            situation=f"{goal}\n{situation}",
            stop=STOP_MARK,
        )

    def _say(self, situation: str, *, fallback: str) -> str:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.system_prompt(situation)}
        ]
        # The model plays the user: the agent's messages are its "user" turns.
        messages += self._history or [{"role": "user", "content": "Hello, how can I help you?"}]
        if messages[-1]["role"] == "assistant":
            messages.append({"role": "user", "content": "(continue)"})
        seed = None if self._seed is None else derive_seed(self._seed, "user", self._calls)
        self._calls += 1
        # its own cap: a batcher shared with scenario users has a higher one
        request = GenerationRequest(
            messages=messages, seed=seed, max_tokens=self.sampling.max_tokens
        )
        if self.batcher is not None:
            completion = self.batcher.ask(request)
        else:
            completion = self.engine.generate([request], self.sampling)[0]
        if completion.error:
            self.errors.append(completion.error)
            return fallback
        text = completion.text.strip()
        return text or fallback
