"""The terminal section of a paired run: REF, each case's verdicts in one line, cases on one side only."""

from __future__ import annotations

from typing import Any

from pytest_dmlbench.stats import median


def summary_lines(gate: Any) -> list[str]:
    hello = gate.ref.hello or {}
    lines = [
        f"REF {gate.launch.label}: worktree {gate.tree.path}, pytest-dmlbench {hello.get('plugin_version', '?')} "
        f"from {hello.get('plugin_file', '?')}",
    ]
    for judgement in gate.judgements:
        parts = []
        for v in judgement.verdicts:
            ratio = "" if v.ratio is None else f" x{v.ratio:.3f}"
            parts.append(f"{v.metric} {v.kind}{ratio}")
        stages = "+".join(str(n) for n in judgement.stages) or "0"
        notes = f" ({'; '.join(judgement.notes)})" if judgement.notes else ""
        plan = judgement.plan
        size = "no blocks" if plan is None else f"blocks of {plan.rounds} rounds x {plan.iterations} call(s)"
        lines.append(f"{judgement.nodeid}: {', '.join(parts) or 'no figures'}; block pairs {stages}, "
                     f"{size}, {judgement.seconds:.1f} s{notes}")
    removed = sorted(nodeid for key, nodeid in gate.ref_cases.items() if key not in gate.a_cases)
    if removed:
        lines.append(f"removed: {len(removed)} case(s) REF has and the working tree does not:")
        lines.extend(f"  {nodeid}" for nodeid in removed)
    pairs = [sum(j.stages) for j in gate.judgements if j.stages]
    if pairs:
        lines.append(f"block pairs per case: median {median(pairs):g}, min {min(pairs)}, max {max(pairs)}")
    return lines
