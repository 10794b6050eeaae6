"""The paired gate: the working tree (A) and a git ref (B) measured in the same run, in interleaved blocks.

:mod:`.gate` (A's pytest plugin object: REF's lifecycle, what is judged, the results record), :mod:`.trial`
(the decision procedure: stages, sequential stopping, confirmation, verdicts; with :mod:`.stage`,
:mod:`.derived`, :mod:`.single_reading`, :mod:`.verdict_writer`), :mod:`.pairs` (the block pair record and
the source interface the trial reads), :mod:`.live_source` (pairs from the two block servers),
:mod:`.recorded` (pairs from results files, for replayed nights), :mod:`.plan` (block lengths),
:mod:`.statistics` (the decision rule on block pairs), :mod:`.worktree` (REF's code in a cached git
worktree), :mod:`.launch` and :mod:`.client` (starting and talking to a block server), :mod:`.protocol`
(the versioned messages between the two). The block server itself, which runs in REF's own pytest process,
is :mod:`pytest_dmlbench.block_server.plugin`.
"""
