"""From A's pytest configuration to B's launch: which commit, which worktree, which arguments.

Errors are :class:`~pytest_dmlbench.gates.paired.worktree.RefError` with the problem and the fix; the plugin
turns them into ``pytest.UsageError`` before any case runs.
"""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_dmlbench.config import MMAP_THRESHOLD_ENV, TRIM_THRESHOLD_ENV, DmlbenchConfig
from pytest_dmlbench.errors import RefError
from pytest_dmlbench.gates.paired.allocator import preload_environment, preload_library
from pytest_dmlbench.gates.paired.client import RefLaunch
from pytest_dmlbench.gates.paired.worktree import Worktree, checkout, repository_root, resolve_commit

BASELINE_REF = "baseline"


def recorded_commit(baseline_dir: Path) -> str:
    """The commit the stored baselines were recorded at (``run.commit`` of their files; the most common
    one when they disagree, which happens when cases were saved at different commits). Files of the layout
    ``<machine-key>/<identity>/*.json`` count; those of the older layout (``<machine-key>/*.json``) only
    when no file of the current one records a commit."""
    root = Path(baseline_dir)
    layouts = [sorted(root.glob("*/*/*.json")), sorted(root.glob("*/*.json"))]  # current, then older
    commits: Counter[str] = Counter()
    for files in layouts:
        for path in files:
            if path.name.startswith(".tmp-"):
                continue  # a save in progress
            try:
                document = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # an unreadable baseline is reported by the stored-baseline mode, not here
            run = document.get("run") if isinstance(document, dict) else None
            commit = run.get("commit") if isinstance(run, dict) else None
            if isinstance(commit, str) and commit:
                commits[commit] += 1
        if commits:
            return commits.most_common(1)[0][0]
    where = f"{sum(map(len, layouts)) or 'no'} baseline file(s) under {baseline_dir}"
    raise RefError(
        f"--dmlbench-against baseline: {where} record no commit (files saved before pytest-dmlbench 0.2.0 "
        "do not). Save baselines from a git checkout with --dmlbench-save, or give a ref, e.g. "
        "--dmlbench-against origin/main."
    )


def check_compatible(config: pytest.Config, settings: DmlbenchConfig) -> None:
    """Options that cannot go with ``--dmlbench-against``."""
    if settings.save:
        raise RefError(
            "--dmlbench-against and --dmlbench-save do not go together: a paired run judges the working tree "
            "against REF and stores nothing. Save baselines in a separate run."
        )
    workers = getattr(config.option, "numprocesses", None)
    if workers not in (None, 0, "0") or hasattr(config, "workerinput"):
        raise RefError(
            "--dmlbench-against does not run under pytest-xdist (-n): A's and B's blocks alternate in one "
            "process so that both see the same machine state. Drop -n (or use -n 0)."
        )


def _mapped_args(config: pytest.Config, root: Path, tree: Path) -> list[str]:
    """A's positional arguments, absolute paths under the repository moved into REF's tree."""
    args = []
    for arg in config.args:
        path_part, sep, rest = str(arg).partition("::")
        path = Path(path_part)
        if path.is_absolute():
            try:
                path = tree / path.resolve().relative_to(root)
            except ValueError:
                pass
        args.append(f"{path}{sep}{rest}")
    return args


def command_line_plugins(args: Sequence[str]) -> list[str]:
    """The plugins a command line loads or blocks (``-p NAME``, ``-pNAME``, ``-p no:NAME``), each once, in its
    order."""
    values = []
    for arg, following in zip(args, [*args[1:], ""], strict=True):
        if arg == "-p":
            values.append(following)
        elif arg.startswith("-p"):
            values.append(arg[2:])
    return list(dict.fromkeys(value for value in values if value))


def ref_options(config: pytest.Config, settings: DmlbenchConfig) -> list[str]:
    """The options B runs with: the same world, launcher, isolation and selection, the same plugins loaded and
    blocked on the command line (a plugin module that REF's tree lacks stops B with its import error); no
    baselines, no recursion, no xdist. Options at their defaults are left out, so that a REF whose plugin predates
    them still starts."""
    plugins = [plugin for plugin in command_line_plugins(config.invocation_params.args) if plugin != "no:cacheprovider"]
    options = [
        "-p", "no:cacheprovider", *(option for plugin in plugins for option in ("-p", plugin)),
        "--dmlbench", "--dmlbench-no-compare", "-o", "dmlbench_against=",
        "--world-size", str(settings.world_size), "--dmlbench-backend", settings.backend,
        "--dmlbench-timeout", f"{settings.timeout_s:g}",
    ]
    if settings.launcher != "fork":
        options += ["--dmlbench-launcher", settings.launcher]
    if settings.isolation != "persistent":
        options += ["--dmlbench-isolation", settings.isolation]
    if settings.ray_spread:
        options += ["--dmlbench-ray-spread"]
    if settings.pin_cores:
        options += ["--dmlbench-pin-cores"]
    if config.pluginmanager.hasplugin("xdist"):
        options += ["-n", "0"]
    keyword = getattr(config.option, "keyword", "")
    if keyword:
        options += ["-k", keyword]
    markexpr = getattr(config.option, "markexpr", "")
    if markexpr:
        options += ["-m", markexpr]
    return options


def server_environment(settings: DmlbenchConfig) -> tuple[tuple[str, str], ...]:
    """Variables both block servers start with: the allocator their ranks preload, checked to load
    (:mod:`pytest_dmlbench.gates.paired.allocator`), and glibc's mmap threshold fixed, with its trim threshold
    at twice that (where glibc's own adjustment puts it), when asked for. They act at process start; the zygote
    and every rank it forks inherit them; other C libraries ignore glibc's."""
    preload = preload_environment(preload_library(settings.rank_allocator))
    if settings.mmap_threshold == 0:
        return preload
    return (*preload, (MMAP_THRESHOLD_ENV, str(settings.mmap_threshold)),
            (TRIM_THRESHOLD_ENV, str(2 * settings.mmap_threshold)))


OWN_SIDE = "the working tree's block server"


def own_launch(config: pytest.Config, settings: DmlbenchConfig, ref: RefLaunch) -> RefLaunch:
    """The launch of A's own block server: the working tree's cases, served exactly as B serves REF's (same
    options, a fresh pytest process with its own worlds). A's blocks then run in rank processes whose
    history matches B's (a warm-up block, then blocks of the same cases in the same order), not in the
    session's worlds that also ran every case's ordinary run and the cases B never runs: those carried
    resident memory, loaded modules and larger page tables into A's blocks only (A read 11-22 % more peak
    memory and DataLoader worker start-up on unchanged code)."""
    log = Path(tempfile.mkdtemp(prefix="dmlbench-own-")) / "own-pytest.log"
    return RefLaunch(worktree=ref.repo_root, repo_root=ref.repo_root, cwd=Path(config.invocation_params.dir),
                     args=[*ref_options(config, settings), *map(str, config.args)], log_path=log, label="HEAD",
                     side=OWN_SIDE, tree_first=False, environment=ref.environment)


def prepare(config: pytest.Config, settings: DmlbenchConfig, ref: str) -> tuple[RefLaunch, Worktree]:
    """Resolve REF, make its worktree and the launch of B; RefError on any problem."""
    check_compatible(config, settings)
    invocation = Path(config.invocation_params.dir)
    root = repository_root(invocation)
    commit = resolve_commit(root, recorded_commit(settings.baseline_dir) if ref == BASELINE_REF else ref)
    tree = checkout(root, commit)
    cwd = tree.path / invocation.resolve().relative_to(root.resolve())
    if not cwd.is_dir():
        raise RefError(f"--dmlbench-against {ref}: the folder {cwd.relative_to(tree.path)} pytest runs in does "
                       f"not exist at {commit[:12]}; run from a folder that exists in both trees")
    log = Path(tempfile.mkdtemp(prefix="dmlbench-ref-")) / "ref-pytest.log"
    label = ref if ref.startswith(commit[:7]) else f"{ref} ({commit[:12]})"
    args = [*ref_options(config, settings), *_mapped_args(config, root.resolve(), tree.path)]
    return RefLaunch(worktree=tree.path, repo_root=root, cwd=cwd, args=args, log_path=log, label=label,
                     environment=server_environment(settings)), tree
