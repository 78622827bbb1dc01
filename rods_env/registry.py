"""Domain discovery through entry points, and Gymnasium registration.

Each installed domain declares an entry point in the group ``rods.domains``. Importing
:mod:`rods_env` registers ``rods/<Title>-v0`` for each of them without loading the domain
(it is loaded when an environment is made), so one broken domain never hides the others
and its own error surfaces unchanged when it is made.
"""

from __future__ import annotations

import difflib
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import gymnasium as gym

from rods_env.domain import Domain
from rods_env.errors import UnknownDomainError

ENTRY_POINT_GROUP = "rods.domains"


def _entry_points() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


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


def register_envs() -> list[str]:
    """Register ``rods/<Title>-v0`` for every installed domain; returns the ids."""
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
    return ids
