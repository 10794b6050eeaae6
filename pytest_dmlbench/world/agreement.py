"""Do the ranks agree? Collectives issued per rank, outcomes per rank, and worlds that must be rebuilt.

Pure functions of the ranks' reports (parent side); they word the verdict a user reads.
"""

from __future__ import annotations

from pytest_dmlbench.world.messages import RankOutcome
from pytest_dmlbench.world.rank_names import LISTED_ONE_BY_ONE, rank_list

MIXED_SKIP_ADVICE = (
    "A distributed case must reach the same outcome on every rank: call pytest.skip() or pytest.xfail() on "
    "every rank, from a condition every rank evaluates alike (dist.world_size, dist.backend, a parameter; "
    "not dist.rank), before the first collective."
)
MIXED_FAIL_ADVICE = (
    "A case fails when it fails on any rank; make the check hold on every rank, or guard a check that only "
    "makes sense on some ranks with a condition on dist.rank."
)
UNMATCHED_ADVICE = (
    "Every rank must issue the same collectives on the default group, in the same order, and wait for "
    "asynchronous ones (work.wait()) before the case returns; the world was rebuilt for the next case."
)


def _ranks(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ", ".join(str(r) for r in ranks)


def unmatched_collectives(outcomes: list[RankOutcome]) -> str:
    """'rank 0 issued 4 collectives, rank 1 issued 3: a collective was left unmatched', or '' when every
    rank issued the same number (or some rank could not count)."""
    counts = [o.collectives for o in outcomes]
    if not outcomes or any(c is None for c in counts) or len(set(counts)) == 1:
        return ""
    by_count: dict[int, list[int]] = {}
    for outcome in sorted(outcomes, key=lambda o: o.rank):
        assert outcome.collectives is not None
        by_count.setdefault(outcome.collectives, []).append(outcome.rank)
    order = sorted(by_count.items(), key=lambda item: item[1][0])
    parts = [f"{_ranks(ranks)} issued {count}" for count, ranks in order]
    first_count = order[0][0]
    parts[0] += " collective" if first_count == 1 else " collectives"
    return ", ".join(parts) + ": a collective was left unmatched"


def rebuild_reasons(outcomes: list[RankOutcome]) -> str:
    """Why the world must be rebuilt after this case ('' when it need not), ranks grouped by reason."""
    by_reason: dict[str, list[int]] = {}
    for outcome in sorted(outcomes, key=lambda o: o.rank):
        if outcome.rebuild:
            by_reason.setdefault(outcome.rebuild, []).append(outcome.rank)
    return "; ".join(f"{_ranks(ranks)}: {reason}" for reason, ranks in by_reason.items())


def describe_outcome(outcome: RankOutcome | None, died: str | None, stuck: bool) -> str:
    """One rank's outcome in a few words: 'passed', 'skipped ('no GPU')', 'died (exit code 3)', ..."""
    if died is not None:
        return f"died ({died})"
    if stuck or outcome is None:
        return "did not finish"
    if outcome.status in ("skipped", "xfailed", "not_judged") and outcome.message:
        return f"{outcome.status} ({outcome.message!r})"
    return outcome.status


def mixed_outcomes(described: list[tuple[int, str, str]]) -> str:
    """For (rank, status, description) triples that do not all share one status: a line naming each
    rank's outcome and what the case must do; '' when every rank reached the same outcome."""
    if len({status for _, status, _ in described}) <= 1:
        return ""
    if len(described) <= LISTED_ONE_BY_ONE:
        listing = ", ".join(f"rank {rank} {text}" for rank, _, text in described)
    else:
        by_text: dict[str, list[int]] = {}
        for rank, _, text in described:
            by_text.setdefault(text, []).append(rank)
        listing = ", ".join(f"{'rank' if len(ranks) == 1 else 'ranks'} {rank_list(ranks)} {text}"
                            for text, ranks in sorted(by_text.items(), key=lambda item: min(item[1])))
    statuses = {status for _, status, _ in described}
    advice = MIXED_SKIP_ADVICE if statuses & {"skipped", "xfailed", "not_judged"} else MIXED_FAIL_ADVICE
    return f"the ranks reached different outcomes: {listing}. {advice}"
