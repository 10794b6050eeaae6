"""Turning every rank's report of a case into one readable failure message."""

from __future__ import annotations

import re
from collections.abc import Callable

from pytest_dmlbench.world.agreement import UNMATCHED_ADVICE, describe_outcome, mixed_outcomes
from pytest_dmlbench.world.hang import BELOW_THE_BODY, place_of
from pytest_dmlbench.world.outcome import CaseOutcome, RankReport
from pytest_dmlbench.world.rank_names import rank_list


def trim_stack(stack: str) -> str:
    """A faulthandler dump cut below the case body (the plugin's frames and the forked pytest ones)."""
    marks = BELOW_THE_BODY if "(most recent call first)" in stack else BELOW_THE_BODY[-1:]
    kept = []
    for line in stack.splitlines():
        if any(mark in line.replace("\\", "/") for mark in marks):
            break
        if line.strip():
            kept.append(re.sub(r"0x[0-9a-f]+", "0x...", line))
    return "\n".join(kept)


def _stack_lines(stack: str) -> str:
    trimmed = trim_stack(stack)
    return "\n".join("    " + line for line in trimmed.splitlines()) if trimmed else "    (no Python stack was dumped)"


def _stuck_why(report: RankReport, run: CaseOutcome, first_event: str, who: str = "it") -> str:
    place = place_of(report.stack)
    if run.timed_out:
        return f"still running at the {run.timeout_s:g} s timeout" + (f"; {who} {place}" if place is not None else "")
    if place is None:
        return f"still waiting (most likely in a collective) after {first_event}"
    return f"did not finish within {run.grace_s:g} s after {first_event}; {who} {place}"


def _describe(report: RankReport, run: CaseOutcome, first_event: str) -> str:
    rank = report.rank
    if report.died is not None:
        return f"[rank {rank}] died: {report.died}"
    if report.stuck:
        return f"[rank {rank}] {_stuck_why(report, run, first_event)}; its stack:\n{_stack_lines(report.stack)}"
    outcome = report.outcome
    assert outcome is not None
    if outcome.status == "failed":
        return f"[rank {rank}] failed:\n{outcome.traceback.rstrip() or outcome.message}"
    if outcome.status in ("skipped", "not_judged"):
        return f"[rank {rank}] {outcome.status.replace('_', ' ')}: {outcome.message}"
    return f"[rank {rank}] {outcome.status}"


def _group_by(reports: list[RankReport], key: Callable[[RankReport], str]) -> list[list[RankReport]]:
    groups: dict[str, list[RankReport]] = {}
    for report in reports:
        groups.setdefault(key(report), []).append(report)
    return list(groups.values())


def _without_own_rank(report: RankReport) -> str:
    """The rank's failure text with its own rank number masked, so that ranks failing alike group together."""
    assert report.outcome is not None
    text = report.outcome.traceback or report.outcome.message
    return re.sub(rf"\brank {report.rank}\b", "rank <r>", text)


def _describe_failed_group(group: list[RankReport], run: CaseOutcome, first_event: str) -> str:
    if len(group) == 1:
        return _describe(group[0], run, first_event)
    outcome = group[0].outcome
    assert outcome is not None
    return (f"[ranks {rank_list([r.rank for r in group])}] failed alike (rank {group[0].rank}'s shown):\n"
            f"{outcome.traceback.rstrip() or outcome.message}")


def _describe_stuck_group(group: list[RankReport], run: CaseOutcome, first_event: str) -> str:
    if len(group) == 1:
        return _describe(group[0], run, first_event)
    ranks = rank_list([r.rank for r in group])
    why = _stuck_why(group[0], run, first_event, "each")
    return f"[ranks {ranks}] {why}; their stack (the same on each):\n{_stack_lines(group[0].stack)}"


def _first_event(run: CaseOutcome, died: list[RankReport], failed: list[RankReport]) -> str:
    """What ended the wait for the others: the first death, failure or other early outcome."""
    if died:
        return f"rank {died[0].rank} died"
    if failed:
        return f"rank {failed[0].rank} failed"
    early = [(r.rank, r.outcome.status) for r in run.ranks if r.outcome is not None and r.outcome.status != "passed"]
    if early:
        return f"rank {early[0][0]} {early[0][1].replace('_', ' ')}"
    return f"the case had run {run.elapsed_s:.1f} s"


def _timeout_headline(run: CaseOutcome, stuck: list[RankReport], world_size: int, backend: str) -> str:
    start = f"distributed case timed out after {run.timeout_s:g} s on {world_size} rank(s) ({backend})"
    places = {r.rank: place_of(r.stack) for r in stuck}
    waiting = [rank for rank, place in places.items() if place is not None and place.in_collective]
    elsewhere = [rank for rank, place in places.items() if place is not None and not place.in_collective]
    by_place: dict[str, list[int]] = {}
    for rank, place in sorted(places.items()):
        if place is not None:
            by_place.setdefault(place.summary(), []).append(rank)
    each = "\n".join(f"  {'rank' if len(ranks) == 1 else 'ranks'} {rank_list(ranks)}: {where}"
                     for where, ranks in sorted(by_place.items(), key=lambda item: item[1][0]))
    if waiting and elsewhere:
        culprits = rank_list(elsewhere)
        return (f"{start}: rank(s) {culprits} held it up, outside any collective, while rank(s) "
                f"{rank_list(waiting)} wait in one; look at what rank(s) {culprits} do instead.\n{each}")
    if waiting and len(waiting) == len(stuck):
        return (f"{start}: every rank still running waits in a collective; they issued different ones, a rank "
                f"that finished left one unmatched, or the backend stalled.\n{each}")
    return (f"{start}; rank(s) {rank_list([r.rank for r in stuck])} still running. Raise the limit with "
            "@pytest.mark.dmlbench(timeout=...) or --dmlbench-timeout if the case is just slow.")


def _waits_in_collective(report: RankReport) -> bool:
    place = place_of(report.stack)
    return place is None or place.in_collective


def failure_text(run: CaseOutcome, world_size: int, backend: str) -> str:
    """The failure report: a headline, then one block per rank (or per ranks that failed alike) that did not
    pass, failures first."""
    failed = [r for r in run.ranks if r.outcome is not None and r.outcome.status == "failed"]
    died = [r for r in run.ranks if r.died is not None]
    stuck = [r for r in run.ranks if r.stuck and r.died is None]
    if run.timed_out and not failed and not died:
        headline = _timeout_headline(run, stuck, world_size, backend)
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
    first = _first_event(run, died, failed)
    blocks = [_describe(r, run, first) for r in died]
    blocks.extend(_describe_failed_group(group, run, first) for group in _group_by(failed, _without_own_rank))
    ordered = sorted(stuck, key=_waits_in_collective)  # the ranks the others wait for first
    blocks.extend(_describe_stuck_group(group, run, first)
                  for group in _group_by(ordered, lambda r: trim_stack(r.stack)))
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
    if mixed and not (run.timed_out and "skipped" not in mixed and "xfailed" not in mixed):
        notes.append(mixed)  # at a timeout the headline says who held the case up; skips still need the advice
    if run.unmatched:
        notes.append(("" if run.unmatched in headline else run.unmatched + ". ") + UNMATCHED_ADVICE)
    if run.rebuilt_because:
        notes.append(f"the world is rebuilt because {run.rebuilt_because}")
    return notes
