"""LLMUser: the simulated user of rods_env, played by a language model through any engine.

It satisfies :class:`rods_env.user.UserSimulator`, so it plugs into the environment
(``gymnasium.make("rods/Retail-v0", user=LLMUser(engine))``); the deterministic
:class:`rods_env.ScriptedUser` stays the default. The model writes what the user says, from
a persona, the user's facts and the current turn's request; when a turn ends is decided as
by the scripted user, from the environment's view of the turn (goal reached, or patience
used up), so rewards never depend on how the model phrases things.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rods_agent.engines.base import Engine, GenerationRequest, SamplingParams
from rods_env.task import Task
from rods_env.user import TurnView, UserReply

STOP_MARK = "###STOP###"

_SYSTEM = """You are playing a customer talking to a customer-service agent. Stay in character.
Your name is {name}. {persona}
Facts you know (say one only when the agent asks for it{hidden}):
{facts}
{situation}
Write only what the customer says next: one or two short sentences, no role labels. Do not
invent facts you were not given. If you want to end the conversation, write {stop}."""


@dataclass
class LLMUser:
    """A user simulator whose words come from a model.

    Args:
        engine: Any engine (a small local model, a served one).
        sampling: Sampling of the user's messages.
        patience: Replies in one turn without its goal reached before the user gives it up.
    """

    engine: Engine
    sampling: SamplingParams = field(
        default_factory=lambda: SamplingParams(max_tokens=96, temperature=0.7)
    )
    patience: int = 4
    _task: Task | None = field(default=None, init=False, repr=False)
    _turn: int = field(default=0, init=False, repr=False)
    _history: list[dict[str, str]] = field(default_factory=list, init=False, repr=False)
    _replies: int = field(default=0, init=False, repr=False)
    errors: list[str] = field(default_factory=list, init=False, repr=False)

    # -- protocol --------------------------------------------------------------------------
    def start(self, task: Task) -> str:
        """Reset for ``task`` and return the user's first message."""
        self._task, self._turn, self._replies = task, 0, 0
        self._history = []
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
        completion = self.engine.generate([GenerationRequest(messages=messages)], self.sampling)[0]
        if completion.error:
            self.errors.append(completion.error)
            return fallback
        text = completion.text.strip()
        return text or fallback
