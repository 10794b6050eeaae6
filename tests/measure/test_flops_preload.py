"""The zygote loads what the flop counter's first count imports, so that no rank imports it on its own (seconds of
a core per rank: every rank counts FLOPs in its first warm-up round)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from pytest_dmlbench.measure import flops
from pytest_dmlbench.world import adopt_group, execute, guard

FIRST_COUNT = """
import json, sys
import torch
from torch.utils.flop_counter import FlopCounterMode
before = set(sys.modules)
with FlopCounterMode(display=False) as mode:
    torch.ones(4, 4) @ torch.ones(4, 4)
assert mode.get_total_flops() == 2 * 4 * 4 * 4
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def count_imports() -> list[str]:
    """The modules a FLOP count imports in this process."""
    from torch.utils.flop_counter import FlopCounterMode

    before = set(sys.modules)
    with FlopCounterMode(display=False) as mode:
        torch.ones(4, 4) @ torch.ones(4, 4)
    assert mode.get_total_flops() == 2 * 4 * 4 * 4
    return sorted(set(sys.modules) - before)


def test_after_the_preload_a_first_count_imports_nothing() -> None:
    flops.preload()
    assert count_imports() == []
    # negative control: in a fresh interpreter without it, the first count imports torch's compiler stack (what each
    # rank used to import)
    done = subprocess.run([sys.executable, "-c", FIRST_COUNT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "torch._dynamo" in json.loads(done.stdout)


def test_the_zygote_s_warm_up_preloads_the_counter(monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[str] = []
    monkeypatch.setattr(flops, "preload", lambda: called.append("flops"))
    monkeypatch.setattr(guard, "warm_up", lambda: called.append("guard"))
    monkeypatch.setattr(adopt_group, "install", lambda: called.append("adopt"))  # not in this test process
    execute.warm_up()
    assert called == ["flops", "guard", "adopt"]
