"""The environment report on this machine: its JSON structure, the variables it picks, the live check."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from typing import Any

import pytest

from pytest_dmlbench.envreport import distributed_variables

# A JSON-schema-like description of `env --json`: key -> type (or nested description). Values typed
# `(str, type(None))` may be null (no CUDA build, no GPU).
OPTIONAL_STR = (str, type(None))
LIVE_CHECK = {"ok": bool, "backend": str, "world_size": int, "start_method": str, "start_s": (float, type(None)),
              "init_s": (float, type(None)), "all_reduce_s": (float, type(None)), "detail": str}
SCHEMA: dict[str, Any] = {
    "machine_key": str,
    "machine": {
        "cpu_model": str, "logical_cores": int, "physical_cores": (int, type(None)), "memory_gib": int,
        "available_memory_gib": float, "os": str, "kernel": str, "platform": str, "machine": str, "python": str,
        "torch": str, "torchvision": OPTIONAL_STR, "cuda": OPTIONAL_STR, "cudnn": (int, type(None)),
        "nccl": OPTIONAL_STR, "gpus": list, "gpu_details": list, "backend": str,
        "backends_available": {"gloo": bool, "nccl": bool, "mpi": bool, "ucc": bool},
        "distributed_env": dict,
    },
    "live_check": LIVE_CHECK,
}


def violations(schema: Any, value: Any, where: str = "$") -> list[str]:
    """Where ``value`` departs from ``schema`` (missing keys, wrong types); empty when it conforms."""
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {type(value).__name__}"]
        problems = [f"{where}.{key}: missing" for key in schema if key not in value]
        for key, sub in schema.items():
            if key in value:
                problems += violations(sub, value[key], f"{where}.{key}")
        return problems
    if isinstance(value, bool) and schema in (int, float):
        return [f"{where}: expected {schema.__name__}, got bool"]
    return [] if isinstance(value, schema) else [f"{where}: expected {schema}, got {type(value).__name__}"]


def run_env(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_dmlbench", "env", *args], capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def env_json() -> dict[str, Any]:
    """``python -m pytest_dmlbench env --json`` on this machine (run once: each run imports torch)."""
    proc = run_env("--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dict(json.loads(proc.stdout))


def test_env_json_on_this_machine_has_every_fact_and_a_passing_live_check(env_json: dict[str, Any]) -> None:
    report = env_json
    assert violations(SCHEMA, report) == []
    machine, check = report["machine"], report["live_check"]
    assert machine["backends_available"]["gloo"] is True
    assert check["ok"] and check["world_size"] == 2 and check["backend"] == "gloo"
    assert 0 < check["init_s"] <= check["start_s"] and check["all_reduce_s"] > 0
    assert "gave 3 on every rank (expected 3)" in check["detail"]


def test_schema_check_rejects_a_wrong_report(env_json: dict[str, Any]) -> None:
    """Negative control: the structure check fails on a report with a missing key and a wrong type."""
    report = copy.deepcopy(env_json)
    del report["machine"]["cudnn"]
    report["machine"]["logical_cores"] = "2"
    report["live_check"] = dict.fromkeys(LIVE_CHECK, True)
    found = violations(SCHEMA, report)
    assert "$.machine.cudnn: missing" in found
    assert any(p.startswith("$.machine.logical_cores: expected") for p in found)
    assert any(p.startswith("$.live_check.world_size: expected") for p in found)


def test_text_report_and_the_variables_that_steer_distributed_runs() -> None:
    proc = subprocess.run([sys.executable, "-m", "pytest_dmlbench", "env", "--no-live"], capture_output=True,
                          text=True, timeout=300, env={"PATH": "/usr/bin:/bin", "NCCL_DEBUG": "INFO",
                                                       "MASTER_PORT": "29500", "UNRELATED": "x"})
    assert proc.returncode == 0, proc.stderr
    assert "live check       skipped (--no-live)" in proc.stdout
    for label in ("machine key", "CPU", "memory", "torch", "CUDA", "backends", "gloo yes"):
        assert label in proc.stdout, label
    assert "    MASTER_PORT=29500" in proc.stdout and "    NCCL_DEBUG=INFO" in proc.stdout
    assert "UNRELATED" not in proc.stdout
    env = {"NCCL_DEBUG": "INFO", "GLOO_SOCKET_IFNAME": "lo", "TORCH_DISTRIBUTED_DEBUG": "DETAIL", "RANK": "0",
           "HOME": "/root", "OMP_NUM_THREADS": "1", "NCCLX": "no"}
    assert list(distributed_variables(env)) == ["GLOO_SOCKET_IFNAME", "NCCL_DEBUG", "OMP_NUM_THREADS", "RANK",
                                                 "TORCH_DISTRIBUTED_DEBUG"]


def test_env_exits_1_and_names_the_missing_ranks_when_the_live_check_fails() -> None:
    """Failure path: a world that cannot start within the time limit (0.001 s) is reported, not waited on."""
    proc = run_env("--json", "--timeout", "0.001")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    check = json.loads(proc.stdout)["live_check"]
    assert check["ok"] is False and check["start_s"] is None
    assert "did not report within 0.001 s" in check["detail"]
