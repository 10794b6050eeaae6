"""The plugin's pytest items: what an item is to the engine and the gate, and what the plugin reads off it.

:mod:`.case` (an item as the engine's prepared case; one block of it, on ranks or in this process),
:mod:`.case_results` (a finished case's figures as its one case result), :mod:`.readers` (an item's facts, the
item as the gate judges it, the options that reproduce it, its record in the results file),
:mod:`.property_cases` (Hypothesis ``@given`` cases: health checks and the failure report), :mod:`.smoke`
(the items a smoke run keeps) and :mod:`.stash_keys` (the typed keys the plugin, the items and the block server
share).
"""
