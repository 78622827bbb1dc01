"""Domain and benchmark discovery through entry points, and Gymnasium registration.

Each installed domain declares an entry point in the group ``rods.domains``. Importing
:mod:`rods_env` registers ``rods/<Title>-v0`` for each of them without loading the domain
(it is loaded when an environment is made), so one broken domain never hides the others
and its own error surfaces unchanged when it is made.

Benchmarks (:mod:`rods_env.benchmark`: environment families with their own state and
reward) declare an entry point in the group ``rods.benchmarks``. Their light spec module is
loaded at import to register the ids it lists (one per subset); the benchmark's own
package is imported only when an environment is made. A spec that fails to load is logged
and skipped (its error surfaces unchanged from :func:`load_benchmark`).
"""

from __future__ import annotations

import difflib
import logging
import sys
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import gymnasium as gym

from rods_env.benchmark import Benchmark
from rods_env.domain import Domain
from rods_env.errors import UnknownDomainError

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "rods.domains"
BENCHMARK_GROUP = "rods.benchmarks"

_BENCHMARK_IDS: dict[str, str] = {}
"""Registered benchmark environment id -> benchmark name."""

_BENCHMARKS: dict[str, Benchmark] = {}
"""Registered (or loaded) benchmarks by name."""

BENCHMARK_ENV_IDS: list[str] = []
"""The registered benchmark environment ids, in registration order (kept up to date)."""


def _entry_points(group: str = ENTRY_POINT_GROUP) -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=group)}


def domain_names() -> list[str]:
    """Names of the installed domains, sorted."""
    return sorted(_entry_points())


def env_id_for(name: str, version: int = 0) -> str:
    """The Gymnasium id of domain ``name`` (``retail`` -> ``rods/Retail-v0``)."""
    return f"rods/{name.title()}-v{version}"


@cache
def load_domain(name: str) -> Domain:
    """Load the domain called ``name`` (a domain name or an env id such as ``rods/Retail-v0``).

    Raises:
        UnknownDomainError: with the installed names and a "did you mean".
    """
    if benchmark_name(name) is not None:
        raise UnknownDomainError(
            f"'{name}' is a benchmark, not a rods domain: `rods eval --env {name}` evaluates "
            "on it; training, synthesis and seed tasks need a domain "
            f"(installed: {', '.join(domain_names()) or 'none'})"
        )
    name = domain_from_env_id(name) if "/" in name else name.lower()
    eps = _entry_points()
    if name not in eps:
        close = difflib.get_close_matches(name, list(eps), n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        raise UnknownDomainError(
            f"no domain named '{name}'.{hint} Installed: {', '.join(sorted(eps)) or 'none'}"
        )
    domain = eps[name].load()
    if not isinstance(domain, Domain):
        raise UnknownDomainError(
            f"entry point '{name}' = {eps[name].value} is a {type(domain).__name__}, not a rods_env.Domain"
        )
    if domain.name != name:
        raise UnknownDomainError(f"entry point '{name}' loads a domain named '{domain.name}'")
    return domain


def domain_from_env_id(env_id: str) -> str:
    """Domain name of an env id (``rods/Retail-v0`` or ``rods_env:rods/Retail-v0``)."""
    spec_id = env_id.split(":", 1)[-1]
    if not spec_id.startswith("rods/"):
        raise UnknownDomainError(
            f"'{env_id}' is not a rods environment id (expected rods/<Domain>-v<N>)"
        )
    return spec_id[len("rods/") :].rsplit("-v", 1)[0].lower()


def make_env(domain: str, **kwargs: Any) -> Any:
    """Gymnasium entry point: build a :class:`rods_env.env.ToolEnv` for ``domain``."""
    from rods_env.env import ToolEnv

    return ToolEnv(load_domain(domain), **kwargs)


def benchmark_names() -> list[str]:
    """Names of the installed benchmarks, sorted."""
    return sorted(_entry_points(BENCHMARK_GROUP))


def benchmark_name(name: str) -> str | None:
    """The benchmark that ``name`` (a benchmark name or one of its environment ids) names,
    or None when it names none."""
    spec_id = name.split(":", 1)[-1]
    if spec_id in _BENCHMARK_IDS:
        return _BENCHMARK_IDS[spec_id]
    lowered = name.lower()
    if lowered in _BENCHMARKS or lowered in _entry_points(BENCHMARK_GROUP):
        return lowered
    return None


def load_benchmark(name: str) -> Benchmark:
    """Load the benchmark called ``name`` (its name, or one of its environment ids).

    Raises:
        UnknownDomainError: with the installed benchmarks and a "did you mean".
    """
    found = benchmark_name(name)
    if found is not None and found in _BENCHMARKS:
        return _BENCHMARKS[found]
    eps = _entry_points(BENCHMARK_GROUP)
    if found is None or found not in eps:
        close = difflib.get_close_matches(name.lower(), list(eps), n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        raise UnknownDomainError(
            f"no benchmark named '{name}'.{hint} Installed: {', '.join(sorted(eps)) or 'none'}"
        )
    benchmark = eps[found].load()
    if not isinstance(benchmark, Benchmark):
        raise UnknownDomainError(
            f"entry point '{found}' = {eps[found].value} is a {type(benchmark).__name__}, "
            "not a rods_env.Benchmark"
        )
    if benchmark.name != found:
        raise UnknownDomainError(
            f"entry point '{found}' loads a benchmark named '{benchmark.name}'"
        )
    _BENCHMARKS.setdefault(found, benchmark)
    return _BENCHMARKS[found]


def resolve(name: str) -> Domain | Benchmark:
    """What an ``--env`` value names: a domain or a benchmark (by name or environment id).

    Raises:
        UnknownDomainError: naming the installed domains and benchmarks.
    """
    if benchmark_name(name) is not None:
        return load_benchmark(name)
    try:
        return load_domain(name)
    except UnknownDomainError as exc:
        benchmarks = benchmark_names()
        if not benchmarks:
            raise
        raise UnknownDomainError(f"{exc}; benchmarks: {', '.join(benchmarks)}") from None


def make_benchmark_env(benchmark: str, subset: str | None = None, **kwargs: Any) -> Any:
    """Gymnasium entry point: an environment of ``benchmark`` serving ``subset``."""
    spec = load_benchmark(benchmark)
    spec.require()
    return spec.make_env(subset=subset, **kwargs)


def domain_env_ids() -> list[str]:
    """The environment ids of the installed domains."""
    return [env_id_for(name) for name in domain_names()]


def benchmark_env_ids() -> list[str]:
    """The environment ids registered for benchmarks."""
    return list(BENCHMARK_ENV_IDS)


def register_benchmark(benchmark: Benchmark) -> list[str]:
    """Register the environment ids of ``benchmark`` (idempotent); returns them.

    :func:`register_envs` calls it for every installed benchmark. A benchmark's spec module
    also calls it once ``BENCHMARK`` exists, for the import order in which the module is
    imported before :mod:`rods_env` (importing rods_env then finds the module half-imported
    and leaves the registration to it).
    """
    _BENCHMARKS.setdefault(benchmark.name, benchmark)
    for env_id, subset in benchmark.env_ids.items():
        if env_id not in gym.registry:
            gym.register(
                id=env_id,
                entry_point="rods_env.registry:make_benchmark_env",
                kwargs={"benchmark": benchmark.name, "subset": subset},
            )
        if env_id not in _BENCHMARK_IDS:
            _BENCHMARK_IDS[env_id] = benchmark.name
            BENCHMARK_ENV_IDS.append(env_id)
    return list(benchmark.env_ids)


def _importing(module: str) -> bool:
    """Whether ``module`` is being imported right now (it imported rods_env first)."""
    found = sys.modules.get(module)
    return found is not None and bool(getattr(found.__spec__, "_initializing", False))


def register_envs() -> list[str]:
    """Register ``rods/<Title>-v0`` for every installed domain and each environment id of
    every installed benchmark; returns the ids (domains first)."""
    ids = []
    for name in domain_names():
        env_id = env_id_for(name)
        if env_id not in gym.registry:
            gym.register(
                id=env_id,
                entry_point="rods_env.registry:make_env",
                kwargs={"domain": name},
            )
        ids.append(env_id)
    for name, ep in sorted(_entry_points(BENCHMARK_GROUP).items()):
        if _importing(ep.module):
            continue  # the spec module registers itself when it is done
        try:
            spec = ep.load()
            if not isinstance(spec, Benchmark):
                raise TypeError(f"{ep.value} is a {type(spec).__name__}, not a rods_env.Benchmark")
            ids += register_benchmark(spec)
        except Exception as exc:  # a broken benchmark never hides the rest
            log.warning(
                "benchmark '%s' (%s) not registered: %s: %s",
                name, ep.value, type(exc).__name__, exc,
            )  # fmt: skip
    return ids
