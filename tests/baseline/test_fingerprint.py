from __future__ import annotations

import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

from pytest_dmlbench.baseline.fingerprint import KEY_FIELDS, machine_fingerprint, machine_key
from tests.results.casefactory import MACHINE


def test_fingerprint_of_this_machine_has_every_key_field() -> None:
    fingerprint = machine_fingerprint("gloo")
    assert set(KEY_FIELDS) <= set(fingerprint)
    assert fingerprint["backend"] == "gloo"
    assert isinstance(fingerprint["logical_cores"], int) and fingerprint["logical_cores"] >= 1
    assert isinstance(fingerprint["memory_gib"], int)
    assert fingerprint["torch"].startswith("2.")
    assert machine_key(fingerprint) == machine_key(machine_fingerprint("gloo"))


def test_key_is_a_readable_slug_with_a_short_hash() -> None:
    key = machine_key(MACHINE)
    assert re.fullmatch(r"[a-z0-9.-]+-[0-9a-f]{8}", key), key
    assert key.startswith("linux-x86-64-xeon-2c-torch2.14.1-cpu-gloo-")
    assert len(key) <= 80


@pytest.mark.parametrize(
    "drift",
    [{"cpu_mhz": 3400.0}, {"cpu_mhz": None}, {"available_memory_gib": 1.5}, {"boot_time": 1.0e9}],
    ids=["boost", "no-freq", "free-memory", "boot-time"],
)
def test_drifting_fields_do_not_change_the_key(drift: dict[str, object]) -> None:
    assert machine_key({**MACHINE, **drift}) == machine_key(MACHINE)


@pytest.mark.parametrize(
    "change",
    [
        {"cpu_model": "AMD EPYC 7763 64-Core Processor"},
        {"logical_cores": 4},
        {"torch": "2.13.0+cpu"},
        {"backend": "nccl"},
        {"memory_gib": 48},
        {"gpus": ["NVIDIA A100-SXM4-40GB"]},
        {"cuda": "12.4"},
        {"python": "3.12.1"},
    ],
    ids=["cpu", "cores", "torch", "backend", "memory", "gpus", "cuda", "python"],
)
def test_identifying_fields_change_the_key(change: dict[str, object]) -> None:
    assert machine_key({**MACHINE, **change}) != machine_key(MACHINE)


def test_fingerprint_module_imports_torch_lazily() -> None:
    code = (
        "import sys; import pytest_dmlbench.baseline.fingerprint, pytest_dmlbench.baseline.store, "
        "pytest_dmlbench.gates.stored.compare, pytest_dmlbench.results.report, pytest_dmlbench.cli; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_gpu_fields_on_a_cuda_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mocked: this machine has no GPU, so the CUDA queries are replaced by a two-GPU answer."""
    import torch

    names = ["NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(names))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: names[i])
    monkeypatch.setattr(torch.cuda.nccl, "version", lambda: (2, 21, 5))
    props = SimpleNamespace(name=names[0], total_memory=40 * 10**9, major=8, minor=0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    fingerprint = machine_fingerprint("nccl")
    assert fingerprint["gpus"] == names and fingerprint["nccl"] == "2.21.5"
    assert fingerprint["gpu_details"][1] == {"index": 1, "name": names[0], "memory_gb": 40.0, "capability": "8.0"}
    assert machine_key(fingerprint) != machine_key({**fingerprint, "gpus": names[:1]})
