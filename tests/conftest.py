"""Settings for the whole suite.

Hypothesis' timing checks (a 200 ms deadline per example, a health check on slow input
generation) measure the machine, not the code: on a shared 2-core machine a descheduled
process fails them at random. They are off; what a property test checks is unchanged.
"""

from hypothesis import HealthCheck, settings

settings.register_profile("rods", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("rods")
