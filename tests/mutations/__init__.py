"""Deliberate bugs, each a pytest plugin module (``-p tests.mutations.<name>``) that patches one strategy when
pytest loads it, before the ranks are forked: the correctness suite CI runs must fail under every one."""
