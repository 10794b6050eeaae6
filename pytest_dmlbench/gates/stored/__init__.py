"""The stored gate: this run's figures against those saved by earlier runs of the same machine and identity.

:mod:`.gate` (the :class:`~pytest_dmlbench.gates.gate.Gate` the plugin asks), :mod:`.keeper` (save or
compare, per case), :mod:`.compare` (the verdict rule), :mod:`.significance` and :mod:`.round_blocks` (one
run against one run, on block medians), :mod:`.between_runs` and :mod:`.history` (against the spread of
stored runs), :mod:`.detectable` (the smallest change a test could have seen).
"""
