"""A perturbation harness: edited gold trajectories of τ²-bench's tasks, played in rods and in
τ²-bench's own pipeline, verdict for verdict.

A :class:`Script` is what an agent and a user say, message by message, as raw completions
(text with ``<tool_call>`` blocks, or OpenAI-style message dicts): the agent's actions and
the user's replies. :func:`scripts` (a hypothesis strategy) builds one from a task's gold
actions and then edits it the way models err: values changed, arguments dropped, added or
of another type, calls reordered, repeated, left out or added (another task's, a read, an
unknown tool, a run of failing calls), several calls in one message, text said before or
after the calls, reasoning in ``<think>`` (with the answer only there), the final answer as
JSON or with other number formats, agent text that looks like a tool call, user replies that
look like JSON or tool calls, empty user replies, the user stopping early, long runs of user
tool calls (telecom's phone), and every message as text or as a message dict.

The same script is then played twice:

* **rods** (:func:`run_rods`): ``rods/Tau2-*-v0`` in its default mode, the agent's actions
  through ``step`` and the user's replies through a :class:`rods_env.user.ScenarioUser`;
* **τ²-bench** (:func:`run_tau2`): its own ``run_task`` (the orchestrator with its
  termination rules, its ``LLMAgent`` / ``LLMSoloAgent`` and ``UserSimulator``, its
  environment, then ``evaluate_simulation(..., ALL)``), unchanged but for the model: the
  litellm ``completion`` that τ²-bench's ``generate`` calls answers with the script's next
  message *as an OpenAI-compatible server returns it* (:func:`served`): a reasoning parser
  takes ``<think>`` out, vLLM's hermes tool parser makes the ``<tool_call>`` blocks the
  message's ``tool_calls`` (all of them, or none when one cannot be read) and the text
  before the first block its content; a message dict is returned as it is. This is an
  independent statement of how a served model's completion reaches τ²-bench; rods' reading
  rule is checked against it.

τ²-bench names telecom's new bills with ``uuid4()``, so its own evaluator cannot replay a
conversation whose tool replies show one (:func:`run_tau2` says whether the stock evaluator
raises). To get τ²-bench's verdict on such a conversation anyway, its ids are drawn here from
the stream rods uses, restarted whenever τ²-bench builds an environment: the same actions
then give the same ids in the conversation, in the evaluator's replay and in rods.

Scripts stay within what both sides can receive: a served model's message is never empty
(τ²-bench would ask again), a solo agent only calls tools (τ²-bench asks with
``tool_choice="required"``), and every ``<tool_call>`` block an agent writes can be read (an
unreadable one is an error observation in rods; a server would hand it to the user as text).
"""

from __future__ import annotations

import contextlib
import json
import random
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from hypothesis import strategies as st

from environments.tau2.domain import domain_named
from environments.tau2.env import Tau2Env
from environments.tau2.package import tau2_module
from environments.tau2.state import episode_ids, ids_seed
from environments.tau2.trajectory import termination_reason

MODES = (
    ("tau2-airline", False),
    ("tau2-retail", False),
    ("tau2-telecom", False),
    ("tau2-telecom", True),
)
"""Every domain and mode: (rods domain name, solo)."""

AGENT_MODEL, USER_MODEL = "rods-harness-agent", "rods-harness-user"
"""The model names τ²-bench's agent and user are given (the fake completion's keys)."""

AGENT_MORE = "Is there anything else I can help you with?"
USER_DONE = "Thank you, that is all. ###STOP###"
"""What the agent and the user say once their scripts are used up (a solo agent calls
``done``): every conversation ends."""

Raw = str | dict[str, Any]


# -- scripts ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Script:
    """One conversation to play: the agent's actions and the user's replies, in order.

    Attributes:
        domain: rods' domain name (``"tau2-airline"``).
        task_id: τ²-bench's task id.
        solo: Telecom's solo mode.
        agent: The agent's actions (raw completions or message dicts).
        user: The user's replies, one per time the user is asked (the first opens).
        edits: What was changed from the gold (for reports).
    """

    domain: str
    task_id: str
    solo: bool
    agent: tuple[Raw, ...]
    user: tuple[Raw, ...]
    edits: tuple[str, ...] = ()

    def agent_action(self, i: int) -> Raw:
        """The agent's ``i``-th action, or the filler once the script is used up."""
        if i < len(self.agent):
            return self.agent[i]
        return _block("done", {}) if self.solo else AGENT_MORE


@dataclass
class _Call:
    name: str
    arguments: dict[str, Any]


@dataclass
class _Step:
    """One agent message: calls (with text before and after them), or text for the user
    followed by the user's replies to it (tool-call messages, then a text)."""

    calls: list[_Call] = field(default_factory=list)
    text: str = ""
    after: str = ""
    think: str = ""
    as_dict: bool = False
    replies: list[Raw] = field(default_factory=list)


def _block(name: str, arguments: Mapping[str, Any]) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': dict(arguments)})}</tool_call>"


def _render(step: _Step, n: int) -> Raw:
    """A step as the agent's raw completion, or as a message dict."""
    if step.as_dict:
        message: dict[str, Any] = {"role": "assistant", "content": step.text or None}
        if step.calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{n}_{i}",
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for i, c in enumerate(step.calls)
            ]
        return message
    think = f"<think>{step.think}</think>" if step.think else ""
    if not step.calls:
        return think + step.text
    body = "".join(_block(c.name, c.arguments) for c in step.calls)
    return think + step.text + body + step.after


# -- the domain's material -----------------------------------------------------------------
@dataclass(frozen=True)
class _Material:
    """What edits draw from: each task's gold, every value a gold argument takes, the
    domain's tools (the agent's and the user's)."""

    tasks: Mapping[str, Any]
    values: Mapping[tuple[str, str], tuple[Any, ...]]
    agent_tools: tuple[str, ...]
    user_tools: tuple[str, ...]


@cache
def material(domain: str) -> _Material:
    """The edit material of rods domain ``domain``."""
    dom = domain_named(domain)
    tasks = dom.tau2_tasks()
    values: dict[tuple[str, str], list[Any]] = {}
    for task in tasks.values():
        for action in _actions(task):
            for key, value in action.arguments.items():
                pool = values.setdefault((action.name, key), [])
                if value not in pool:
                    pool.append(value)
    backend = dom.backend()
    agent_tools = tuple(s["function"]["name"] for s in backend.tool_schemas)
    user_tools = tuple(s["function"]["name"] for s in backend.user_tool_schemas)
    return _Material(tasks, {k: tuple(v) for k, v in values.items()}, agent_tools, user_tools)


def _actions(task: Any) -> list[Any]:
    criteria = task.evaluation_criteria
    return list(criteria.actions or []) if criteria else []


def _info(task: Any) -> list[str]:
    criteria = task.evaluation_criteria
    return list(criteria.communicate_info or []) if criteria else []


def _gold_steps(task: Any, solo: bool) -> list[_Step]:
    """The gold as steps: each gold action (the user's through the user, except in solo
    mode), then the final message that says the ``communicate_info`` (solo: ``done``)."""
    steps: list[_Step] = []
    for action in _actions(task):
        call = _Call(action.name, dict(action.arguments))
        if action.requestor == "user" and not solo:
            steps.append(
                _Step(
                    text=f"Please do this on your phone now: {action.name}.",
                    replies=[_block(call.name, call.arguments), "Done. What next?"],
                )
            )
        else:
            steps.append(_Step(calls=[call]))
    if solo:
        steps.append(_Step(calls=[_Call("done", {})]))
    else:
        said = " ".join(_info(task))
        steps.append(_Step(text=f"Everything is taken care of. {said}".strip(), replies=[]))
    return steps


# -- edits -----------------------------------------------------------------------------------
_JSON_TEXTS = (
    '{"name": "Summary", "arguments": {"status": "resolved"}}',
    '{"status": "pending", "note": "checking your account"}',
    '```json\n{"name": "Summary", "arguments": {}}\n```',
    "{sigh} Let me look into that.",
    '[{"name": "Summary"}]',
    "{",
    "I will stop here. ###STOP###",  # only a solo agent stops by saying so
    '<tool_call>{"name": "Summary", "arguments": {}}',  # unclosed: a call all the same
)
_USER_JSON = (
    '{"answer": "yes"}',
    "{sigh} Yes... go ahead.",
    "{ok}",
    '```json\n{"confirm": true}\n```',
    "[1, 2, 3] Yes please.",
    '{"name": "toggle_airplane_mode", "arguments": {}}',  # text: only blocks are calls
    '<tool_call>{"name": "toggle_airplane_mode", "arguments": {}}',  # unclosed: a call
    '<tool_call>{"name": "check_status_bar", "arguments": {}}</tool_call>',
    '<tool_call>{"name": "check_status_bar", "arguments": {}}</tool_call><tool_call>{oops}'
    "</tool_call>",  # one block unreadable: all of it is text
    "<think>I should say yes.</think>Yes.",
)


def _variants(value: Any, pool: Sequence[Any]) -> list[Any]:
    """Other values for an argument: another gold's, or this one in another type or
    format (numbers as strings or floats, strings in other case)."""
    out: list[Any] = [v for v in pool if v != value or type(v) is not type(value)]
    if isinstance(value, bool):
        out += [not value, str(value).lower()]
    elif isinstance(value, int):
        out += [value + 1, str(value), float(value)]
    elif isinstance(value, float):
        out += [value + 0.01, str(value), int(value) if value == int(value) else round(value)]
    elif isinstance(value, str):
        out += [value.upper(), value + " ", "", value[:-1]]
        if re.fullmatch(r"-?\d+(\.\d+)?", value):
            out.append(float(value))
    elif isinstance(value, list):
        out += [value[:-1], list(reversed(value)), [*value, *value[:1]]]
    elif isinstance(value, dict):
        out += [{}, {k: v for k, v in list(value.items())[1:]}]
    else:
        out.append("x")
    return out


@dataclass
class _Draft:
    """A script being edited: the agent's steps, the user's opening, the domain's
    material, the mode."""

    steps: list[_Step]
    user: list[Raw]
    mat: _Material
    solo: bool

    @property
    def call_steps(self) -> list[_Step]:
        return [s for s in self.steps if s.calls and s.calls[0].name != "done"]

    @property
    def slots(self) -> list[_Step]:
        """The agent's texts that the user answers."""
        return [s for s in self.steps if not s.calls and s.replies]

    def at(self, draw: st.DrawFn) -> int:
        """A place for a new step, before the last."""
        return draw(st.integers(0, len(self.steps) - 1))


Editor = Callable[[st.DrawFn, _Draft], bool]


def _argument(kind: str) -> Editor:
    def edit(draw: st.DrawFn, d: _Draft) -> bool:
        calls = [c for s in d.call_steps for c in s.calls if c.arguments or kind == "add_arg"]
        if not calls:
            return False
        call = draw(st.sampled_from(calls))
        if kind == "add_arg":
            call.arguments[draw(st.sampled_from(["note", "extra", "user_id"]))] = draw(
                st.sampled_from([1, "x", None, True, [1]])
            )
            return True
        key = draw(st.sampled_from(sorted(call.arguments)))
        if kind == "drop_arg":
            del call.arguments[key]
            return True
        pool = d.mat.values.get((call.name, key), ())
        call.arguments[key] = draw(st.sampled_from(_variants(call.arguments[key], pool)))
        return True

    return edit


def _swap(draw: st.DrawFn, d: _Draft) -> bool:
    if len(d.steps) < 3:
        return False
    i = draw(st.integers(0, len(d.steps) - 3))
    d.steps[i], d.steps[i + 1] = d.steps[i + 1], d.steps[i]
    return True


def _repeat(draw: st.DrawFn, d: _Draft) -> bool:
    if len(d.steps) < 2:
        return False
    i = draw(st.integers(0, len(d.steps) - 2))
    d.steps.insert(i, _copy(d.steps[i]))
    return True


def _drop_step(draw: st.DrawFn, d: _Draft) -> bool:
    if len(d.steps) < 2:
        return False
    del d.steps[draw(st.integers(0, len(d.steps) - 2))]
    return True


def _extra_call(draw: st.DrawFn, d: _Draft) -> bool:
    other = d.mat.tasks[draw(st.sampled_from(sorted(d.mat.tasks)))]
    actions = [a for a in _actions(other) if d.solo or a.requestor == "assistant"]
    if not actions:
        return False
    action = draw(st.sampled_from(actions))
    d.steps.insert(d.at(draw), _Step(calls=[_Call(action.name, dict(action.arguments))]))
    return True


def _unknown_tool(draw: st.DrawFn, d: _Draft) -> bool:
    at = d.at(draw)
    name = draw(st.sampled_from(["no_such_tool", "Summary", "get_details"]))
    d.steps.insert(at, _Step(calls=[_Call(name, {"id": "1"})]))
    return True


def _failing_calls(draw: st.DrawFn, d: _Draft) -> bool:
    """Calls that fail (τ²-bench's tool errors): enough of them end the episode."""
    tools = list(d.mat.agent_tools) + (list(d.mat.user_tools) if d.solo else [])
    name = draw(st.sampled_from(sorted(tools)))
    n = draw(st.integers(1, 12))
    at = d.at(draw)
    for _ in range(n):
        d.steps.insert(at, _Step(calls=[_Call(name, {"no_such_argument": 0})]))
    return True


def _new_bill_shown(draw: st.DrawFn, d: _Draft) -> bool:
    """Telecom: a charge to a customer without a draft bill makes a bill named with
    ``uuid4()``, and the bills' listing shows it (τ²-bench's own evaluator cannot replay
    such a conversation)."""
    if "refuel_data" not in d.mat.agent_tools:
        return False
    at = d.at(draw)
    refuel = _Call("refuel_data", {"customer_id": "C1002", "line_id": "L1004", "gb_amount": 2.0})
    d.steps[at:at] = [
        _Step(calls=[refuel]),
        _Step(calls=[_Call("get_bills_for_customer", {"customer_id": "C1002"})]),
    ]
    return True


def _group(draw: st.DrawFn, d: _Draft) -> bool:
    steps = d.steps
    pairs = [i for i in range(len(steps) - 1) if steps[i].calls and steps[i + 1].calls]
    if not pairs:
        return False
    i = draw(st.sampled_from(pairs))
    steps[i].calls = steps[i].calls + steps[i + 1].calls
    del steps[i + 1]
    return True


def _text_with_calls(draw: st.DrawFn, d: _Draft) -> bool:
    if not d.call_steps:
        return False
    step = draw(st.sampled_from(d.call_steps))
    said = " ".join(_info(d.mat.tasks[draw(st.sampled_from(sorted(d.mat.tasks)))]))
    where = draw(st.sampled_from(["before", "after", "both"]))
    if where in ("before", "both"):
        step.text = draw(st.sampled_from(["Let me check. ", f"So far: {said} ", "{ "]))
    if where in ("after", "both"):
        step.after = draw(st.sampled_from([" Done.", f" {said}", " {}"]))
    return True


def _think(draw: st.DrawFn, d: _Draft) -> bool:
    target = draw(st.sampled_from(d.steps))
    if target.as_dict:
        return False
    if not target.calls and target is d.steps[-1] and not d.solo:
        # the answer only in the reasoning: the visible text keeps something to say
        target.think, target.text = target.text, "I have handled your request."
    else:
        drafted = d.call_steps[0].calls[0] if d.call_steps else _Call("no_such_tool", {})
        target.think = "Plan: " + _block(drafted.name, drafted.arguments)
    return True


def _as_dict(draw: st.DrawFn, d: _Draft) -> bool:
    candidates = [s for s in d.steps if not s.think]
    if not candidates:
        return False
    for step in draw(st.lists(st.sampled_from(candidates), min_size=1, max_size=4)):
        step.as_dict = True
        step.after = ""
    return True


def _json_text(draw: st.DrawFn, d: _Draft) -> bool:
    at = d.at(draw)
    text = draw(st.sampled_from([*_JSON_TEXTS, _gold_as_json(d.call_steps)]))
    d.steps.insert(at, _Step(text=text, replies=[draw(st.sampled_from(["OK.", "{ok}"]))]))
    return True


def _final_as_json(draw: st.DrawFn, d: _Draft) -> bool:
    last = d.steps[-1]
    if last.calls:
        return False
    said = last.text.removeprefix("Everything is taken care of.").strip()
    last.text = json.dumps({"name": "Summary", "arguments": {"message": said}})
    return True


def _number_format(draw: st.DrawFn, d: _Draft) -> bool:
    last = d.steps[-1]
    if last.calls:
        return False
    last.text = _reformat(
        last.text, draw(st.sampled_from(["commas", "upper", "dollars", "decimals"]))
    )
    return True


def _user_json(draw: st.DrawFn, d: _Draft) -> bool:
    slot = draw(st.sampled_from([*d.slots, None]))
    text = draw(st.sampled_from(_USER_JSON))
    if slot is None:
        d.user[0] = text + " " + str(d.user[0])
    else:
        slot.replies[-1] = text
    return True


def _user_empty(draw: st.DrawFn, d: _Draft) -> bool:
    if not d.slots:
        return False
    slot = draw(st.sampled_from(d.slots))
    n = draw(st.sampled_from([1, 2, 4]))  # four in a row: τ²-bench gives up
    empty = draw(st.sampled_from(["", "  ", {"role": "assistant", "content": ""}]))
    slot.replies[-1:-1] = [empty] * n
    return True


def _user_stops_early(draw: st.DrawFn, d: _Draft) -> bool:
    if not d.slots:
        return False
    draw(st.sampled_from(d.slots)).replies[-1] = draw(
        st.sampled_from(["Never mind. ###STOP###", "###TRANSFER###", '{"bye": 1} ###STOP###'])
    )
    return True


def _user_call_run(draw: st.DrawFn, d: _Draft) -> bool:
    if not d.mat.user_tools or not d.slots:
        return False
    slot = draw(st.sampled_from(d.slots))
    name = draw(st.sampled_from(["check_status_bar", "toggle_airplane_mode", "no_such_tool"]))
    n = draw(st.sampled_from([1, 5, 21, 40, 120]))
    form = draw(st.sampled_from(["block", "dict", "two", "said"]))
    slot.replies[-1:-1] = [_user_call(name, form)] * n
    return True


AGENT_EDITS: dict[str, Editor] = {
    "value": _argument("value"),
    "drop_arg": _argument("drop_arg"),
    "add_arg": _argument("add_arg"),
    "swap": _swap,
    "repeat": _repeat,
    "drop_step": _drop_step,
    "extra_call": _extra_call,
    "unknown_tool": _unknown_tool,
    "failing_calls": _failing_calls,
    "group": _group,
    "text_with_calls": _text_with_calls,
    "think": _think,
    "as_dict": _as_dict,
}
"""Edits of the agent's calls and of how its messages are written (every mode)."""

TALK_EDITS: dict[str, Editor] = {
    "json_text": _json_text,
    "final_as_json": _final_as_json,
    "number_format": _number_format,
    "user_json": _user_json,
    "user_empty": _user_empty,
    "user_stops_early": _user_stops_early,
    "user_call_run": _user_call_run,
}
"""Edits of what the agent says to the user and of the user's replies (not in solo mode)."""

EDITS = (*AGENT_EDITS, *TALK_EDITS, "new_bill_shown")
"""Every kind of edit :func:`scripts` applies."""

SOLO_EDITS = (*AGENT_EDITS, "new_bill_shown")
"""The edits that keep a solo agent's messages calls."""

_EDITORS: dict[str, Editor] = {**AGENT_EDITS, **TALK_EDITS, "new_bill_shown": _new_bill_shown}


def _user_call(name: str, form: str) -> Raw:
    if form == "dict":
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "u", "type": "function", "function": {"name": name, "arguments": "{}"}}
            ],
        }
    if form == "two":
        return _block(name, {}) + _block("check_status_bar", {})
    if form == "said":
        return "Let me try that. " + _block(name, {})
    return _block(name, {})


def _gold_as_json(call_steps: Sequence[_Step]) -> str:
    """A gold call written as bare JSON text: a call in rods' own domains, text here."""
    if not call_steps:
        return '{"name": "get_user_details", "arguments": {}}'
    call = call_steps[0].calls[0]
    return json.dumps({"name": call.name, "arguments": call.arguments})


def _reformat(text: str, fmt: str) -> str:
    if fmt == "upper":
        return text.upper()
    if fmt == "commas":
        return re.sub(r"\d{4,}", lambda m: f"{int(m.group()):,}", text)
    if fmt == "dollars":
        return re.sub(r"(?<![\d.])(\d+(?:\.\d+)?)", r"$\1", text)
    return re.sub(r"(?<![\d.])(\d+)(?![\d.])", r"\1.00", text)


def _copy(step: _Step) -> _Step:
    return _Step(
        calls=[_Call(c.name, dict(c.arguments)) for c in step.calls],
        text=step.text,
        after=step.after,
        think=step.think,
        as_dict=step.as_dict,
        replies=list(step.replies),
    )


def gold_script(domain: str, task_id: str, solo: bool = False) -> Script:
    """The gold of a task as a script (every task passes with it)."""
    steps = _gold_steps(material(domain).tasks[task_id], solo)
    user: list[Raw] = [] if solo else ["Hi, I need some help, please."]
    for step in steps:
        user += step.replies
    agent = tuple(_render(step, n) for n, step in enumerate(steps))
    return Script(domain, task_id, solo, agent, tuple(user))


@st.composite
def scripts(draw: st.DrawFn, domain: str, solo: bool, max_edits: int = 3) -> Script:
    """A script of one of the domain's tasks: its gold with one to ``max_edits`` edits (an
    edit that does not apply to the task is left out)."""
    mat = material(domain)
    ids = sorted(mat.tasks)
    if solo:
        ids = [i for i in ids if _actions(mat.tasks[i])]  # τ²-bench's solo agent needs some
    task_id = draw(st.sampled_from(ids))
    task = mat.tasks[task_id]
    steps = _gold_steps(task, solo)
    user: list[Raw] = [] if solo else ["Hi, I need some help, please."]
    kinds = draw(
        st.lists(st.sampled_from(SOLO_EDITS if solo else EDITS), min_size=1, max_size=max_edits)
    )
    draft = _Draft(steps, user, mat, solo)
    done = tuple(k for k in kinds if _EDITORS[k](draw, draft))
    agent = [_render(step, n) for n, step in enumerate(steps)]
    for step in steps:
        user += step.replies
    return Script(domain, task_id, solo, tuple(agent), tuple(user), done)


# -- outcomes --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    """One side's verdict on a script.

    Attributes:
        reward: The reward (0 or 1).
        termination: τ²-bench's termination reason, or ``crash: <exception>`` when its
            pipeline raised (τ²-bench's ``run_tasks`` records such a run as a failure).
        trajectory: The conversation, ids left out (role, text, calls, tool replies).
        stock_crash: τ²-bench only: its own evaluator, with ``uuid4()`` ids, raises on the
            conversation (it cannot replay it).
    """

    reward: float
    termination: str
    trajectory: tuple[Any, ...]
    stock_crash: bool = False


def _normal(messages: Sequence[Mapping[str, Any]]) -> tuple[Any, ...]:
    out = []
    for m in messages:
        if m["role"] == "tool":
            out.append(("tool", m["content"], bool(m["error"]), m["requestor"]))
            continue
        calls = tuple(
            (c["name"], json.dumps(c["arguments"], sort_keys=True))
            for c in (m.get("tool_calls") or ())
        )
        out.append((m["role"], (m.get("content") or "").strip(), calls))
    return tuple(out)


class _ScriptUser:
    """rods' side of the user: the script's replies (a ScenarioUser)."""

    name = "script"

    def __init__(self) -> None:
        self.replies: list[Raw] = []

    def begin_scenario(self, task: Any) -> None:
        pass

    def respond(self, system: str, messages: Any, tools: Any = None) -> Raw:
        return self.replies.pop(0) if self.replies else USER_DONE


@cache
def _rods_env(domain: str, solo: bool) -> Tau2Env:
    return Tau2Env(domain, split=None, solo=solo, user=None if solo else _ScriptUser())


def run_rods(script: Script) -> Outcome:
    """The script played in ``rods/Tau2-*-v0`` (its default mode)."""
    env = _rods_env(script.domain, script.solo)
    if not script.solo:
        env.user.replies = list(script.user)
    try:
        _obs, info = env.reset(options={"task": f"{script.domain}:{script.task_id}"})
        i = 0
        over = bool(info["termination"])
        while not over:
            _, _, terminated, truncated, info = env.step(script.agent_action(i))
            i += 1
            over = terminated or truncated
    except Exception as exc:  # never expected: a disagreement, reported as such
        return Outcome(0.0, f"raised: {type(exc).__name__}: {exc}", ())
    return Outcome(
        float(info["progress"]),
        termination_reason(info["termination"]),
        _normal(env.trajectory),
    )


# -- τ²-bench's side -------------------------------------------------------------------------
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_HERMES = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)


def served(raw: Raw, tools: bool) -> tuple[str | None, list[tuple[str, str]]]:
    """A completion as an OpenAI-compatible server returns it: ``(content, tool calls as
    (name, arguments JSON))``. Text: a reasoning parser takes ``<think>`` blocks out; with
    tools, vLLM's hermes parser reads every ``<tool_call>`` block as JSON (one that fails
    leaves the whole text as content, no calls) and returns the text before the first block
    as content (None when empty). A message dict is returned as it is."""
    if isinstance(raw, Mapping):
        calls = [
            (c["function"]["name"], c["function"]["arguments"]) for c in raw.get("tool_calls") or []
        ]
        return raw.get("content"), calls
    text = _THINK.sub("", raw)
    if not tools or "<tool_call>" not in text:
        return text, []
    try:
        found = [json.loads(a or b) for a, b in _HERMES.findall(text)]
        calls = [(c["name"], json.dumps(c.get("arguments", {}))) for c in found]
    except (ValueError, KeyError, TypeError, AttributeError):
        return text, []
    return text[: text.find("<tool_call>")] or None, calls


class _Obj:
    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def get(self, key: str, default: Any = None) -> Any:
        return self.__dict__.get(key, default)

    def to_dict(self) -> dict[str, Any]:
        return {}


class _Served:
    """The litellm ``completion`` τ²-bench's ``generate`` calls: the script's next message
    of the agent or the user (by model name), as a server returns it."""

    def __init__(self) -> None:
        self.script: Script | None = None
        self.agent = 0
        self.user: list[Raw] = []

    def load(self, script: Script) -> None:
        self.script, self.agent, self.user = script, 0, list(script.user)

    def __call__(self, model: str, messages: Any, tools: Any = None, **kwargs: Any) -> Any:
        assert self.script is not None
        if model == AGENT_MODEL:
            raw = self.script.agent_action(self.agent)
            self.agent += 1
        else:
            raw = self.user.pop(0) if self.user else USER_DONE
        content, calls = served(raw, bool(tools))
        tool_calls = [
            _Obj(id=f"srv_{i}", type="function", function=_Obj(name=n, arguments=a))
            for i, (n, a) in enumerate(calls)
        ]
        message = _Obj(role="assistant", content=content, tool_calls=tool_calls or None)
        choice = _Obj(message=message, finish_reason="stop")
        return _Obj(model=model, choices=[choice])


_SERVED = _Served()
_STREAM = random.Random()
_DRAWN: list[str] = []


@cache
def _install() -> None:
    """Once per process: litellm stubbed (nothing may call a model), τ²-bench's ``generate``
    served by the script, environments built with the id stream restarted (see the module
    docstring)."""
    from tests.environments.tau2 import litellm_stub

    litellm_stub.install()
    for name in ("tau2-airline", "tau2-retail", "tau2-telecom"):
        domain_named(name).backend()  # rods' id stream in τ²-bench's tool modules
    tau2_module("tau2.utils.llm_utils").completion = _SERVED
    registry = tau2_module("tau2.registry").registry
    for name, constructor in list(registry._domains.items()):

        def restarted(
            *args: Any, _make: Any = constructor, _name: str = name, **kwargs: Any
        ) -> Any:
            _STREAM.seed(ids_seed(_name, _DRAWN[0]) if _DRAWN else 0)
            return _make(*args, **kwargs)

        registry._domains[name] = restarted


@contextlib.contextmanager
def _ids_for(task_id: str) -> Iterator[None]:
    _DRAWN[:] = [task_id]
    with episode_ids(_STREAM):
        yield


def run_tau2(script: Script) -> Outcome:
    """The script played by τ²-bench's own ``run_task`` (see the module docstring)."""
    _install()
    run = tau2_module("tau2.run")
    tau2_domain = domain_named(script.domain).tau2_domain
    task = domain_named(script.domain).tau2_tasks()[script.task_id]
    _SERVED.load(script)
    try:
        with _ids_for(script.task_id):
            simulation = run.run_task(
                domain=tau2_domain,
                task=task,
                agent="llm_agent_solo" if script.solo else "llm_agent",
                user="dummy_user" if script.solo else "user_simulator",
                llm_agent=AGENT_MODEL,
                llm_user=USER_MODEL,
                max_steps=200,
                max_errors=10,
            )
    except Exception as exc:  # τ²-bench's run_tasks records the run as a failure (reward 0)
        return Outcome(0.0, f"crash: {type(exc).__name__}", ())
    messages = [m.model_dump(mode="json") for m in simulation.messages]
    outcome = Outcome(
        float(simulation.reward_info.reward),
        str(getattr(simulation.termination_reason, "value", simulation.termination_reason)),
        _normal(messages),
    )
    if tau2_domain == "telecom" and simulation.termination_reason in ("user_stop", "agent_stop"):
        evaluator = tau2_module("tau2.evaluator.evaluator")
        try:  # τ²-bench's own evaluator, uuid4() ids and all
            evaluator.evaluate_simulation(
                simulation, task, evaluator.EvaluationType.ALL, script.solo, tau2_domain
            )
        except ValueError:
            return Outcome(outcome.reward, outcome.termination, outcome.trajectory, True)
    return outcome


# -- agreement -------------------------------------------------------------------------------
EQUIVALENT_ENDS = {("user_error", "crash: ValueError")}
"""Ends that are the same thing on both sides: a user who answers with nothing (after
retries) is a ``user_error`` in rods; τ²-bench's orchestrator raises on the empty message
(its ``run_tasks`` records a failed run, reward 0)."""


def play(script: Script) -> tuple[Outcome, Outcome]:
    """Both outcomes of ``script`` (rods', τ²-bench's)."""
    return run_rods(script), run_tau2(script)


def compare(ours: Outcome, theirs: Outcome) -> str | None:
    """None when two outcomes agree (reward, end and conversation), else what differs."""
    problems = []
    if ours.reward != theirs.reward:
        problems.append(f"reward rods {ours.reward} τ²-bench {theirs.reward}")
    ends = (ours.termination, theirs.termination)
    if ends[0] != ends[1] and ends not in EQUIVALENT_ENDS:
        problems.append(f"end rods {ends[0]} τ²-bench {ends[1]}")
    if theirs.trajectory and ours.trajectory != theirs.trajectory:
        at = next(
            (
                i
                for i, (a, b) in enumerate(zip(ours.trajectory, theirs.trajectory, strict=False))
                if a != b
            ),
            min(len(ours.trajectory), len(theirs.trajectory)),
        )
        a = ours.trajectory[at] if at < len(ours.trajectory) else None
        b = theirs.trajectory[at] if at < len(theirs.trajectory) else None
        problems.append(f"message {at}: rods {a!r:.300} τ²-bench {b!r:.300}")
    return "; ".join(problems) or None
