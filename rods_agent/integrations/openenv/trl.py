"""TRL's ``environment_factory`` over a served rods environment (the OpenEnv client).

``openenv_environment_factory(url)`` returns a class for
``GRPOTrainer(environment_factory=...)``: each instance holds one WebSocket session of the
server (its own episode there), and TRL sees what it reserves and expects:

* ``reset(**row)`` starts the row's task (``task_id`` column; other columns are ignored) and
  returns the user's first message;
* one method per rods tool, generated from the tool's JSON schema as the server lists it
  (typed arguments, a Google docstring with the schema's descriptions), which runs the call
  in the served episode and returns its output;
* ``send_message_to_user(message)``: the simulated user is reached through a tool, because
  TRL's loop ends when the model answers without a tool call;
* ``get_reward()``: final progress (or strict success), after ending an episode still open
  exactly as the environment's own step limit would (an ``end`` action).

Several environments in one run: pass TRL a dict of these classes keyed by the dataset's
``environment`` column (``{"retail": openenv_environment_factory(url_a), "airline": ...}``);
TRL routes each row to its class and does not pass the column to ``reset``.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Literal

from rods_agent.integrations.openenv.client import RodsEnv
from rods_env.errors import ConfigError

SEND_MESSAGE = "send_message_to_user"
RESERVED = frozenset({"reset", "get_reward", SEND_MESSAGE})
JSON_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "object": dict,
}


def python_type(schema: Mapping[str, Any]) -> Any:
    """The type hint from which ``transformers.utils.get_json_schema`` gives back ``schema``
    as far as it can (enums, arrays of items, unions; nested objects stay ``dict``)."""
    if schema.get("enum"):
        return Literal.__getitem__(tuple(schema["enum"]))
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [python_type(s) for s in schema[key] if s.get("type") != "null"]
            return typing.Union[tuple(options)] if options else Any  # noqa: UP007
    kind = schema.get("type")
    if isinstance(kind, list):
        options = [python_type({"type": k}) for k in kind if k != "null"]
        return typing.Union[tuple(options)] if options else Any  # noqa: UP007
    if kind == "array":
        return list.__class_getitem__(python_type(schema["items"])) if schema.get("items") else list
    return JSON_TYPES.get(str(kind), Any)


def tool_method(function: Mapping[str, Any]) -> Any:
    """A method that calls the served tool ``function`` (an OpenAI function schema)."""
    name = str(function["name"])
    parameters = function.get("parameters") or {}
    properties: Mapping[str, Any] = parameters.get("properties") or {}
    required = set(parameters.get("required") or ())

    def call_tool(self: RodsOpenEnvEnvironment, **arguments: Any) -> str:
        sent = {k: v for k, v in arguments.items() if k in required or v is not None}
        return self._act(self.client.call_tool(name, **sent))

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    hints: dict[str, Any] = {}
    for arg, schema in properties.items():
        hint = python_type(schema)
        if arg in required:
            params.append(inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, annotation=hint))
        else:
            hint = hint | None
            params.append(
                inspect.Parameter(
                    arg, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=hint
                )
            )
        hints[arg] = hint
    call_tool.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    call_tool.__annotations__ = hints
    call_tool.__name__ = name
    call_tool.__qualname__ = f"RodsOpenEnvEnvironment.{name}"
    lines = [str(function.get("description") or name)]
    if properties:
        lines += ["", "Args:"]
        lines += [
            f"    {arg}: {' '.join(str(schema.get('description') or arg).split())}"
            for arg, schema in properties.items()
        ]
    call_tool.__doc__ = "\n".join(lines) + "\n"
    return call_tool


class RodsOpenEnvEnvironment:
    """One TRL rollout slot on a served rods environment (base of the generated classes)."""

    base_url: ClassVar[str]
    reward_kind: ClassVar[Literal["progress", "success"]] = "progress"

    def __init__(self) -> None:
        self.client = RodsEnv(base_url=self.base_url)
        self._done = False
        self._reward: float | None = None

    def reset(self, task_id: str | None = None, **row: Any) -> str:
        """Start the row's task on the server; returns the user's first message.

        Args:
            task_id: The task to play (None: the server draws one).
            **row: The dataset row's other columns (ignored).
        """
        result = self.client.reset(task_id=task_id)
        self._done = bool(result.done)
        self._reward = None
        return str(result.observation.text)

    def send_message_to_user(self, message: str) -> str:
        """Send a message to the user and return the user's reply.

        Args:
            message: What to tell or ask the user: a question, a request for confirmation, or the answer to their request.
        """
        if not isinstance(message, str):
            return f"Error: 'message' must be a string, got {type(message).__name__}."
        return self._act(self.client.send_message(message))

    def get_reward(self) -> float:
        """The episode's reward: final progress, or 1.0/0.0 for strict success."""
        if self._reward is None:
            if not self._done:
                self.client.end()
                self._done = True
            state = self.client.state()
            self._reward = (
                float(state.progress) if self.reward_kind == "progress" else float(state.success)
            )
        return self._reward

    def _act(self, result: Any) -> str:
        if self._done:
            return "The conversation has ended; no further action is possible."
        self._done = bool(result.done)
        return str(result.observation.text)


def openenv_environment_factory(
    base_url: str,
    *,
    reward: Literal["progress", "success"] = "progress",
    probe_tasks: Iterable[str | None] = (None,),
) -> type[RodsOpenEnvEnvironment]:
    """The TRL environment class of the rods environment served at ``base_url``.

    Args:
        base_url: The server (``rods serve ENV_ID --port N``), e.g. ``http://127.0.0.1:8000``.
        reward: ``"progress"`` (share of user turns passed) or ``"success"`` (strict).
        probe_tasks: Tasks reset once to read their tools; the class gets every tool seen
            (an environment whose tools vary by task, such as BFCL's, needs its dataset's
            task ids here). A tool absent from an episode gets rods' unknown-tool reply.

    Raises:
        ConfigError: an unknown reward kind, or a served tool named like a method TRL reserves.
    """
    if reward not in ("progress", "success"):
        raise ConfigError(f"reward must be 'progress' or 'success', got {reward!r}")
    functions: dict[str, Mapping[str, Any]] = {}
    with RodsEnv(base_url=base_url) as probe:
        env_id = str(probe.state().env_id)
        for task in probe_tasks:
            observation = probe.reset(task_id=task).observation
            for tool in observation.tools or ():
                functions.setdefault(tool["function"]["name"], tool["function"])
    clash = RESERVED & set(functions)
    if clash:
        raise ConfigError(f"{env_id} has tools named {sorted(clash)}, which TRL's loop reserves")
    namespace: dict[str, Any] = {
        "__module__": __name__,
        "__doc__": f"{env_id} served at {base_url}, for TRL (one method per tool).",
        "base_url": base_url,
        "reward_kind": reward,
    }
    for name, function in sorted(functions.items()):
        namespace[name] = tool_method(function)
    title = env_id.split("/", 1)[-1].rsplit("-v", 1)[0].replace("-", "")
    return type(f"{title}OpenEnvEnvironment", (RodsOpenEnvEnvironment,), namespace)
