"""Settings for the whole suite.

Hypothesis' timing checks (a 200 ms deadline per example, a health check on slow input
generation) measure the machine, not the code: on a shared 2-core machine a descheduled
process fails them at random. They are off; what a property test checks is unchanged.

Some test files also run inside other virtual environments (``.venv-vllm``,
``.venv-verifiers``) that do not install hypothesis; there this file has nothing to set.

Each test leaves rods' loggers as it found them, so no test depends on which ran before it
in its worker (``pytest -n auto`` runs modules in any order).
"""

import logging
from collections.abc import Iterator

import pytest

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # a venv without hypothesis runs no property tests
    pass
else:
    settings.register_profile("rods", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("rods")


@pytest.fixture(autouse=True)
def _rods_loggers_as_they_were() -> Iterator[None]:
    """Undo what an in-process ``rods_agent.cli.main`` does to rods' loggers (its stderr
    handler, ``propagate = False``: once per process for the console script), so a later
    test's ``caplog`` sees their records whichever test ran before it in the same worker."""
    from rods_agent.cli import LOGGERS

    loggers = [logging.getLogger(name) for name in LOGGERS]
    saved = [(lg, list(lg.handlers), lg.level, lg.propagate) for lg in loggers]
    yield
    for logger, handlers, level, propagate in saved:
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate
