"""Hypothesis profiles for the robust-aggregation tests (applied per test, not loaded globally).

``DMLBENCH_ROBUST_PROFILE=robust-thorough`` runs many more examples; the default keeps the suite fast.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile(
    "robust-ci",
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
settings.register_profile(
    "robust-thorough",
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
