"""Shared test configuration: hypothesis profiles.

``ci`` (the default) is derandomized with bounded examples so the suite is reproducible and
fits the CI budget; ``dev`` explores more (``HYPOTHESIS_PROFILE=dev pytest``).
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", derandomize=True, max_examples=12, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "dev", max_examples=100, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
