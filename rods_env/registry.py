"""Domain discovery through entry points, and Gymnasium registration.

Each installed rods domain declares an entry point in the group ``rods.domains`` (a
:class:`~rods_env.domain.Domain`); each benchmark brought in with its own environment and
scorer, one in ``rods.benchmarks`` (a :class:`~rods_env.benchmark.BenchmarkDomain`).
Importing :mod:`rods_env` registers ``rods/<Title>-v0`` for each of them without loading
the domain (it is loaded when an environment is made), so one broken domain never hides
the others and its own error surfaces unchanged when it is made.
"""

from __future__ import annotations

import difflib
from functools import cache
from importlib.metadata import EntryPoint, entry_points

import gymnasium as gym

from rods_env.benchmark import BenchmarkDomain
from rods_env.domain import Domain
from rods_env.errors import ConfigError, UnknownDomainError

ENTRY_POINT_GROUP = "rods.domains"
BENCHMARK_GROUP = "rods.benchmarks"

AnyDomain = Domain | BenchmarkDomain
"""A rods domain or a benchmark domain."""


def _entry_points(group: str = ENTRY_POINT_GROUP) -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=group)}


def _by_name(group: str) -> dict[str, EntryPoint]:
    """Entry points by lower-case name (an entry-point name may carry an id's capitals)."""
    return {name.lower(): ep for name, ep in _entry_points(group).items()}


def domain_names() -> list[str]:
    """Names of the installed rods domains (generated worlds, rods' rewards), sorted (lower
    case: an entry-point name with capitals is an id's title, ``BFCL-API``)."""
    return sorted(name.lower() for name in _entry_points())


def benchmark_names() -> list[str]:
    """Names of the installed benchmark domains (another benchmark's environment and
    scorer, e.g. ``tau2-airline``), sorted."""
    return sorted(_by_name(BENCHMARK_GROUP))


def env_id_for(name: str, version: int = 0) -> str:
    """The Gymnasium id of domain ``name``: an all-lower-case name is title-cased
    (``retail`` -> ``rods/Retail-v0``), a name with capitals keeps them
    (``BFCL-MultiTurn`` -> ``rods/BFCL-MultiTurn-v0``)."""
    title = name.title() if name == name.lower() else name
    return f"rods/{title}-v{version}"


@cache
def load_any_domain(name: str) -> AnyDomain:
    """Load the rods domain or benchmark domain called ``name`` (a name or an env id such
    as ``rods/Retail-v0`` or ``rods/Tau2-Airline-v0``).

    Raises:
        UnknownDomainError: with the installed names and a "did you mean".
    """
    name = domain_from_env_id(name) if "/" in name else name.lower()
    eps = {**_by_name(BENCHMARK_GROUP), **_by_name(ENTRY_POINT_GROUP)}
    if name not in eps:
        close = difflib.get_close_matches(name, list(eps), n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        raise UnknownDomainError(
            f"no domain named '{name}'.{hint} Installed: {', '.join(sorted(eps)) or 'none'}"
        )
    ep = eps[name]
    domain = ep.load()
    kind = Domain if ep.group == ENTRY_POINT_GROUP else BenchmarkDomain
    if not isinstance(domain, kind):
        raise UnknownDomainError(
            f"entry point '{name}' = {ep.value} is a {type(domain).__name__}, not a "
            f"{kind.__module__}.{kind.__name__}"
        )
    if domain.name != name:
        raise UnknownDomainError(f"entry point '{name}' loads a domain named '{domain.name}'")
    return domain


def load_domain(name: str) -> Domain:
    """Load the rods domain called ``name`` (a domain name or an env id such as
    ``rods/Retail-v0``).

    Raises:
        UnknownDomainError: with the installed names and a "did you mean".
        ConfigError: when ``name`` is a benchmark domain (no generated database, toolkit or
            skills: what needs those cannot run on it).
    """
    domain = load_any_domain(name)
    if isinstance(domain, BenchmarkDomain):
        raise ConfigError(
            f"{domain.name} is a benchmark domain (its own environment and scorer), not a "
            f"rods domain; this needs one of: {', '.join(domain_names()) or 'none'}"
        )
    return domain


def domain_from_env_id(env_id: str) -> str:
    """Domain name of an env id (``rods/Retail-v0`` or ``rods_env:rods/Retail-v0``)."""
    spec_id = env_id.split(":", 1)[-1]
    if not spec_id.startswith("rods/"):
        raise UnknownDomainError(
            f"'{env_id}' is not a rods environment id (expected rods/<Domain>-v<N>)"
        )
    return spec_id[len("rods/") :].rsplit("-v", 1)[0].lower()


def register_envs(*, benchmarks: bool = False) -> list[str]:
    """Register ``rods/<Title>-v0`` for every installed domain; returns the ids.

    Args:
        benchmarks: Register the benchmark domains (``rods.benchmarks``) instead of the
            rods domains.
    """
    ids = []
    for name in _entry_points(BENCHMARK_GROUP if benchmarks else ENTRY_POINT_GROUP):
        env_id = env_id_for(name)
        if env_id not in gym.registry:
            gym.register(
                id=env_id,
                entry_point="rods_env.env:make_env",
                kwargs={"domain": name},
            )
        ids.append(env_id)
    return ids
