"""Where stored figures live: :mod:`.fingerprint` (the machine key, from :mod:`.machine_facts`),
:mod:`.identity` (world size, backend, launcher, isolation; the refresh command), :mod:`.store` (the
files), :mod:`.reading` (any results or baseline path the command line is given), :mod:`.commit` (the
commit a run came from). Judging them is :mod:`pytest_dmlbench.gates.stored`.
"""
