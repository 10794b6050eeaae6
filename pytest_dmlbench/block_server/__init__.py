"""The block server of the paired gate: a pytest plugin that REF's pytest process (and A's twin) loads.

It sits with the pytest face because it drives pytest items; A's side of the gate is
:mod:`pytest_dmlbench.gates.paired`. Its module path, ``pytest_dmlbench.block_server.plugin``, is what A asks
a block server's pytest to load (``-p``). A REF whose tree holds pytest-dmlbench 0.4.0 or earlier has the server
at ``pytest_dmlbench.paired.server`` only, and A asks for that path there
(:func:`pytest_dmlbench.gates.paired.client.server_plugin`).
"""
