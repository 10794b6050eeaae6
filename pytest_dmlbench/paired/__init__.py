"""The block server of the paired gate: a pytest plugin that REF's pytest process (and A's twin) loads.

It sits with the pytest face because it drives pytest items; A's side of the gate is
:mod:`pytest_dmlbench.gates.paired`. Its module path, ``pytest_dmlbench.paired.server``, is what A asks
REF's pytest to load, so it stays where it is for as long as older refs are compared against.
"""
