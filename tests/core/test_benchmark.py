"""The benchmark extension point: a family of environments with its own state and reward."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

import gymnasium as gym
import pytest

import rods_env
from rods_env import Benchmark, BenchmarkTask, resolve
from rods_env.errors import BenchmarkUnavailableError, ConfigError, UnknownDomainError
from rods_env.registry import (
    benchmark_name,
    load_domain,
    make_benchmark_env,
    register_benchmark,
)
from rods_env.spaces import UnicodeText


@dataclass(frozen=True)
class CoinTask:
    id: str
    skill: str = "flip"
    variant: str = "base"
    split: str | None = "test"
    signature: None = None
    domain: str = "coins"


class CoinEnv(gym.Env[str, str]):
    """Say 'heads' to pass."""

    def __init__(self, subset=None, max_steps=None, render_mode=None):
        self.subset = subset
        self.observation_space = UnicodeText(100)
        self.action_space = UnicodeText(100)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        task = (options or {}).get("task") or CoinTask("c0")
        self.task_id = task if isinstance(task, str) else task.id
        return "flip", self._info(False, None)

    def step(self, action):
        win = action == "heads"
        return "", float(win), True, False, self._info(win, "user_stop")

    def _info(self, win, end):
        return {"task_id": self.task_id, "progress": float(win), "success": win,
                "messages": [], "tools": [], "turn_results": [], "termination": end}  # fmt: skip


COINS = Benchmark(
    name="coins",
    title="Coins",
    env_ids={"rods/Coins-v0": None, "rods/Coins-Heads-v0": "heads"},
    make_env=CoinEnv,
    tasks=lambda subset, split: [CoinTask(f"c{i}") for i in range(3)],
    oracle=lambda task: type("Heads", (), {"act": lambda self, o, i: "heads"})(),
)


@pytest.fixture(autouse=True)
def _forget_coins():
    """Leave no toy benchmark behind for tests that iterate the registered ids."""
    yield
    from rods_env import registry

    registry._BENCHMARKS.pop("coins", None)
    for env_id in COINS.env_ids:
        registry._BENCHMARK_IDS.pop(env_id, None)
        gym.registry.pop(env_id, None)
        if env_id in registry.BENCHMARK_ENV_IDS:
            registry.BENCHMARK_ENV_IDS.remove(env_id)


def test_registering_a_benchmark_makes_its_ids_and_resolves_its_names():
    assert register_benchmark(COINS) == ["rods/Coins-v0", "rods/Coins-Heads-v0"]
    assert register_benchmark(COINS) == ["rods/Coins-v0", "rods/Coins-Heads-v0"]  # idempotent
    assert "rods/Coins-Heads-v0" in rods_env.BENCHMARK_ENV_IDS
    assert rods_env.BENCHMARK_ENV_IDS.count("rods/Coins-v0") == 1
    assert benchmark_name("rods/Coins-Heads-v0") == "coins"
    assert benchmark_name("rods/Retail-v0") is None
    env = gym.make("rods/Coins-Heads-v0").unwrapped
    assert isinstance(env, CoinEnv) and env.subset == "heads"
    assert COINS.subset_of("rods/Coins-Heads-v0") == "heads"
    assert COINS.env_id_of(None) == "rods/Coins-v0"
    with pytest.raises(ConfigError, match="not an environment of benchmark 'coins'"):
        COINS.subset_of("rods/Retail-v0")
    assert isinstance(CoinTask("x"), BenchmarkTask)
    assert isinstance(rods_env.load_domain("retail").seed_tasks()[0], BenchmarkTask)


def test_a_domain_resolves_as_before_and_a_benchmark_is_not_a_domain():
    assert resolve("retail").name == "retail"
    assert resolve("rods/Retail-v0").name == "retail"
    register_benchmark(COINS)
    with pytest.raises(
        UnknownDomainError, match="'rods/Coins-v0' is a benchmark, not a rods domain"
    ):
        load_domain("rods/Coins-v0")
    with pytest.raises(
        UnknownDomainError, match=r"no domain named 'retial'.*Did you mean 'retail'"
    ):
        resolve("retial")


def test_a_missing_package_is_one_line_naming_the_install():
    broken = Benchmark(
        name="coins",
        title="Coins",
        env_ids={},
        make_env=CoinEnv,
        tasks=lambda subset, split: [],
        oracle=lambda task: None,
        missing=lambda: "coin-pkg not installed (pip install coin-pkg)",
    )
    with pytest.raises(
        BenchmarkUnavailableError,
        match=r"^benchmark 'coins': coin-pkg not installed \(pip install coin-pkg\)$",
    ):
        broken.require()


def test_an_unknown_benchmark_id_is_an_error():
    with pytest.raises(UnknownDomainError, match="no benchmark named 'nope'"):
        make_benchmark_env("nope")


def test_installed_benchmarks_register_in_either_import_order():
    """A benchmark's spec module imports rods_env; importing it first must still register."""
    names = rods_env.benchmark_names()
    if not names:
        pytest.skip("no benchmark installed")
    from importlib.metadata import entry_points

    module = next(iter(entry_points(group="rods.benchmarks"))).module
    for first in (f"import {module}", "import rods_env"):
        code = f"{first}; import rods_env; print(len(rods_env.BENCHMARK_ENV_IDS))"
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr
        assert int(out.stdout) >= 1, (first, out.stdout, out.stderr)
        assert "not registered" not in out.stderr


def test_the_toy_benchmark_is_forgotten_between_tests():
    assert "rods/Coins-v0" not in rods_env.BENCHMARK_ENV_IDS
    assert "rods/Coins-v0" not in gym.registry
