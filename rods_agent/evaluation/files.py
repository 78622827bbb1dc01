"""The files of an evaluation's run folder (``rods eval --out``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rods_agent.engines.base import Engine
from rods_env.user import ScenarioUser, UserSimulator

RESULTS = "results.jsonl"
EPISODES = "episodes.jsonl"
CONFIG = "config.json"
TASKS = "tasks.jsonl"
SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"
PASS_K_PNG = "pass_k.png"

IDENTITY_KEYS: tuple[str, ...] = (
    "env", "pool", "split", "engine", "model", "trials", "max_turns", "user", "user_model",
    "user_temperature", "verdicts",
)  # fmt: skip
"""Settings that make two runs different: a rerun into the same folder must match them."""

IDENTITY_DEFAULTS: Mapping[str, Any] = {"verdicts": "official"}
"""What a folder written before a setting existed ran with (its ``config.json`` lacks it)."""

UserFactory = Callable[[], "UserSimulator | ScenarioUser"]
"""Builds the user simulator of one environment (one per live episode slot)."""

EngineFactory = Callable[[], Engine]
"""Builds an engine; :func:`evaluate` calls it only when some trial is left to run."""
