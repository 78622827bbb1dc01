"""Settings for the whole suite.

Hypothesis' timing checks (a 200 ms deadline per example, a health check on slow input
generation) measure the machine, not the code: on a shared 2-core machine a descheduled
process fails them at random. They are off; what a property test checks is unchanged.

Some test files also run inside other virtual environments (``.venv-vllm``,
``.venv-verifiers``) that do not install hypothesis; there this file has nothing to set.
"""

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # a venv without hypothesis runs no property tests
    pass
else:
    settings.register_profile("rods", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("rods")
