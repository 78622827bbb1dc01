"""The typed wire contract of a served rods environment: action, observation and state.

OpenEnv keeps what crosses the wire typed (pydantic models published at ``GET /schema``); these
are the rods ones. One action model covers everything an agent does in a rods episode, told
apart by ``type``:

* ``call_tool`` -- one call of a rods tool (``tool_name``, ``arguments``), the same shape as
  OpenEnv's MCP ``CallToolAction``;
* ``message`` -- text for the simulated user (``content``), never read for tool calls;
* ``completion`` -- a model's raw completion text (``content``), read by the environment's own
  reading rule exactly as ``env.step(text)`` reads it (``<tool_call>`` blocks, ...);
* ``assistant`` -- an OpenAI-style assistant message (``message``), possibly with several
  ``tool_calls``: one environment step, as with ``env.step(message)``;
* ``list_tools`` -- the tools the agent may call now (OpenEnv's ``ListToolsAction``);
* ``end`` -- end the episode now, scored exactly as the environment's own step limit scores
  it (``truncate``): for a caller whose loop stopped on its own (TRL's, when the model
  answers without a tool call).
"""

from __future__ import annotations

from typing import Any, Literal

from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from rods_agent.integrations.openenv.limits import MAX_ID_CHARS

ActionType = Literal["call_tool", "message", "completion", "assistant", "list_tools", "end"]


class RodsAction(Action):
    """One agent action in a rods episode (see the module docstring for the kinds)."""

    type: ActionType = Field(default="call_tool", description="What kind of action this is")
    tool_name: str = Field(
        default="", max_length=MAX_ID_CHARS, description="call_tool: the rods tool to call"
    )
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="call_tool: the tool's arguments"
    )
    content: str = Field(
        default="", description="message: text for the user; completion: raw completion text"
    )
    message: dict[str, Any] | None = Field(
        default=None,
        description="assistant: an OpenAI-style assistant message (content and tool_calls)",
    )

    @model_validator(mode="after")
    def _fields_fit_the_type(self) -> RodsAction:
        # PydanticCustomError, not ValueError: the server sends a validation error's details
        # to the client as JSON, and a ValueError in them is not JSON (the session would end)
        if self.type == "call_tool" and not self.tool_name:
            raise PydanticCustomError("rods_action", "a call_tool action needs a tool_name")
        if self.type == "assistant" and self.message is None:
            raise PydanticCustomError(
                "rods_action", "an assistant action needs a message (an OpenAI assistant message)"
            )
        if self.type != "call_tool" and (self.tool_name or self.arguments):
            raise PydanticCustomError(
                "rods_action",
                "tool_name and arguments belong to call_tool, not {kind}",
                {"kind": self.type},
            )
        return self


class ResetArgs(BaseModel):
    """What a reset accepts, with strict types (``index: 1.5`` is refused, not read as 1)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    seed: int | None = Field(default=None, ge=0, lt=2**64, description="Seeds the task draw")
    episode_id: str | None = Field(
        default=None, max_length=MAX_ID_CHARS, description="The episode's id in state"
    )
    task_id: str | None = Field(
        default=None, min_length=1, max_length=MAX_ID_CHARS, description="A served task"
    )
    split: Literal["train", "test"] | None = Field(
        default=None, description="The split a draw or an index reads"
    )
    index: int | None = Field(default=None, ge=0, description="A position in split's tasks")


class RodsObservation(Observation):
    """What the agent sees after a reset or an action.

    ``reward`` is the step's increase of progress (an episode's rewards sum to its final
    progress), ``done`` is true when the episode ended (terminated or truncated).
    """

    text: str = Field(default="", description="The user's message or the tools' results")
    tools: list[dict[str, Any]] | None = Field(
        default=None,
        description="The tools' OpenAI function schemas (at reset, on list_tools, and when they change)",
    )
    policy: str | None = Field(default=None, description="The system prompt (at reset)")
    task_id: str = Field(default="", description="The episode's task")
    turn: int = Field(default=0, description="Index of the user turn in progress")
    n_turns: int = Field(default=0, description="User turns in the task")
    progress: float = Field(default=0.0, description="Share of user turns passed so far")
    success: bool = Field(default=False, description="Strict success (final at episode end)")
    termination: str | None = Field(default=None, description="Why the episode ended, if it did")
    truncated: bool = Field(default=False, description="Whether a step limit cut the episode")


class RodsState(State):
    """A session's episode as the server holds it (``GET /state``, WebSocket ``state``).

    ``step_count`` counts the session's ``step`` messages since the last reset (OpenEnv's
    contract, list_tools included); ``steps`` is the environment's own count of agent actions.
    """

    env_id: str = Field(default="", description="The rods environment id served")
    task_id: str = Field(default="", description="The episode's task ('' before a reset)")
    steps: int = Field(default=0, description="Agent actions the environment counted")
    turn: int = Field(default=0, description="Index of the user turn in progress")
    n_turns: int = Field(default=0, description="User turns in the task")
    progress: float = Field(default=0.0, description="Share of user turns passed")
    success: bool = Field(default=False, description="Strict success")
    done: bool = Field(default=False, description="Whether the episode ended")
    termination: str | None = Field(default=None, description="Why the episode ended")
    turn_results: list[dict[str, Any]] = Field(
        default_factory=list, description="Per closed turn: passed, and why not"
    )
    messages: list[dict[str, Any]] = Field(
        default_factory=list, description="The conversation so far (OpenAI format)"
    )
