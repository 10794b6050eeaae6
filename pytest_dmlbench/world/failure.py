"""Turning every rank's report of a case into one readable failure message."""

from __future__ import annotations

import re

from pytest_dmlbench.world.agreement import UNMATCHED_ADVICE, describe_outcome, mixed_outcomes, rank_list
from pytest_dmlbench.world.outcome import CaseOutcome, RankReport

_RANK_LOOP_MARKER = "pytest_dmlbench/world/rank.py"


def trim_stack(stack: str) -> str:
    """A faulthandler dump cut below the case body (the rank's own loop and the forked pytest frames)."""
    kept = []
    for line in stack.splitlines():
        if _RANK_LOOP_MARKER in line.replace("\\", "/"):
            break
        if line.strip():
            kept.append(re.sub(r"0x[0-9a-f]+", "0x...", line))
    return "\n".join(kept)


def _stack_lines(stack: str) -> str:
    trimmed = trim_stack(stack)
    return "\n".join("    " + line for line in trimmed.splitlines()) if trimmed else "    (no Python stack was dumped)"


def _describe(report: RankReport, run: CaseOutcome, first_failure: str | None) -> str:
    rank = report.rank
    if report.died is not None:
        return f"[rank {rank}] died: {report.died}"
    if report.stuck:
        if run.timed_out:
            why = f"still running at the {run.timeout_s:g} s timeout"
        else:
            why = f"still waiting (most likely in a collective) after {first_failure}"
        return f"[rank {rank}] {why}; its stack:\n{_stack_lines(report.stack)}"
    outcome = report.outcome
    assert outcome is not None
    if outcome.status == "failed":
        return f"[rank {rank}] failed:\n{outcome.traceback.rstrip() or outcome.message}"
    if outcome.status in ("skipped", "not_judged"):
        return f"[rank {rank}] {outcome.status.replace('_', ' ')}: {outcome.message}"
    return f"[rank {rank}] {outcome.status}"


def _group_by_stack(reports: list[RankReport]) -> list[list[RankReport]]:
    groups: dict[str, list[RankReport]] = {}
    for report in reports:
        groups.setdefault(trim_stack(report.stack), []).append(report)
    return list(groups.values())


def _describe_stuck_group(group: list[RankReport], run: CaseOutcome, first_failure: str | None) -> str:
    if len(group) == 1:
        return _describe(group[0], run, first_failure)
    ranks = rank_list([r.rank for r in group])
    why = (f"still running at the {run.timeout_s:g} s timeout" if run.timed_out
           else f"still waiting (most likely in a collective) after {first_failure}")
    return f"[ranks {ranks}] {why}; their stack (the same on each):\n{_stack_lines(group[0].stack)}"


def failure_text(run: CaseOutcome, world_size: int, backend: str) -> str:
    """The failure report: a headline, then one block per rank that did not pass, failures first."""
    failed = [r for r in run.ranks if r.outcome is not None and r.outcome.status == "failed"]
    died = [r for r in run.ranks if r.died is not None]
    stuck = [r for r in run.ranks if r.stuck and r.died is None]
    if run.timed_out and not failed and not died:
        headline = (
            f"distributed case timed out after {run.timeout_s:g} s on {world_size} rank(s) ({backend}); "
            f"rank(s) {rank_list([r.rank for r in stuck])} still running. Raise the limit with "
            "@pytest.mark.dmlbench(timeout=...) or --dmlbench-timeout if the case is just slow."
        )
    else:
        parts = []
        if failed:
            parts.append(f"failed on rank(s) {rank_list([r.rank for r in failed])}")
        if died:
            parts.append("; ".join(f"rank {r.rank} died ({r.died})" for r in died))
        if parts:
            headline = f"distributed case {' and '.join(parts)} of {world_size} ({backend})"
        elif run.unmatched:
            headline = f"distributed case on {world_size} rank(s) ({backend}): {run.unmatched}"
        else:
            headline = f"distributed case: the ranks of {world_size} ({backend}) reached different outcomes"
    first = None
    if died:
        first = f"rank {died[0].rank} died"
    elif failed:
        first = f"rank {failed[0].rank} failed"
    blocks = [_describe(r, run, first) for r in died + failed]
    blocks.extend(_describe_stuck_group(group, run, first) for group in _group_by_stack(stuck))
    notes = agreement_notes(run, headline)
    tail = "the world was torn down and will be restarted for the next case" if run.world_broken else ""
    return "\n\n".join([headline, *blocks, *notes, *([tail] if tail else [])])


def agreement_notes(run: CaseOutcome, headline: str) -> list[str]:
    """Each rank's outcome when they differ, the unmatched collectives, and why the world is rebuilt."""
    notes = []
    mixed = mixed_outcomes([
        (r.rank, "died" if r.died else "stuck" if r.stuck or r.outcome is None else r.outcome.status,
         describe_outcome(r.outcome, r.died, r.stuck))
        for r in run.ranks
    ])
    if mixed:
        notes.append(mixed)
    if run.unmatched:
        notes.append(("" if run.unmatched in headline else run.unmatched + ". ") + UNMATCHED_ADVICE)
    if run.rebuilt_because:
        notes.append(f"the world is rebuilt because {run.rebuilt_because}")
    return notes
