"""The suite's Hypothesis settings: no per-example deadline, since the suite runs in parallel
workers on loaded machines and a deadline there fails on timing, not on a property."""

from hypothesis import settings

settings.register_profile("agentswf-suite", deadline=None)
settings.load_profile("agentswf-suite")
