"""Benchmark domains: registered like rods domains, made through the registry, kept apart
from what needs a rods domain."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import gymnasium as gym
import pytest

from rods_env import registry
from rods_env.benchmark import BenchmarkDomain
from rods_env.errors import BenchmarkUnavailableError, ConfigError, UnknownDomainError
from rods_env.oracle import run_episode
from tests.core.toy_benchmark import TOY_BENCH, ToyBenchEnv, install, uninstall


@pytest.fixture
def toy_installed(monkeypatch):
    """The toy benchmark installed under ``rods.benchmarks``."""
    yield install(monkeypatch)
    uninstall()


def test_a_benchmark_registers_as_rods_env_id_and_makes_its_own_environment(toy_installed):
    assert "rods/Toy-Bench-v0" in toy_installed
    assert "toy-bench" in registry.benchmark_names()
    assert "toy-bench" not in registry.domain_names()  # rods domains stay rods domains
    env = gym.make("rods/Toy-Bench-v0").unwrapped
    assert isinstance(env, ToyBenchEnv)
    assert registry.load_any_domain("rods/Toy-Bench-v0") is TOY_BENCH
    task = TOY_BENCH.seed_tasks("train")[1]
    out = run_episode(env, TOY_BENCH.oracle_agent(task), task=task)
    assert out["success"] and out["termination"] == "user_stop"


def test_what_needs_a_rods_domain_refuses_a_benchmark_in_one_line(toy_installed):
    with pytest.raises(
        ConfigError, match=r"toy-bench is a benchmark domain.*needs one of: airline"
    ):
        registry.load_domain("toy-bench")
    with pytest.raises(UnknownDomainError, match="Did you mean 'toy-bench'"):
        registry.load_any_domain("toy-bnech")


def test_an_entry_point_of_the_wrong_kind_is_named(monkeypatch):
    real = registry._entry_points

    def entry_points(group: str = registry.ENTRY_POINT_GROUP) -> dict[str, EntryPoint]:
        found = dict(real(group))
        if group == registry.BENCHMARK_GROUP:  # a rods Domain declared as a benchmark
            found["toy"] = EntryPoint("toy", "tests.core.toy_domain:TOY", group)
        return found

    monkeypatch.setattr(registry, "_entry_points", entry_points)
    registry.load_any_domain.cache_clear()
    try:
        with pytest.raises(UnknownDomainError, match=r"is a Domain, not a rods_env\.benchmark"):
            registry.load_any_domain("toy")
    finally:
        registry.load_any_domain.cache_clear()


def test_training_takes_the_train_split_only_and_drops_exploitable_tasks():
    train = TOY_BENCH.training_tasks()
    assert [t.id for t in train] == ["toy-bench:1", "toy-bench:2", "toy-bench:3"]
    assert "toy-bench:0" in {t.id for t in TOY_BENCH.training_tasks(keep_exploitable=True)}
    with pytest.raises(ConfigError, match="train split only, not 'test'"):
        TOY_BENCH.training_tasks("test")
    with pytest.raises(ConfigError, match="toy-bench:4, a test task"):
        TOY_BENCH.check_training_pool(TOY_BENCH.seed_tasks())
    TOY_BENCH.check_training_pool(train)


def test_the_abstract_class_names_what_a_benchmark_must_give():
    missing = BenchmarkDomain.__abstractmethods__
    assert {
        "seed_tasks",
        "make_env",
        "check_tasks",
        "oracle_agent",
        "policy",
        "tool_schemas",
    } == missing


class _Unavailable(type(TOY_BENCH)):  # type: ignore[misc]
    """The toy benchmark as if its package were missing."""

    name = "toy-bench-sub"
    title = "Toy-Bench-Sub"

    def missing(self) -> str | None:
        return "toy-bench-pkg is not installed: bash scripts/setup.sh toy"


UNAVAILABLE = _Unavailable()


def test_an_entry_point_name_with_capitals_is_the_id_and_a_missing_package_is_one_line(
    monkeypatch,
):
    real = registry._entry_points

    def entry_points(group: str = registry.ENTRY_POINT_GROUP) -> dict[str, EntryPoint]:
        found = dict(real(group))
        if group == registry.BENCHMARK_GROUP:  # one entry point per subset, id's case kept
            found["Toy-Bench-Sub"] = EntryPoint(
                "Toy-Bench-Sub", "tests.core.test_benchmark:UNAVAILABLE", group
            )
        return found

    monkeypatch.setattr(registry, "_entry_points", entry_points)
    registry.load_any_domain.cache_clear()
    try:
        assert "rods/Toy-Bench-Sub-v0" in registry.register_envs(benchmarks=True)
        assert registry.env_id_for("tau2-airline") == "rods/Tau2-Airline-v0"
        assert registry.load_any_domain("rods/Toy-Bench-Sub-v0") is UNAVAILABLE
        assert "toy-bench-sub" in registry.benchmark_names()
        with pytest.raises(BenchmarkUnavailableError) as err:
            gym.make("rods/Toy-Bench-Sub-v0")
        assert str(err.value) == (
            "benchmark 'toy-bench-sub': toy-bench-pkg is not installed: bash scripts/setup.sh toy"
        )
        assert TOY_BENCH.scores({"toy-bench:1": [True]}) == {}  # nothing beyond pass^k
    finally:
        registry.load_any_domain.cache_clear()
        gym.registry.pop("rods/Toy-Bench-Sub-v0", None)
