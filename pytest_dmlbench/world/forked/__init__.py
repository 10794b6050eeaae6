"""Forked worlds, the default engine (``--dmlbench-launcher fork``): rank processes forked from a zygote.

The zygote (``zygote``) is a single-threaded copy of the pytest process forked right after collection; it
forks one process per rank (``rank``) for each world (``world``), and the session keeps one world per
(backend, world size) in a pool (``pool``), rebuilt after a failure. ``lifetime`` makes children die with
their parent, ``pinning`` puts rank ``r`` of every world on the same core, ``master_store`` is the store
behind ``MASTER_ADDR:MASTER_PORT``, ``scratch`` is the worlds' scratch folder, and ``engine`` is the
plugin's engine.
"""
