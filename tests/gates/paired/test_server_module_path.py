"""Which module A asks a block server's pytest to load (``-p``): the block server moved from
``pytest_dmlbench/paired/server.py`` to ``pytest_dmlbench/block_server/plugin.py``, and a REF whose tree holds a
copy of the plugin from before the move has it at the older path only. Checked on REF worktrees that A makes from
a real git repository, one commit of each layout, and with the module resolved under the server's own
``PYTHONPATH`` (without running it: a paired run per layout would cost a minute each)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_dmlbench.gates.paired.client import RefLaunch, RefProcess, python_path, server_plugin, too_old_hint
from pytest_dmlbench.gates.paired.protocol import LEGACY_SERVER_PLUGIN, SERVER_PLUGIN
from pytest_dmlbench.gates.paired.worktree import checkout, resolve_commit
from tests.gates.paired.gitrepo import commit_all, git, make_repo

OLD_LAYOUT = {
    "pytest_dmlbench/__init__.py": "__version__ = '0.4.0'\n",
    "pytest_dmlbench/paired/__init__.py": "",
    "pytest_dmlbench/paired/server.py": "SERVES = 'the older layout'\n",
}
NEW_LAYOUT = {
    "pytest_dmlbench/__init__.py": "__version__ = '0.5.0'\n",
    "pytest_dmlbench/block_server/__init__.py": "",
    "pytest_dmlbench/block_server/plugin.py": "SERVES = 'the current layout'\n",
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Commits ``old`` (the plugin's tree before the move), ``new`` (after it) and ``none`` (no plugin)."""
    repo = make_repo(tmp_path_factory.mktemp("server-path") / "repo", **{"test_x.py": "", **OLD_LAYOUT})
    git(repo, "tag", "old")
    git(repo, "rm", "-q", "-r", "pytest_dmlbench/paired")
    for name, text in NEW_LAYOUT.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    commit_all(repo, "the block server gets its own folder")
    git(repo, "tag", "new")
    git(repo, "rm", "-q", "-r", "pytest_dmlbench")
    commit_all(repo, "the plugin leaves the tree")
    git(repo, "tag", "none")
    return repo


def ref_launch(repo: Path, ref: str) -> RefLaunch:
    tree = checkout(repo, resolve_commit(repo, ref)).path
    return RefLaunch(worktree=tree, repo_root=repo, cwd=tree, args=[], log_path=repo / "ref.log", label=ref)


def resolved_file(launch: RefLaunch, module: str) -> str:
    """Where the server's Python finds ``module`` under the launch's ``PYTHONPATH`` (its parent packages are
    imported; the module itself is not run); "" when it finds none."""
    probe = (f"import importlib.util\ntry:\n    print(importlib.util.find_spec({module!r}).origin)\n"
             "except ModuleNotFoundError:\n    print()")
    done = subprocess.run([sys.executable, "-c", probe], cwd=launch.cwd, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": python_path(launch.worktree, None), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize(("ref", "module", "file"), [
    ("old", LEGACY_SERVER_PLUGIN, "pytest_dmlbench/paired/server.py"),
    ("new", SERVER_PLUGIN, "pytest_dmlbench/block_server/plugin.py"),
])
def test_a_ref_holding_the_plugin_is_served_from_its_own_copy_at_its_layout_s_path(
        repo: Path, ref: str, module: str, file: str) -> None:
    """Negative control each for the other: a launch that asked for one path whatever the tree held would load no
    server of REF's copy from one of the two trees (the older tree has no ``block_server``, the newer no ``paired``;
    the module is then missing, or found in the installed copy, which the server refuses to mix with REF's)."""
    launch = ref_launch(repo, ref)
    command = RefProcess(launch).command()
    assert command[:5] == [sys.executable, "-m", "pytest", "-p", module]
    assert resolved_file(launch, module) == str(launch.worktree / file)
    other = SERVER_PLUGIN if module == LEGACY_SERVER_PLUGIN else LEGACY_SERVER_PLUGIN
    assert not resolved_file(launch, other).startswith(str(launch.worktree))
    assert too_old_hint(launch.worktree) is None


def test_a_ref_without_the_plugin_and_a_s_own_server_load_the_installed_copy_at_the_current_path(
        repo: Path, tmp_path: Path) -> None:
    launch = ref_launch(repo, "none")
    assert server_plugin(launch) == SERVER_PLUGIN
    assert resolved_file(launch, SERVER_PLUGIN).endswith("pytest_dmlbench/block_server/plugin.py")
    # A's own block server puts no tree first: whatever a folder beside it holds, it serves A's installed copy
    own = ref_launch(repo, "old")
    assert server_plugin(RefLaunch(worktree=own.worktree, repo_root=repo, cwd=tmp_path, args=[],
                                   log_path=tmp_path / "own.log", label="HEAD", tree_first=False)) == SERVER_PLUGIN


def test_a_ref_whose_plugin_has_neither_server_gets_the_too_old_hint(tmp_path: Path) -> None:
    package = tmp_path / "pytest_dmlbench"
    package.mkdir()
    (package / "__init__.py").write_text("__version__ = '0.1.0'\n")
    launch = RefLaunch(worktree=tmp_path, repo_root=tmp_path, cwd=tmp_path, args=[], log_path=tmp_path / "l",
                       label="REF")
    assert server_plugin(launch) == SERVER_PLUGIN
    hint = too_old_hint(tmp_path)
    assert hint is not None and hint.startswith("its pytest-dmlbench (0.1.0) has no paired server")
