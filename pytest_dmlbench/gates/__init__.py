"""The gates that turn a finished case's figures into verdicts: one interface (:mod:`.gate`), two siblings.

- :mod:`.stored`: against the figures stored by earlier runs (``--dmlbench-save``), the default.
- :mod:`.paired`: against a git ref re-measured beside the working tree (``--dmlbench-against REF``).

The plugin chooses one at configure time (:mod:`.choose`) and asks it once per item; every verdict is
worded in one place (:mod:`.wording`); the figure lists both share are :mod:`.figures`. Beside them:
:mod:`.run_level` (the rule over a whole run's figures), :mod:`.profile_diff` (which operators grew in a
confirmed regression) and :mod:`.replay` (recorded nights through the paired gate's own trial, for measuring
its error rates). The gates stand on :mod:`pytest_dmlbench.baseline` (where stored figures live) and never
import the pytest face above them.
"""
