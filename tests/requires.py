"""Test assets that a setup script installs (``bash scripts/setup.sh tests``).

Some tests need more than the Python packages of ``.[dev]``: the separate vLLM environment,
real tokenizers and chat templates, benchmark packages, a browser. On a developer's checkout
without them such a test skips and says which script installs the asset; ``.ci/run`` sets
``RODS_REQUIRE_SETUP=1``, and there a missing asset fails the test instead, so CI cannot
pass without exercising it.
"""

from __future__ import annotations

import os

import pytest

REQUIRED = os.environ.get("RODS_REQUIRE_SETUP") == "1" or os.environ.get("RODS_REQUIRE_VLLM") == "1"


def require(available: bool, what: str, how: str) -> None:
    """Skip (or, under ``RODS_REQUIRE_SETUP=1``, fail) unless ``available``.

    Args:
        available: Whether the asset is there.
        what: What is missing, e.g. ``"no vLLM environment at .venv-vllm"``.
        how: The command that installs it, e.g. ``"bash scripts/setup.sh vllm"``.
    """
    if available:
        return
    message = f"{what}: run `{how}` to install it"
    if REQUIRED:
        pytest.fail(message + " (RODS_REQUIRE_SETUP=1)")
    pytest.skip(message + " (CI does)")
