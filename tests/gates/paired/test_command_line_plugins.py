"""Block servers run with the plugins A's command line loads (``-p NAME``) and blocks (``-p no:NAME``): the same
plugins on both sides (a fixture a loaded plugin provides exists in B's cases too), and none of the blocked ones'
cost (Hypothesis's plugin imports all of Hypothesis at a session's end). The end-to-end check is in
``test_paired_e2e.py``."""

from __future__ import annotations

from pytest_dmlbench.gates.paired.launch import command_line_plugins


def test_every_form_of_a_loaded_or_blocked_plugin_is_found_once_in_order() -> None:
    args = ["-p", "no:randomly", "-pno:hypothesispytest", "-q", "-p", "no:randomly", "tests", "-p", "myplugin",
            "-pother", "-k", "no:x"]
    assert command_line_plugins(args) == ["no:randomly", "no:hypothesispytest", "myplugin", "other"]


def test_negative_control_other_options_are_not_plugins() -> None:
    assert command_line_plugins(["--pdb", "-k", "no:x", "-q", "--pyargs", "x", "-p"]) == []
