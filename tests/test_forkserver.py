"""Inner pytest runs forked from a server that has imported torch and pytest (tests/forkserver.py) behave as a
fresh ``python -m pytest`` would: the same exit status and output, the run's own folder, environment, ``TMPDIR``
and ``PYTHONPATH``, a run killed at its timeout, and a fresh interpreter where only one can honour the
environment. So do the ``python -m pytest`` runs a forked run starts itself (the paired gate's block servers):
forked from the same server, with their descriptors, ending and killed as one process."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import forkserver
from tests.conftest import clean_env, inner_tmpdir, write_files
from tests.forkserver_main import REFUSALS_LOG, Command, forkable, parse_command, unforkable_variables

CASES = """
    import gc, os, sys, tempfile, time
    import helper

    def test_sees_its_world():
        assert os.getcwd() == os.environ["EXPECTED_CWD"]
        assert tempfile.gettempdir() == os.environ["TMPDIR"]
        assert helper.WHERE == "beside the tests"
        print("env", os.environ["MARK"])
        print("frozen", gc.get_freeze_count() > 0)

    def test_imports_from_pythonpath():
        print("extra", __import__("on_path").NAME)

    def test_fails():
        assert 1 + 1 == 3

    def test_hangs():
        if os.environ.get("HANG"):
            time.sleep(600)

    def test_breakpoint_calls_the_hook_named():
        breakpoint()
"""


@pytest.fixture(scope="module")
def server() -> Iterator[forkserver.ForkServer]:
    started = forkserver.ForkServer(clean_env())
    yield started
    started.close()


def project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    write_files(tmp_path, **{"test_forked.py": CASES, "helper.py": "WHERE = 'beside the tests'\n",
                             "extra/on_path.py": "NAME = 'from PYTHONPATH'\n", "pytest.ini": "[pytest]\n",
                             "hook.py": "def called():\n    print('hook called')\n"})
    (tmp_path / "tmp").mkdir()
    env = clean_env(EXPECTED_CWD=str(tmp_path), TMPDIR=str(tmp_path / "tmp"), MARK="marked")
    return tmp_path, env


def fresh(folder: Path, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=folder,
                          capture_output=True, text=True, env=env, timeout=120)


def test_a_forked_run_ends_and_reports_as_a_fresh_one(server: forkserver.ForkServer, tmp_path: Path) -> None:
    folder, env = project(tmp_path)
    args = ["-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-s", "-q", "-k",
            "not hangs and not pythonpath and not breakpoint"]
    forked = server.run(args, folder, env, timeout=120)
    alone = fresh(folder, args, env)
    assert forked.returncode == alone.returncode == 1, forked.stdout + forked.stderr
    for run in (forked, alone):
        assert "env marked" in run.stdout and not run.stderr
        assert "assert (1 + 1) == 3" in run.stdout and "1 failed, 1 passed" in run.stdout
    # the server's imports are frozen out of the child's garbage collections (a fresh interpreter has none frozen)
    assert "frozen True" in forked.stdout and "frozen False" in alone.stdout
    # negative control: the same run in another folder does not see this one's files
    elsewhere = server.run(args, tmp_path / "tmp", env, timeout=120)
    assert elsewhere.returncode == 5 and "no tests ran" in elsewhere.stdout


def test_a_run_with_its_own_pythonpath_is_forked_and_honours_it(server: forkserver.ForkServer, tmp_path: Path) -> None:
    folder, env = project(tmp_path)
    env = env | {"PYTHONPATH": str(folder / "extra")}
    assert forkable(env, server.env)
    args = ["-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-s", "-q", "-k", "pythonpath or its_world"]
    forked = server.run(args, folder, env, timeout=120)
    assert forked.returncode == 0 and "extra from PYTHONPATH" in forked.stdout, forked.stdout + forked.stderr
    assert "frozen True" in forked.stdout
    # negative control: without it, the module is not found
    alone = server.run(args, folder, {k: v for k, v in env.items() if k != "PYTHONPATH"}, timeout=120)
    assert alone.returncode == 1 and "No module named 'on_path'" in alone.stdout, alone.stdout


def test_a_run_setting_pythonbreakpoint_is_forked_and_its_breakpoint_calls_that_hook(
        server: forkserver.ForkServer, tmp_path: Path) -> None:
    # Ray's driver sets PYTHONBREAKPOINT in the test process; read at every breakpoint() call, not at start-up, it
    # must not send the inner runs that inherit it to a fresh interpreter, and a forked child must still honour it
    folder, env = project(tmp_path)
    env = env | {"PYTHONBREAKPOINT": "hook.called", "PYTHONPATH": str(folder)}
    assert "PYTHONBREAKPOINT" not in server.env and forkable(env, server.env)
    args = ["-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-s", "-q", "-k", "breakpoint"]
    forked = server.run(args, folder, env, timeout=120)
    assert forked.returncode == 0 and "hook called" in forked.stdout, forked.stdout + forked.stderr
    # negative control: the hook set to nothing (PYTHONBREAKPOINT=0) is not called
    quiet = server.run(args, folder, env | {"PYTHONBREAKPOINT": "0"}, timeout=120)
    assert quiet.returncode == 0 and "hook called" not in quiet.stdout, quiet.stdout + quiet.stderr


def test_a_run_past_its_timeout_is_killed_and_the_server_serves_the_next(
        server: forkserver.ForkServer, tmp_path: Path) -> None:
    folder, env = project(tmp_path)
    with pytest.raises(subprocess.TimeoutExpired):
        server.run(["-p", "no:cacheprovider", "-q", "-k", "hangs"], folder, env | {"HANG": "1"}, timeout=5)
    after = server.run(["-p", "no:cacheprovider", "-q", "-k", "hangs"], folder, env, timeout=120)
    assert after.returncode == 0, after.stdout + after.stderr


def test_a_shim_that_ends_before_it_asks_leaves_the_server_serving(server: forkserver.ForkServer,
                                                                     tmp_path: Path) -> None:
    folder, env = project(tmp_path)
    server.launcher()  # ready: its socket listens
    for message in (b"", b'{"args": ["-m", "pyt'):  # nothing, or half a request
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as shim:
            shim.connect(str(Path(server.folder, "socket")))
            shim.sendall(message)
    after = server.run(["-p", "no:cacheprovider", "-q", "-k", "hangs"], folder, env, timeout=120)
    assert after.returncode == 0, after.stdout + after.stderr


def test_what_only_an_interpreter_s_start_reads_gets_a_fresh_one() -> None:
    base = {"PATH": "/bin", "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": "/tmp"}
    assert forkable(base | {"TMPDIR": "/elsewhere", "SLOWDOWN": "2"}, base)
    assert forkable(base | {"PYTHONPATH": "/x"}, base)  # a child puts it on its sys.path
    # read at every breakpoint() call, from the child's environment (Ray's driver sets it), set or unset
    ray_hook = {"PYTHONBREAKPOINT": "ray.util.rpdb._driver_set_trace"}
    assert forkable(base | ray_hook, base) and forkable(base, base | ray_hook)
    # what torchrun sets for its workers, a child applies itself
    assert forkable(base | {"OMP_NUM_THREADS": "1", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
                                       "PYTHONUNBUFFERED": "1"}, base)
    for changed in ({"LD_PRELOAD": "libtcmalloc.so"}, {"OMP_PROC_BIND": "true"}, {"PYTHONDONTWRITEBYTECODE": ""},
                    {"OMP_NUM_THREADS": "0"}, {"OMP_NUM_THREADS": "4,2"}):
        assert not forkable(base | changed, base), changed
    # a thread count the server has and the run unsets: torch's default, which only a fresh import gives
    assert not forkable(base, base | {"OMP_NUM_THREADS": "1"})


def test_a_refused_run_names_the_variables_that_kept_it_from_a_fork_in_the_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = {"PATH": "/bin", "TMPDIR": "/tmp"}
    assert unforkable_variables(base | {"LD_PRELOAD": "x", "OMP_NUM_THREADS": "2", "TORCH_X": "1"}, base) == [
        "LD_PRELOAD", "TORCH_X"]  # the thread count a child applies itself
    assert unforkable_variables(base | {"OMP_NUM_THREADS": "4,2"}, base) == ["OMP_NUM_THREADS"]
    assert unforkable_variables(base, base | {"OMP_NUM_THREADS": "1"}) == ["OMP_NUM_THREADS"]
    # a test's run the server cannot fork is logged where the variable names a file, nothing where it is unset
    server = forkserver.server_for(clean_env())  # this test process's, which the test command's runs use
    assert server is not None, "the fork server is off (DMLBENCH_TEST_FORKSERVER=0) or was started elsewhere"
    log = tmp_path / "refused.jsonl"
    refused = {**server.env, "PYTHONHASHSEED": "7"}
    assert forkserver.python(refused) == sys.executable and not log.exists()
    monkeypatch.setenv(REFUSALS_LOG, str(log))
    assert forkserver.python(refused) == sys.executable
    assert forkserver.python(dict(server.env)) != sys.executable  # negative control: a forkable run is not logged
    assert [json.loads(line)["why"] for line in log.read_text().splitlines()] == [
        "start-up variables differ: PYTHONHASHSEED"]


STARTS_PYTEST = '''
    import gc, os, signal, subprocess, sys, time
    from pathlib import Path

    INNER = """
    import gc, os, time

    def test_reports_through_its_channel():
        import torch

        heard = f"frozen={gc.get_freeze_count() > 0} pid={os.getpid()} threads={torch.get_num_threads()}"
        os.write(int(os.environ["CHANNEL"]), heard.encode())
        if os.environ.get("HANG"):
            time.sleep(600)
        assert not os.environ.get("FAIL"), "asked to fail"
    """

    def start(tmp_path, *options, **env):
        (tmp_path / "test_inner.py").write_text(INNER)
        read, write = os.pipe()
        process = subprocess.Popen(
            [sys.executable, *options, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest"],
            cwd=tmp_path, env=dict(os.environ, CHANNEL=str(write), **env), pass_fds=(write,),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        os.close(write)
        return process, read

    def heard(read):
        return dict(item.split("=") for item in os.read(read, 200).decode().split())

    def test_a_pytest_it_starts_is_forked_takes_its_descriptors_and_ends_as_it_does(tmp_path):
        process, read = start(tmp_path, FAIL="1")
        output, _ = process.communicate(timeout=120)
        assert heard(read)["frozen"] == "True"  # forked from the server
        assert os.read(read, 1) == b""  # the channel ends with the run: nobody else holds its writing end
        assert process.returncode == 1 and "asked to fail" in output, output

    def test_a_start_up_variable_gets_a_fresh_interpreter(tmp_path):
        process, read = start(tmp_path, MALLOC_ARENA_MAX="2")
        output, _ = process.communicate(timeout=300)
        assert heard(read)["frozen"] == "False" and process.returncode == 0, output

    def test_a_torchrun_worker_is_forked_with_the_thread_count_it_was_given(tmp_path):
        threads = str(os.cpu_count() + 1)  # not torch's default, which the server's import took
        process, read = start(tmp_path, "-u", OMP_NUM_THREADS=threads, TORCH_NCCL_ASYNC_ERROR_HANDLING="1")
        output, _ = process.communicate(timeout=300)
        assert heard(read) | {"pid": ""} == {"frozen": "True", "pid": "", "threads": threads}, output
        assert process.returncode == 0, output

    def test_killing_it_kills_the_run_it_stands_for(tmp_path):
        process, read = start(tmp_path, HANG="1")
        pid = int(heard(read)["pid"])
        process.kill()
        assert process.wait(timeout=60) == -signal.SIGKILL
        for _ in range(600):
            if not Path(f"/proc/{pid}").exists() or "State:\\tZ" in Path(f"/proc/{pid}/status").read_text():
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"the run {pid} outlived the process that stood for it")

    def test_an_xdist_worker_is_forked_with_a_main_of_its_own_and_unbuffered_output():
        line = repr("import gc, sys; print(gc.get_freeze_count() > 0, __name__, sys.argv, sys.stdout.write_through)")
        done = subprocess.run([sys.executable, "-u", "-c", "import sys;exec(eval(sys.stdin.readline()))"],
                              input=line + "\\n", capture_output=True, text=True, timeout=120)
        assert (done.returncode, done.stdout) == (0, "True __main__ ['-c'] True\\n"), done

    def test_anything_else_runs_the_real_interpreter():
        done = subprocess.run([sys.executable, "-c", "import sys; print(sys.executable)"], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0 and done.stdout.strip() != sys.executable, done
        assert Path(done.stdout.strip()).name.startswith("python")
'''


def test_what_a_forked_run_starts_as_python_m_pytest_is_forked_too(server: forkserver.ForkServer,
                                                                    tmp_path: Path) -> None:
    """The paired gate's block servers are ``python -m pytest`` runs that an inner run starts: forked from the same
    server, holding the descriptors they were given, ending (and killed) as one process."""
    write_files(tmp_path, **{"test_starts.py": STARTS_PYTEST, "pytest.ini": "[pytest]\n"})
    args = ["-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-q"]
    run = server.run(args, tmp_path, clean_env(), timeout=600)
    assert run.returncode == 0 and "6 passed" in run.stdout, run.stdout + run.stderr


STARTS_RAY = """
    import gc, os

    import ray

    from pytest_dmlbench.world.ray.local import start_local

    def report():
        import torch  # as a task's code does, after Ray has set the thread count for its CPUs

        return gc.get_freeze_count() > 0, torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS"), os.environ["MARK"]

    def test_its_workers_are_forked_with_their_runtime_environment_and_rays_thread_count():
        start_local(ray, num_cpus=2, runtime_env={"env_vars": {"MARK": "from the runtime environment"}})
        try:
            heard = ray.get(ray.remote(num_cpus=1)(report).remote(), timeout=300)
        finally:
            ray.shutdown()
        assert os.cpu_count() > 1  # else one thread is torch's default too, and the count tells nothing
        assert tuple(heard) == (True, 1, "1", "from the runtime environment"), heard
"""


def test_what_a_forked_run_starts_as_a_ray_worker_is_forked_too(server: forkserver.ForkServer,
                                                                 tmp_path: Path) -> None:
    """Ray's workers, which its raylet starts with the interpreter the driver runs, are forked from the same server:
    the variables of their runtime environment set, and torch taking the thread count Ray sets for a task's CPUs
    as a fresh worker's torch takes it when a task imports it."""
    write_files(tmp_path, **{"test_starts_ray.py": STARTS_RAY, "pytest.ini": "[pytest]\n"})
    args = ["-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-q"]
    run = server.run(args, tmp_path, clean_env(TMPDIR=str(inner_tmpdir())), timeout=600)
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout + run.stderr


def test_the_commands_forked_are_pytest_torchrun_and_xdist_workers() -> None:
    bootstrap = "import sys;exec(eval(sys.stdin.readline()))"
    assert parse_command(["-m", "pytest", "-q"]) == Command("module", "pytest", ["-q"])
    assert parse_command(["-u", "-m", "torch.distributed.run", "x.py"]) == Command(
        "module", "torch.distributed.run", ["x.py"], unbuffered=True)
    assert parse_command(["-u", "-B", "-c", bootstrap]) == Command("code", bootstrap, [], unbuffered=True,
                                                                    no_bytecode=True)
    for other in (["-c", "print(1)"], ["-m", "json.tool"], ["script.py"], ["-X", "dev", "-m", "pytest"], ["-m"]):
        assert parse_command(other) is None, other


def test_ray_workers_are_forked_where_their_runtime_environment_is_variables_alone() -> None:
    folder = "/venv/site-packages/ray/_private/workers"
    setup, worker = f"{folder}/setup_worker.py", f"{folder}/default_worker.py"
    assert parse_command([worker, "--worker-type=WORKER"]) == Command("script", worker, ["--worker-type=WORKER"])

    def started(context: dict[str, object], language: str = "PYTHON") -> Command | None:
        return parse_command([setup, worker, "--node-ip-address=127.0.0.1", f"--language={language}",
                              "--serialized-runtime-env-context", json.dumps(context), "--worker-type=WORKER"],
                             "/venv/bin/python")

    assert started({"env_vars": {"MARK": "1"}, "py_executable": "/venv/bin/python"}) == Command(
        "script", worker, ["--node-ip-address=127.0.0.1", "--worker-type=WORKER"], env_vars=(("MARK", "1"),))
    assert started({}) == Command("script", worker, ["--node-ip-address=127.0.0.1", "--worker-type=WORKER"])
    needs_more: list[dict[str, object]] = [{"command_prefix": ["conda", "run"]}, {"py_executable": "/other/python"},
                                           {"override_worker_entrypoint": "/x.py"},
                                           {"env_vars": {"PATH": "/x:${PATH}"}}]
    for context in needs_more:
        assert started(context) is None, context
    assert started({}, language="JAVA") is None
    assert parse_command(["/elsewhere/setup_worker.py", worker]) is None  # not Ray's
