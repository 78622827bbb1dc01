"""Helpers shared by the domains' tool tests."""

from __future__ import annotations

from typing import Any

from rods_env.tools import Toolkit


def ok(tools: Toolkit, name: str, **args: Any) -> Any:
    """Call a tool that must succeed; return its value."""
    result = tools.call(name, args)
    assert result.ok, result.output
    return result.value


def fail(tools: Toolkit, name: str, error: str, *needles: str, **args: Any) -> str:
    """Call a tool that must be rejected with ``error``; the state must not change."""
    before = tools.db.fingerprint()
    result = tools.call(name, args)
    assert not result.ok, result.output
    assert result.error == error, result.output
    for needle in needles:
        assert needle in result.output, result.output
    assert tools.db.fingerprint() == before
    return result.output
