"""The typed OpenEnv client of a served rods environment.

``RodsEnv`` is an OpenEnv :class:`EnvClient` over the server's WebSocket session: one client,
one episode at a time, its own environment instance on the server::

    from rods_agent.integrations.openenv import RodsEnv

    with RodsEnv(base_url="http://127.0.0.1:8000") as env:
        result = env.reset(task_id="retail-0001")
        print(result.observation.text, [t["function"]["name"] for t in result.observation.tools])
        result = env.call_tool("find_user_id_by_email", email="...")
        result = env.send_message("Could you confirm your zip code?")
        print(env.state().progress)

Async code awaits the same methods (``await env.reset()``).
"""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from rods_agent.integrations.openenv.models import RodsAction, RodsObservation, RodsState


class RodsEnv(EnvClient[RodsAction, RodsObservation, RodsState]):
    """Client of ``rods serve`` (see the module docstring)."""

    def _step_payload(self, action: RodsAction) -> dict[str, Any]:
        return action.model_dump(exclude_defaults=True) | {"type": action.type}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[RodsObservation]:
        observation = RodsObservation.model_validate(
            {
                **payload.get("observation", {}),
                "reward": payload.get("reward"),
                "done": payload.get("done", False),
            }
        )
        return StepResult(
            observation=observation,
            reward=payload.get("reward"),
            done=bool(payload.get("done", False)),
            metadata=payload.get("metadata"),
        )

    def _parse_state(self, payload: dict[str, Any]) -> RodsState:
        return RodsState.model_validate(payload)

    # -- one method per action kind ---------------------------------------------------------
    def call_tool(self, name: str, **arguments: Any) -> Any:
        """Call rods tool ``name``; the result's observation text is the tool's output."""
        return self.step(RodsAction(tool_name=name, arguments=arguments))

    def send_message(self, content: str) -> Any:
        """Say ``content`` to the simulated user; the observation text is the reply."""
        return self.step(RodsAction(type="message", content=content))

    def send_completion(self, text: str) -> Any:
        """Send a model's raw completion, read by the environment's own reading rule."""
        return self.step(RodsAction(type="completion", content=text))

    def send_assistant(self, message: dict[str, Any]) -> Any:
        """Send an OpenAI-style assistant message (several tool calls are one step)."""
        return self.step(RodsAction(type="assistant", message=message))

    def list_tools(self) -> Any:
        """The tools' OpenAI function schemas, in the observation's ``tools``."""
        return self.step(RodsAction(type="list_tools"))

    def end(self) -> Any:
        """End the episode now, scored as the environment's step limit scores it."""
        return self.step(RodsAction(type="end"))
