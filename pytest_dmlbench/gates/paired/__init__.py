"""The paired gate: the working tree (A) and a git ref (B) measured in the same run, in interleaved blocks.

:mod:`.gate` (A's pytest plugin object: interleaving, sequential stopping, confirmation, verdicts),
:mod:`.plan` (block lengths), :mod:`.statistics` (the decision rule on block pairs), :mod:`.worktree`
(REF's code in a cached git worktree), :mod:`.launch` and :mod:`.client` (starting and talking to a block
server), :mod:`.protocol` (the versioned messages between the two). The block server itself, which runs in
REF's own pytest process, is :mod:`pytest_dmlbench.paired.server`.
"""
