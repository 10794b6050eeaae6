"""Block servers run with the plugins A's command line blocks (``-p no:NAME``) blocked too: the same plugins on
both sides, and none of the blocked ones' cost (Hypothesis's plugin imports all of Hypothesis at a session's
end). The end-to-end check is in ``test_paired_e2e.py``."""

from __future__ import annotations

from pytest_dmlbench.gates.paired.launch import blocked_plugins


def test_every_form_of_a_blocked_plugin_is_found_once_in_order() -> None:
    args = ["-p", "no:randomly", "-pno:hypothesispytest", "-q", "-p", "no:randomly", "tests", "-k", "no:x"]
    assert blocked_plugins(args) == ["no:randomly", "no:hypothesispytest"]


def test_negative_control_loaded_plugins_and_other_options_are_not_blocked() -> None:
    assert blocked_plugins(["-p", "xdist", "-pfoo", "--pdb", "-k", "no:x", "-p"]) == []
