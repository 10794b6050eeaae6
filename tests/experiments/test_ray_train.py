"""``framework: ray_train`` end to end: the same experiment through Ray Train's TorchTrainer and through the
plugin's own world, side by side in one ``--dmlbench-json``; an experiment that cannot reach its
min_accuracy fails (the negative control); without Ray the item is skipped naming the install command.

Ray Train items start a real embedded Ray instance (30-60 s on a loaded 2-core machine; consecutive ones share
it), and the tests are skipped where Ray Train is not installed (``pip install -e ".[ray]"``). The whole
comparison (three fits: saved, then judged beside the negative control) is marked ``slow`` and runs daily;
every CI run keeps the smoke of the same path: one session of a Ray Train fit and the negative control, its
figures checked, with the probe that the pytest process is a Ray driver only while an experiment runs.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import pytest

from pytest_dmlbench.experiments.ray_cluster import RAY_MISSING, cpus_per_worker
from pytest_dmlbench.experiments.ray_train import figures_of
from pytest_dmlbench.experiments.schema import FieldProblem, validate
from tests.conftest import inner_tmpdir, run_pytest, write_files

# mlp: 32 -> 64 -> 10, float32; allreduce sends every parameter byte every step
MLP_PARAMETER_BYTES = 4 * (32 * 64 + 64 + 64 * 10 + 10)
EXPERIMENTS = """
    defaults: {model: mlp, strategy: allreduce, world_size: 2, batch_size: 64, epochs: 2,
               max_batches_per_epoch: 8, eval_batches: 4, lr: 0.1, momentum: 0.9, comm_rounds: 2,
               threshold: 1000}
    experiments:
      - name: learns
        min_accuracy: 0.4
        matrix:
          framework: [dmlbench, ray_train]
      - {name: frozen, framework: ray_train, lr: 1.0e-9, min_accuracy: 0.4, comm_rounds: 0}
"""
FIGURES = {"total_time_s", "epoch_time_s", "throughput_samples_per_s", "loss", "accuracy", "peak_rss_mb",
           "comm_bytes_per_step", "exposed_comm_fraction"}
RAY_TRAIN_INSTALLED = importlib.util.find_spec("ray") is not None and importlib.util.find_spec("ray.train") is not None


def samples(case: dict[str, Any], metric: str) -> list[float]:
    return [float(sample) for sample in case["metrics"][metric]["samples"]]


@pytest.mark.slow
@pytest.mark.skipif(not RAY_TRAIN_INSTALLED, reason=RAY_MISSING)
def test_ray_train_runs_beside_the_plugin_world_and_is_judged(tmp_path: Path) -> None:
    write_files(tmp_path, **{"dmlbench_ray.yaml": EXPERIMENTS})
    saved = run_pytest(tmp_path, "--dmlbench", "--dmlbench-save", "--dmlbench-json", "saved.json", "-k", "learns",
                       timeout=600)
    assert saved.returncode == 0, saved.output
    saved.lines.fnmatch_lines(["*2 passed, 1 deselected*"])
    cases = {c["nodeid"]: c for c in json.loads((tmp_path / "saved.json").read_text())["cases"]}
    ours = cases["dmlbench_ray.yaml::learns[framework=dmlbench]"]
    ray = cases["dmlbench_ray.yaml::learns[framework=ray_train]"]
    assert set(ray["metrics"]) == set(ours["metrics"]) | {"ray_fit_time_s"}
    assert set(ours["metrics"]) >= FIGURES
    assert ray["world_size"] == 2 and ray["backend"] == "gloo" and ray["outcome"] == "passed"
    assert ray["params"]["framework"] == "ray_train" and "framework" not in ours["params"]

    judged = run_pytest(tmp_path, "--dmlbench", "--dmlbench-json", "results.json", "-k", "ray_train or frozen",
                        timeout=600)
    assert judged.returncode == 1, judged.output
    judged.lines.fnmatch_lines([
        "*experiment frozen: held-out accuracy * < min_accuracy 0.4 after 2 epoch(s)*the model did not learn*",
        "FAILED dmlbench_ray.yaml::frozen*",
        "*1 failed, 1 passed, 1 deselected*",
    ])
    rerun = json.loads((tmp_path / "results.json").read_text())["cases"]
    # the results file holds every case with its outcome; the failed one has no figures
    assert sorted(c["nodeid"] for c in rerun) == ["dmlbench_ray.yaml::frozen", ray["nodeid"]]
    frozen = next(c for c in rerun if c["nodeid"] == "dmlbench_ray.yaml::frozen")
    assert frozen["outcome"] == "failed" and not frozen["metrics"], frozen
    rerun = [c for c in rerun if c["nodeid"] == ray["nodeid"]]
    # judged through the same gate as the plugin's cases: counts are judged, timings inconclusive after one save
    kinds = {v["metric"]: v["kind"] for v in rerun[0]["verdicts"]}
    assert kinds["comm_bytes_per_step"] == "unchanged" and kinds["epoch_time_s"] == "inconclusive", kinds
    # Ray's two workers ran the package's strategy on a 2-rank group: every parameter byte, every step ...
    assert samples(ray, "comm_bytes_per_step") == [MLP_PARAMETER_BYTES] * 16
    # ... and trained the same model on the same data as the plugin's world
    for mine, theirs in zip(samples(ours, "loss"), samples(ray, "loss"), strict=True):
        assert math.isclose(mine, theirs, rel_tol=1e-5), (samples(ours, "loss"), samples(ray, "loss"))
    assert samples(ray, "accuracy") == samples(ours, "accuracy")
    assert samples(ray, "ray_fit_time_s")[0] > samples(ray, "total_time_s")[0]
    epochs = zip(samples(ray, "throughput_samples_per_s"), samples(ray, "epoch_time_s"), strict=True)
    assert [round(rate * seconds) for rate, seconds in epochs] == [8 * 64] * 2


def test_without_ray_the_item_is_skipped_naming_the_install(tmp_path: Path) -> None:
    write_files(tmp_path, **{
        "conftest.py": "import sys\nsys.modules['ray'] = None  # as if Ray were not installed\n",
        "dmlbench_ray.yaml": "experiments: [{name: needs_ray, model: mlp, framework: ray_train, world_size: 2}]\n",
    })
    run = run_pytest(tmp_path, "--dmlbench", "-rs")
    assert run.returncode == 0, run.output
    run.lines.fnmatch_lines(['SKIPPED*framework ray_train needs Ray Train, which is not installed; '
                             'install it with: pip install "pytest-dmlbench[[]ray]"', "*1 skipped*"])


def test_an_unknown_framework_names_ray_train_among_the_accepted(tmp_path: Path) -> None:
    with pytest.raises(FieldProblem, match="unknown framework 'horovod'") as problem:
        validate({"name": "x", "model": "mlp", "framework": "horovod"}, name="x", source="f",
                 default_world_size=2, base_dir=tmp_path)
    assert "ray_train" in problem.value.accepted


@pytest.mark.parametrize(("cpus", "world_size", "share"), [(2, 2, 1.0), (2, 4, 0.5), (16, 4, 1.0), (2, 3, 0.66)])
def test_workers_ask_for_a_share_that_fits(cpus: float, world_size: int, share: float) -> None:
    assert cpus_per_worker(cpus, world_size) == share
    assert cpus_per_worker(cpus, world_size) * world_size <= cpus


def test_a_cluster_without_cpus_and_a_silent_train_loop_are_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="offers no CPU"):
        cpus_per_worker(0, 2)
    experiment = validate({"name": "x", "model": "mlp", "framework": "ray_train"}, name="x", source="f",
                          default_world_size=2, base_dir=tmp_path)
    with pytest.raises(AssertionError, match="Ray Train returned no metrics"):
        figures_of(None, experiment)


DRIVER_PROBE = """
    import sys

    def ray_driver() -> bool:
        ray = sys.modules.get("ray")
        return ray is not None and ray.is_initialized()

    def test_z_probe_sees_a_driver():  # negative control: the probe below reports a live driver
        import os
        import ray
        from pytest_dmlbench.experiments.ray_cluster import EMBEDDED_TRAIN_SETTINGS, connect, shutdown
        assert not ray_driver()
        connect()
        try:
            assert ray_driver()
            # the embedded instance's job carries Ray Train's settings; the driver's own environment does not
            seen = ray.get(ray.remote(lambda: {k: os.environ.get(k) for k in EMBEDDED_TRAIN_SETTINGS}).remote())
            assert seen == EMBEDDED_TRAIN_SETTINGS, seen
            assert not set(EMBEDDED_TRAIN_SETTINGS) & set(os.environ)
            # and its workers open torch's env:// rendezvous store on 127.0.0.1, where torch alone binds ::
            # (the store of a Ray Train fit; the whole fit's check is tests/world/ray/test_loopback.py, daily)
            assert ray.get(ray.remote(rendezvous_store_hosts).remote()) == ["127.0.0.1"]
        finally:
            shutdown()

    def rendezvous_store_hosts() -> list[str]:  # where a one-rank env:// rendezvous's store listens
        import importlib, os, socket
        from datetime import timedelta
        import psutil

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1")
        rendezvous = importlib.import_module("torch.distributed.rendezvous")
        store, _, _ = next(rendezvous.rendezvous("env://", timeout=timedelta(seconds=30)))
        hosts = sorted({c.laddr.ip for c in psutil.Process().net_connections(kind="tcp")
                        if c.status == psutil.CONN_LISTEN and c.laddr.port == port})
        del store
        return hosts

    def test_zz_after_the_experiment():
        assert not ray_driver(), "the experiment left this process a Ray driver"
"""


@pytest.mark.skipif(not RAY_TRAIN_INSTALLED, reason=RAY_MISSING)
def test_a_ray_train_fit_and_its_negative_control_with_the_pytest_process_a_driver_only_meanwhile(
        tmp_path: Path) -> None:
    """The smoke of the Ray Train path every CI run keeps: a fit's figures, the negative control that fails its
    min_accuracy, both on one Ray instance, and, after the Ray Train items, the pytest process no longer
    connected to Ray, so a later in-process case that forks (worlds of its own, DataLoader workers) cannot break
    Ray's connections; before, the session could hang at its end in ``ray.shutdown``. The probe also finds Ray
    Train's settings for the embedded instance in its job's tasks and not in the driver's environment, and a
    task's rendezvous store on loopback only (the fast form of the daily loopback check of a whole fit)."""
    write_files(tmp_path, **{"dmlbench_ray.yaml": EXPERIMENTS, "test_zafter.py": DRIVER_PROBE})
    run = run_pytest(tmp_path, "--dmlbench", "--dmlbench-json", "results.json", "-p", "no:randomly",
                     "-k", "(learns and ray_train) or frozen or probe or after", timeout=900)
    assert run.returncode == 1, run.output
    run.lines.fnmatch_lines([
        "*experiment frozen: held-out accuracy * < min_accuracy 0.4 after 2 epoch(s)*the model did not learn*",
        "FAILED dmlbench_ray.yaml::frozen*",
        "*1 failed, 3 passed, 1 deselected*",
    ])
    assert "warnings summary" not in run.output  # Ray's warnings about its own settings are not the user's
    # the two Ray Train items, one after the other, fitted on one Ray instance: it started once for them, and
    # once more for the probe's own connect() after them (one start per item would make three)
    sessions = [path.name for path in (*inner_tmpdir().glob("session_2*"), *inner_tmpdir().glob("ray/session_2*"))]
    assert len(sessions) == 2, sessions
    cases = json.loads((tmp_path / "results.json").read_text())["cases"]
    # every case with its outcome: the failed one kept no figures
    assert sorted(c["nodeid"] for c in cases) == ["dmlbench_ray.yaml::frozen",
                                                  "dmlbench_ray.yaml::learns[framework=ray_train]"]
    frozen = next(c for c in cases if c["nodeid"] == "dmlbench_ray.yaml::frozen")
    assert frozen["outcome"] == "failed" and not frozen["metrics"], frozen
    cases = [c for c in cases if c["nodeid"] != "dmlbench_ray.yaml::frozen"]
    ray = cases[0]
    assert set(ray["metrics"]) >= FIGURES | {"ray_fit_time_s"}
    assert ray["world_size"] == 2 and ray["backend"] == "gloo" and ray["outcome"] == "passed"
    assert samples(ray, "comm_bytes_per_step") == [MLP_PARAMETER_BYTES] * 16  # every parameter byte, every step
    assert min(samples(ray, "accuracy")) >= 0.0 and samples(ray, "accuracy")[-1] >= 0.4
    assert samples(ray, "ray_fit_time_s")[0] > samples(ray, "total_time_s")[0]
    epochs = zip(samples(ray, "throughput_samples_per_s"), samples(ray, "epoch_time_s"), strict=True)
    assert [round(rate * seconds) for rate, seconds in epochs] == [8 * 64] * 2
