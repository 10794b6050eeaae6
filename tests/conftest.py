"""Shared helpers for the plugin's own tests: run pytest in a real subprocess on a folder of files."""

from __future__ import annotations

import fcntl
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from tests import forkserver
from tests.gpu_host import remember_host_setting

# The plugin's tests describe a host without GPUs: GPUs are hidden from this process and every process it
# starts (before anything initialises CUDA), so the suite passes alike with and without GPUs. The backend
# choice itself is tested with injected device counts (tests/world/test_backend.py). The host's own setting is
# kept first: tests/gpu is collected on every host and runs the CUDA and NCCL paths in subprocesses given it,
# wherever the host has the devices (tests/gpu_host.py), and is skipped with the reason elsewhere.
remember_host_setting(os.environ)
os.environ["CUDA_VISIBLE_DEVICES"] = ""


@dataclass
class Outcome:
    """A finished pytest subprocess: exit code and output, with pytest's line matcher."""

    returncode: int
    output: str

    @property
    def lines(self) -> pytest.LineMatcher:
        return pytest.LineMatcher(self.output.splitlines())


def write_files(folder: Path, **files: str) -> None:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of an inner pytest run: no xdist worker identity leaking in from the outer run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT"))}
    env.pop("PYTEST_ADDOPTS", None)
    env.update(extra)
    return env


_INNER_TMPDIR: list[Path] = []
"""The temporary folder the current test's inner pytest runs share (made on the first run, removed after the test)."""


def inner_tmpdir() -> Path:
    """A short folder for the current test's inner runs to use as ``TMPDIR``: what they keep there on purpose (a
    block server's log a failure message names) goes when the test ends instead of piling up in the machine's
    temporary folder. Short, under the system's own, since a Unix socket's path (Ray's, under ``TMPDIR``) may not
    exceed 107 bytes."""
    if not _INNER_TMPDIR:
        _INNER_TMPDIR.append(Path(tempfile.mkdtemp(prefix="dt-")))
    return _INNER_TMPDIR[0]


@pytest.fixture(autouse=True)
def _inner_runs_tmpdir_removed() -> Iterator[None]:
    """Remove what the test's inner pytest runs left in their ``TMPDIR`` once the test is done with it."""
    yield
    while _INNER_TMPDIR:
        shutil.rmtree(_INNER_TMPDIR.pop(), ignore_errors=True)


def uses_hypothesis(folder: Path) -> bool:
    """Whether any Python file in ``folder`` (hidden folders and caches left out) mentions Hypothesis."""
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("__pycache__", "node_modules")]
        for name in files:
            if name.endswith(".py") and "hypothesis" in Path(root, name).read_text(errors="replace"):
                return True
    return False


def run_pytest(folder: Path, *args: str, timeout: float = 300, **env: str) -> Outcome:
    """Run ``python -m pytest`` in ``folder`` (its own rootdir) and capture everything it prints; its
    ``TMPDIR`` is the test's :func:`inner_tmpdir` unless ``env`` names one.

    Hypothesis's pytest plugin imports all of Hypothesis at every session's end (about 1 s of a loaded core),
    so it is loaded only where the folder's files use Hypothesis. Unless ``DMLBENCH_TEST_FORKSERVER=0``, the run
    is forked from a process that has imported torch and pytest already (:mod:`tests.forkserver`) unless
    ``env`` sets what only an interpreter's start reads."""
    (folder / "pytest.ini").exists() or (folder / "pytest.ini").write_text("[pytest]\n")
    env.setdefault("TMPDIR", str(inner_tmpdir()))
    plugins = () if uses_hypothesis(folder) else ("-p", "no:hypothesispytest")
    arguments = ["-p", "no:cacheprovider", "-p", "no:randomly", *plugins, *args]
    proc = python_m_pytest(folder, arguments, clean_env(**env), timeout)
    return Outcome(proc.returncode, proc.stdout + proc.stderr)


def python_m_pytest(cwd: Path, arguments: Sequence[str], env: dict[str, str],
                    timeout: float) -> subprocess.CompletedProcess[str]:
    """``python -m pytest ARGUMENTS`` in ``cwd`` with ``env``, its output captured: forked from the fork server
    (:mod:`tests.forkserver`) where ``env`` allows it, else in a fresh interpreter."""
    server = forkserver.server_for(env)
    if server is not None:
        return server.run(list(arguments), cwd, env, timeout)
    return subprocess.run([sys.executable, "-m", "pytest", *arguments], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


T = TypeVar("T")


class SharedSessions:
    """Inner sessions (their outcomes and the files they wrote) made once per outer pytest run and handed to every
    test that asks for them by key, under pytest-xdist too: the workers share the run's base temporary folder,
    and a file lock per key lets the first worker make it while another waits for it rather than repeating it.
    A session that raises is not kept: the next test to ask makes it again (and fails with its own error)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.made: dict[str, object] = {}

    def get(self, key: str, make: Callable[[Path], T]) -> tuple[T, Path]:
        """``make(folder)``'s result for ``key`` and the folder it was made in (its files stay there)."""
        folder = self.root / key
        if key not in self.made:
            with open(self.root / f"{key}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                record = self.root / f"{key}.pickle"
                if record.exists():
                    self.made[key] = pickle.loads(record.read_bytes())
                else:
                    shutil.rmtree(folder, ignore_errors=True)
                    folder.mkdir(parents=True)
                    self.made[key] = make(folder)
                    record.write_bytes(pickle.dumps(self.made[key]))
        return self.made[key], folder  # type: ignore[return-value]


def shared_sessions_of(tmp_path_factory: pytest.TempPathFactory) -> SharedSessions:
    """The outer run's shared sessions: under pytest-xdist each worker's base folder (popen-gwN) lies in the
    run's own, which all workers share."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared-sessions"
    root.mkdir(exist_ok=True)
    return SharedSessions(root)


@pytest.fixture(scope="session")
def shared_sessions(tmp_path_factory: pytest.TempPathFactory) -> SharedSessions:
    """Inner sessions several tests judge, made once per outer run (:class:`SharedSessions`)."""
    return shared_sessions_of(tmp_path_factory)


@pytest.fixture
def world1(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A real one-rank gloo process group in this test process, for unit tests of rank-side code.

    Per test, not per module: a group left initialised between tests made tests that need no group
    (building a strategy outside one must fail) depend on the order the tests ran in."""
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    store = dist.FileStore(str(tmp_path_factory.mktemp("store") / "store"), 1)  # type: ignore[attr-defined,unused-ignore]
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    yield
    dist.destroy_process_group()


SLOW_WORKFLOW = ".github/workflows/slow-tests.yml"
SLOW_REASON = (f"slow: a live statistical check or a whole fit, run by {SLOW_WORKFLOW} (daily) and by "
               "`pytest -n 2 --dist loadscope tests --run-slow -m slow`; a fast smoke of the same path runs here")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", default=False,
                     help=f"also run the tests marked slow (what {SLOW_WORKFLOW} runs)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"slow: too slow for every CI run (minutes on a 2-core host); run by {SLOW_WORKFLOW} with "
        "--run-slow, each beside a fast smoke of the same path that every run keeps")


# The modules that take longest (docs/evidence/test-durations.md), heaviest first. Collected first, they are the
# first scopes pytest-xdist's loadscope hands out, so the two workers end together on short modules instead of
# one idling while the other runs a module of minutes (collected last in path order, tests/world's were the tail).
HEAVY_FIRST = (
    "tests/world/simulated/test_torchrun_like.py", "tests/gates/paired/test_paired_e2e.py",
    "tests/experiments/test_ray_train.py", "tests/world/simulated/test_simulated_e2e.py",
    "tests/gates/test_paired_kinds_e2e.py", "tests/world/ray/test_loopback.py", "tests/e2e/test_baselines_e2e.py",
    "tests/world/test_real_scripts.py", "tests/world/ray/test_world.py", "tests/world/launched/test_torchrun_world.py",
)


def heavy_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """``items`` with those of :data:`HEAVY_FIRST`'s modules first, in its order; the rest keep theirs."""
    rank = {path: index for index, path in enumerate(HEAVY_FIRST)}
    return sorted(items, key=lambda item: rank.get(item.nodeid.partition("::")[0], len(rank)))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The heaviest modules first (:func:`heavy_first`); skip the tests marked ``slow`` unless ``--run-slow`` is
    given, saying where they do run."""
    items[:] = heavy_first(items)
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason=SLOW_REASON)
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(skip)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop this process's fork server of inner runs (:mod:`tests.forkserver`), if one was started."""
    forkserver.close_servers()
