"""rods_env: stateful, executable mock-API environments for multi-turn tool-use agents.

Importing this package registers ``rods/<Domain>-v0`` for every installed domain, rods'
own and the benchmarks brought in with their own environment and scorer::

    import gymnasium, rods_env
    env = gymnasium.make("rods/Retail-v0")
    env = gymnasium.make("rods/Tau2-Airline-v0")  # τ²-bench (bash scripts/setup.sh tau2)
"""

from rods_env.benchmark import BenchmarkDomain
from rods_env.database import DELETED, Database, Record
from rods_env.domain import Domain, Draft, Skill, SkillUnavailable, TurnRules
from rods_env.env import ToolEnv, render_messages
from rods_env.episode import CallReply, EpisodeEnv
from rods_env.errors import (
    ConfigError,
    InvalidArgumentError,
    NotFoundError,
    ParseError,
    RodsError,
    RuleViolationError,
    TaskFileError,
    ToolError,
    UnknownDomainError,
    UnknownToolError,
)
from rods_env.gold import Gold, GoldError, replay_gold
from rods_env.oracle import OracleAgent, RandomToolAgent, TalkOnlyAgent, run_episode
from rods_env.registry import (
    benchmark_names,
    domain_names,
    load_any_domain,
    load_domain,
    register_envs,
)
from rods_env.rewards import TurnResult, mentions
from rods_env.signature import compute_signature
from rods_env.task import (
    Provenance,
    Signature,
    Task,
    ToolCall,
    Turn,
    UserProfile,
    dump_tasks,
    load_tasks,
)
from rods_env.tools import Toolkit, ToolResult, tool
from rods_env.user import (
    ScenarioUser,
    ScriptedUser,
    TurnTakingUser,
    TurnView,
    UserReply,
    UserSimulator,
)

__version__ = "0.1.0"

ENV_IDS: list[str] = register_envs()
"""The ids of the rods domains' environments, registered at import."""

BENCHMARK_ENV_IDS: list[str] = register_envs(benchmarks=True)
"""The ids of the benchmark domains' environments (e.g. ``rods/Tau2-Airline-v0``),
registered at import."""

__all__ = [
    "BENCHMARK_ENV_IDS",
    "DELETED",
    "ENV_IDS",
    "BenchmarkDomain",
    "CallReply",
    "ConfigError",
    "Database",
    "Domain",
    "Draft",
    "EpisodeEnv",
    "Gold",
    "GoldError",
    "InvalidArgumentError",
    "NotFoundError",
    "OracleAgent",
    "ParseError",
    "Provenance",
    "RandomToolAgent",
    "Record",
    "RodsError",
    "RuleViolationError",
    "ScenarioUser",
    "ScriptedUser",
    "Signature",
    "Skill",
    "SkillUnavailable",
    "TalkOnlyAgent",
    "Task",
    "TaskFileError",
    "ToolCall",
    "ToolEnv",
    "ToolError",
    "ToolResult",
    "Toolkit",
    "Turn",
    "TurnResult",
    "TurnRules",
    "TurnTakingUser",
    "TurnView",
    "UnknownDomainError",
    "UnknownToolError",
    "UserProfile",
    "UserReply",
    "UserSimulator",
    "benchmark_names",
    "compute_signature",
    "domain_names",
    "dump_tasks",
    "load_any_domain",
    "load_domain",
    "load_tasks",
    "mentions",
    "register_envs",
    "render_messages",
    "replay_gold",
    "run_episode",
    "tool",
]
