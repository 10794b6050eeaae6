"""The ``deepspeed`` strategy: the registry without DeepSpeed, bad options, and (when DeepSpeed is
installed) ZeRO 0-2 on a real two-rank gloo world against single-process SGD, with a negative control."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from torch import nn

from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.strategies import available, build
from pytest_dmlbench.strategies.zero import INSTALL_HINT, without_inference_shm_op
from tests.conftest import run_pytest, write_files

HAVE_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None


def test_the_registry_knows_deepspeed() -> None:
    assert "deepspeed" in available()


def test_without_deepspeed_the_error_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "deepspeed", None)  # makes `import deepspeed` fail
    with pytest.raises(ConfigError, match="not installed") as info:
        build("deepspeed", nn.Linear(2, 2), lr=0.1)
    assert INSTALL_HINT in str(info.value)


@pytest.mark.parametrize(("options", "message"), [
    ({"zero_stage": 3}, "zero_stage must be one of"),
    ({"config": {"optimizer": {"type": "Adam"}}}, "may not set"),
    ({"config": {"gradient_clipping": 1.0}}, "may not set"),
])
def test_bad_options_are_refused_before_anything_is_built(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build("deepspeed", nn.Linear(2, 2), lr=0.1, **options)  # type: ignore[arg-type]


CASES = '''
import copy

import pytest
import torch
import torch.nn.functional as F

from pytest_dmlbench.training import models
from pytest_dmlbench.data import synthetic_classification
from pytest_dmlbench.training.reference import check_matches_reference
from pytest_dmlbench.strategies import build


def run(communicate):
    model = models.tiny_mlp(16, 32, 10, seed=0)
    reference = copy.deepcopy(model)
    strategy = build("deepspeed", model, lr=0.1, momentum=0.9, zero_stage=2, communicate=communicate)
    batches = [synthetic_classification(8, (16,), 10, seed=100 + s) for s in range(3)]
    check_matches_reference(strategy, reference, batches, F.cross_entropy, rtol=1e-4, atol=1e-6)
    return strategy


@pytest.mark.dmlbench(world_size=2, timeout=300)
def test_zero2_equals_single_process_sgd(dist):
    strategy = run(communicate=True)
    assert strategy.comm_bytes_by_op["all_reduce"] == 4 * 874 + 4
    assert strategy.comm_bytes_by_op["all_gather"] == 4 * 438
    # the backend was made without the shared-memory operation only inference_all_reduce uses
    assert strategy._backend.shm_comm_op is None


@pytest.mark.dmlbench(world_size=2, timeout=300)
def test_negative_control_without_communication(dist):
    with pytest.raises(AssertionError, match="deepspeed parameters"):
        run(communicate=False)
'''


@pytest.mark.skipif(not HAVE_DEEPSPEED, reason="DeepSpeed is not installed: " + INSTALL_HINT)
def test_zero2_on_two_gloo_ranks_equals_single_process_sgd(tmp_path: Path) -> None:
    write_files(tmp_path, **{"test_ds.py": CASES})
    outcome = run_pytest(tmp_path, "--dmlbench", "-q", timeout=600)
    assert outcome.returncode == 0, outcome.output
    outcome.lines.fnmatch_lines(["*2 passed*"])


@pytest.mark.skipif(not HAVE_DEEPSPEED, reason="DeepSpeed is not installed: " + INSTALL_HINT)
def test_the_shared_memory_op_is_left_out_only_while_the_engine_is_built() -> None:
    deepspeed_torch = importlib.import_module("deepspeed.comm.torch")
    original = deepspeed_torch.build_shm_op
    with without_inference_shm_op():
        assert deepspeed_torch.build_shm_op() is None
    assert deepspeed_torch.build_shm_op is original
