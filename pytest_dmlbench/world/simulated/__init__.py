"""Simulated ranks (``--dmlbench-launcher simulated``): every rank of a world is a thread of this process.

Ranks run one at a time and switch only inside collectives (``turns``); a Python process group
(``process_group``) matches each collective across its group (``rendezvous``) and the last rank to arrive
reduces once, in rank order (``reduction``); torch's world state (``thread_world``) and the random state
(``rng``) are each rank's own; ``compat`` checks torch's private surfaces this relies on; ``runner`` runs
one case on every rank and ``engine`` is the plugin's engine.
"""
