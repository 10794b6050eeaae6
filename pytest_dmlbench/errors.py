"""Every exception a user may meet or catch, and the warnings the plugin gives (all pickle cleanly, so ranks
and the parent share them). Internal signals between parts (a broken side channel, a failed block) stay
beside the code that raises and catches them.
"""

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


class CaseThresholdsWarning(UserWarning):
    """The per-case thresholds file lists none of the run's cases (``--dmlbench-case-thresholds``)."""


class WorldRebuiltWarning(UserWarning):
    """A case left its world unusable (destroyed or replaced the default group, or state that cannot be
    restored); the world was rebuilt and the case is named."""


# raised by pytest_dmlbench.plots.figure
class PlotsUnavailable(DmlbenchError):
    """matplotlib is not installed."""


# raised by pytest_dmlbench.projection.analysis
class ProjectionError(DmlbenchError):
    """The results cannot be projected (nothing to calibrate on, nothing to project); says what to run."""


# raised by pytest_dmlbench.world.scripts
class ScriptFailed(AssertionError):
    """A script run by :func:`run_script` exited with a status other than 0."""


# raised by pytest_dmlbench.world.failure
class DistributedCaseFailed(Exception):
    """Raised in the parent when a case failed on some rank; its text is the whole report."""


# raised by pytest_dmlbench.world.adopt_group
class GroupMismatch(ValueError):
    """``init_process_group`` inside a case asked for a group the case's world is not."""


# raised by pytest_dmlbench.measure.torch_patches
class PatchConflict(DmlbenchError):
    """A patch of ``torch.distributed`` cannot be taken off without dropping what replaced it since (or a later
    patch of the same attribute); the message names both and the fix."""


# raised by pytest_dmlbench.world.engine
class CaseNotRunnable(Exception):
    """The case could not be sent to the ranks (not collected, unsendable fixture, world not started);
    the message says why and what to do."""


# raised by pytest_dmlbench.gates.paired.worktree
class RefError(Exception):
    """REF cannot be used; the message names the problem and the fix."""


# raised by pytest_dmlbench.experiments.loading
class ExperimentFileError(Exception):
    """An experiment file that cannot be run; the message says where and how to fix it."""


# raised by pytest_dmlbench.drift.history
class HistoryError(DmlbenchError):
    """A history folder or night file that cannot be used; the message names it and the fix."""


# raised by pytest_dmlbench.data.cifar
class DataError(DmlbenchError):
    """A data set that is missing or unreadable; the message names the file and the fix."""


# raised by pytest_dmlbench.sweeps.maxbatch
class BatchSearchError(DmlbenchError):
    """Not even the smallest batch fits, or the memory cannot be measured here."""


# raised by pytest_dmlbench.measure.collective_bench
class CollectiveCheckFailed(AssertionError):
    """A collective returned wrong data in the untimed correctness call."""


# raised by pytest_dmlbench.pytest_internals
class PytestInternalsChanged(DmlbenchError):
    """The installed pytest lacks a private name the plugin reads; says which, and the pytest to install."""
