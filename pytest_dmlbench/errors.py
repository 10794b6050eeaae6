"""Exceptions shared by the parent process and the ranks (all pickle cleanly)."""

from __future__ import annotations


class DmlbenchError(Exception):
    """Base class of every error the plugin raises on purpose."""


class ConfigError(DmlbenchError):
    """A bad option or marker value; the message names the value and the accepted form."""


class BaselineError(DmlbenchError):
    """A baseline file that cannot be used (corrupt, truncated, wrong schema); names the file and the fix."""


class WorldError(DmlbenchError):
    """A rank world that could not be started or has broken down."""


class NotJudged(DmlbenchError):
    """Raised by a validation that could not judge its target in this run (its measurement too uncertain
    to tell a pass from a miss). The item is reported as not judged: skipped with the reason, listed and
    counted in the summary, failed under ``--dmlbench-fail-on-inconclusive``; never a silent pass."""


class BaselineWarning(UserWarning):
    """Something about the stored baselines the user should know but that does not fail the run."""


class WorldRebuiltWarning(UserWarning):
    """A case left its world unusable (destroyed or replaced the default group, or state that cannot be
    restored); the world was rebuilt and the case is named."""
