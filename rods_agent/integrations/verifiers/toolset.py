"""The rods tools of one rollout as a verifiers ``Toolset`` (an MCP server per rollout).

verifiers launches this module (``python -m rods_agent.integrations.verifiers.toolset``) once
per rollout, hands it the rollout's task, and points the agent's chat loop at it. The server
holds that rollout's rods :class:`~.episode.Episode`: every environment tool with its rods
name, description and JSON schema unchanged, plus ``send_message_to_user``. Arguments reach
the environment as the model wrote them (no schema validation in between), so a malformed
call gets rods' own error observation, exactly as through ``gymnasium.make``.
"""

from __future__ import annotations

import functools
from typing import Any

import verifiers.v1 as vf
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools.base import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from pydantic import ConfigDict

from rods_agent.integrations.verifiers.episode import Episode


class RawArguments(ArgModelBase):
    """A tool's arguments passed through as sent: rods validates them itself."""

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

    def model_dump_one_level(self) -> dict[str, Any]:
        """The arguments as the model sent them."""
        return dict(self.model_extra or {})


class RodsToolset(vf.Toolset[vf.ToolsetConfig]):
    """One rollout's rods episode behind MCP tools (see the module docstring)."""

    TOOL_PREFIX = None  # rods' tool names, unprefixed

    def __init__(self, config: vf.ToolsetConfig) -> None:
        super().__init__(config)
        self.episode: Episode | None = None

    async def setup_task(self, task: Any) -> None:
        """Start the rollout's episode (``task`` is the rollout's :class:`RodsTaskData`)."""
        self.episode = Episode(task.env_id, tasks=task.pool, max_steps=task.max_steps)
        self.episode.reset(task.task_id)

    def register(self, mcp: MCPServer) -> None:
        """Register the episode's tools with their rods schemas."""
        if self.episode is None:
            raise RuntimeError("the rods toolset serves one rollout's task; it got none")
        for schema in self.episode.tools:
            function = schema["function"]
            call = functools.partial(self._call, function["name"])
            tool = Tool(
                fn=call,
                name=function["name"],
                description=function.get("description", ""),
                parameters=function.get("parameters") or {"type": "object", "properties": {}},
                fn_metadata=FuncMetadata(arg_model=RawArguments),
                is_async=True,
            )
            # MCPServer.add_tool derives a schema from a Python signature; rods' schemas are
            # served as they are, so the tool is registered whole.
            mcp._tool_manager._tools[tool.name] = tool

    async def _call(self, name: str, **arguments: Any) -> str:
        # on the server's event loop: a rollout's calls run one at a time, in arrival order
        assert self.episode is not None
        return self.episode.call(name, arguments)


if __name__ == "__main__":
    RodsToolset.run()
