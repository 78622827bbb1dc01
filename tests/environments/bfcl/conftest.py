from __future__ import annotations

import pytest

from environments.bfcl.apis import bfcl_missing
from tests.requires import require


@pytest.fixture(scope="session")
def bfcl():
    """Skip (or fail under RODS_REQUIRE_SETUP=1) without bfcl-eval installed."""
    require(bfcl_missing() is None, "bfcl-eval is not installed", "bash scripts/setup.sh bfcl")


@pytest.fixture(scope="session")
def tasks(bfcl):
    from environments.bfcl.tasks import load_tasks

    return load_tasks()


@pytest.fixture()
def env(bfcl):
    from environments.bfcl.env import BFCLEnv

    return BFCLEnv()
