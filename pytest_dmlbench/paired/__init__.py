"""Paired A/B regression gate: the working tree (A) and a git ref (B) measured in the same run.

``statistics`` (pure decision rule on block pairs), ``worktree`` (REF's code in a cached git worktree),
``protocol`` (the versioned message form between A and B), ``server`` (B's side, a pytest plugin in REF's
pytest process), ``client`` (A's handle on that process), ``blocks`` (running one block of a case on a
rank world), ``gate`` (A's pytest plugin object: interleaving, sequential stopping, confirmation, verdicts).
"""
