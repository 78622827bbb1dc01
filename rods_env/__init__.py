"""rods_env: stateful, executable mock-API environments for multi-turn tool-use agents.

Importing this package registers ``rods/<Domain>-v0`` for every installed domain, and the
environment ids of every installed benchmark (:mod:`rods_env.benchmark`)::

    import gymnasium, rods_env
    env = gymnasium.make("rods/Retail-v0")
"""

from rods_env.benchmark import Benchmark, BenchmarkTask
from rods_env.database import DELETED, Database, Record
from rods_env.domain import Domain, Draft, Skill, SkillUnavailable
from rods_env.env import ToolEnv, render_messages
from rods_env.errors import (
    BenchmarkUnavailableError,
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
    BENCHMARK_ENV_IDS,
    benchmark_names,
    domain_env_ids,
    domain_names,
    load_benchmark,
    load_domain,
    register_benchmark,
    register_envs,
    resolve,
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
from rods_env.user import ScriptedUser, TurnView, UserReply, UserSimulator

__version__ = "0.1.0"

register_envs()

ENV_IDS: list[str] = domain_env_ids()
"""The environment ids of the installed domains (``rods/<Domain>-v0``), registered at import."""

# BENCHMARK_ENV_IDS (from rods_env.registry): the environment ids of the installed
# benchmarks (rods_env.benchmark), registered at import; the list is kept up to date.

__all__ = [
    "BENCHMARK_ENV_IDS",
    "DELETED",
    "ENV_IDS",
    "Benchmark",
    "BenchmarkTask",
    "BenchmarkUnavailableError",
    "ConfigError",
    "Database",
    "Domain",
    "Draft",
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
    "load_benchmark",
    "load_domain",
    "load_tasks",
    "mentions",
    "register_benchmark",
    "register_envs",
    "render_messages",
    "replay_gold",
    "resolve",
    "run_episode",
    "tool",
]
