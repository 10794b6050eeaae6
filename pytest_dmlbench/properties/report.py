"""Parent side: the failure report of a property falsified in lockstep (the minimal example once)."""

from __future__ import annotations

from typing import Any

from pytest_dmlbench.world.world import CaseOutcome


def _property(run: CaseOutcome) -> list[dict[str, Any]] | None:
    found = []
    for report in run.ranks:
        outcome = report.outcome
        if outcome is None or outcome.status != "failed" or outcome.property_verdict is None:
            return None
        found.append(outcome.property_verdict)
    return found


def property_failure_text(run: CaseOutcome, world_size: int, backend: str) -> str | None:
    """The report of a property every rank agreed to have falsified; None for any other failure."""
    verdicts = _property(run)
    if verdicts is None:
        return None
    first = verdicts[0]
    failed = first["failed_ranks"]
    examples = {v["example"] for v in verdicts}
    lines = [
        f"property falsified on rank(s) {', '.join(map(str, failed))} of {world_size} ({backend}); all ranks "
        f"shrank in lockstep ({first['examples_run']} example(s) on rank 0) to "
        + ("this minimal example:" if len(examples) == 1 else "different examples (the run was not deterministic):"),
        "",
    ]
    if len(examples) == 1:
        lines.append(first["example"].strip() or "(Hypothesis gave no example text)")
    else:
        for rank, verdict in enumerate(verdicts):
            lines.append(f"[rank {rank}] {verdict['example'].strip()}")
    if first["seed"]:
        lines.extend(["", first["seed"]])
    for rank, verdict in enumerate(verdicts):
        if verdict["own_traceback"]:
            lines.extend(["", f"[rank {rank}] failed:", verdict["own_traceback"].rstrip()])
    agreed = [str(rank) for rank, verdict in enumerate(verdicts) if not verdict["own_traceback"]]
    if agreed:
        lines.extend(["", f"rank(s) {', '.join(agreed)} passed this example and failed it by agreement"])
    output = first.get("output", "").strip()
    if output:
        lines.extend(["", "Hypothesis (rank 0):", output])
    if run.world_broken:
        lines.extend(["", "the world was torn down and will be restarted for the next case"])
    return "\n".join(lines)
