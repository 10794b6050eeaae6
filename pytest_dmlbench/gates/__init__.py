"""The gates that turn a finished case's figures into verdicts: one interface (:mod:`.gate`), two siblings.

- :mod:`.stored`: against the figures stored by earlier runs (``--dmlbench-save``), the default.
- :mod:`.paired`: against a git ref re-measured beside the working tree (``--dmlbench-against REF``).

The plugin chooses one at configure time (:mod:`.choose`) and asks it once per item; every verdict is
worded in one place (:mod:`.wording`).
"""
