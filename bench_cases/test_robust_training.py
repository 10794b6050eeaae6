"""Byzantine-robust training with the ``robust`` strategy on a 4-rank world, 3 simulated clients per rank.

Task: 10-class synthetic classification (inputs ``(1, 6, 6)``, labels from a random linear teacher),
a 36-32-10 MLP, 50 SGD steps (lr 0.1, momentum 0.9) on global batches of 1536 samples (128 per client),
accuracy on 1000 held-out samples. Chance is 0.10; without attack every rule reaches about 0.85.
n = 12 clients, of which the first ``F = 3`` (all on rank 0) are Byzantine unless a case says otherwise.

Stated thresholds (measured margins in the project report):
- robust rules (median, trimmed_mean, krum, centered_clipping; f = 3 < n/2) reach accuracy >= 0.55 under
  sign_flip, alie, a scaled sign flip (ipm with eps = 4) and inf/NaN rows, and stay finite;
- the mean collapses to accuracy <= 0.20 when the attack exploits its zero breakdown point: ipm with
  eps = 4 (each attacker sends -4 mu, so the mean steps along -mu), inf rows, and sign_flip from n/2 = 6
  clients (the mean's step is exactly cancelled). Sign_flip from f < n/2 clients only scales the mean's
  step by (n - 2f)/n and alie stays inside the honest spread by design, so the mean survives those two at
  f = 3: they are recorded, not asserted;
- with no attack the mean must rise to >= 0.60 ("learning actually happens"); a model that is never
  updated fails the same check;
- data poisoning by the 3 Byzantine clients (label_flip, backdoor: every sample of theirs gets a 2x2
  patch of value 4 and label 0): the model still learns (>= 0.60); the backdoor's attack success rate is
  recorded per rule, must reach >= 0.50 through the mean (the backdoor is implanted, so the metric can
  see one) and stays <= 0.30 for the model trained on clean data (the metric is not high by itself).
Untargeted attacks are judged by accuracy alone; ``attack_success_rate`` is the backdoor's metric.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset

from pytest_dmlbench.data import shard, synthetic_classification
from pytest_dmlbench.robust import (
    BackdoorDataset,
    LabelFlipDataset,
    ModelHashChain,
    Trigger,
    attack_success_rate,
)
from pytest_dmlbench.robust.integrity import model_digest
from pytest_dmlbench.robust.strategy import SIGNATURE_BYTES, RobustStrategy
from pytest_dmlbench.strategies import Strategy, build
from pytest_dmlbench.training import models
from pytest_dmlbench.training.reference import assert_identical_across_ranks, disagreeing_ranks, raise_on_all_ranks

# The correctness suite CI runs: pytest --dmlbench --world-size 2 -m correctness
pytestmark = pytest.mark.correctness

WORLD = 4
CLIENTS_PER_RANK = 3
N = WORLD * CLIENTS_PER_RANK
F_BYZ = 3
CLIENT_BATCH = 128
GLOBAL_BATCH = N * CLIENT_BATCH
STEPS = 50
LR = 0.1
MOMENTUM = 0.9
CLASSES = 10
CHANCE = 1.0 / CLASSES
TRAIN_SIZE = 20_000
TEST_SIZE = 1_000

ROBUST_ACCURACY = 0.55
COLLAPSED_ACCURACY = 0.20
LEARNED_ACCURACY = 0.60
# tau on the scale of the honest deviations (aggregate norms here: 0.2-0.3). With the default tau = 1,
# 3 of 12 attackers can move the centre by 3 * 1 / 12 = 0.25 per step, the size of the honest step itself:
# under ipm_eps4 that collapsed training (accuracy 0.08); see the ``centered_clipping_tau1`` entry.
RULE_PARAMS: dict[str, dict[str, Any]] = {"centered_clipping": {"tau": 0.1}}
TRIGGER = Trigger(size=2, value=4.0, corner="bottom_right")
BACKDOOR_TARGET = 0
CLEAN_BACKDOOR_RATE = 0.30
IMPLANTED_BACKDOOR_RATE = 0.50


# ------------------------------------------------------------------------------------------- task
@functools.cache
def task() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(train_x, train_y, test_x, test_y)`` from one teacher (built on the ranks, on first use)."""
    x, y = synthetic_classification(TRAIN_SIZE + TEST_SIZE, (1, 6, 6), CLASSES, seed=0)
    return x[:TRAIN_SIZE], y[:TRAIN_SIZE], x[TRAIN_SIZE:], y[TRAIN_SIZE:]


def make_model() -> nn.Module:
    return nn.Sequential(nn.Flatten(), models.tiny_mlp(36, 32, CLASSES, seed=1))


def global_batches(steps: int = STEPS) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The same sequence of global batches on every rank (seeded sampling from the training pool)."""
    train_x, train_y, _, _ = task()
    generator = torch.Generator().manual_seed(5)
    batches = []
    for _ in range(steps):
        index = torch.randperm(TRAIN_SIZE, generator=generator)[:GLOBAL_BATCH]
        batches.append((train_x[index], train_y[index]))
    return batches


def poison(batch: tuple[torch.Tensor, torch.Tensor], how: str, clients: range) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch with the given clients' samples replaced by the data attack's version."""
    x, y = batch[0].clone(), batch[1].clone()
    for client in clients:
        rows = slice(client * CLIENT_BATCH, (client + 1) * CLIENT_BATCH)
        plain = TensorDataset(x[rows], y[rows])
        if how == "label_flip":
            wrapped: Any = LabelFlipDataset(plain, CLASSES)
        elif how == "backdoor":
            wrapped = BackdoorDataset(plain, target=BACKDOOR_TARGET, fraction=1.0, trigger=TRIGGER, seed=client)
        else:
            raise ValueError(f"unknown data attack {how!r}")
        xs, ys = zip(*(wrapped[i] for i in range(len(wrapped))), strict=True)
        x[rows], y[rows] = torch.stack(list(xs)), torch.tensor(ys)
    return x, y


def train(strategy: RobustStrategy, rank: int, data_attack: str | None = None) -> None:
    """STEPS steps; after each one every rank must hold bit-identical parameters and aggregate."""
    for batch in global_batches():
        if data_attack is not None:
            batch = poison(batch, data_attack, range(F_BYZ))
        step_on_shard(strategy, batch, rank)
        assert strategy.last_aggregate is not None
        assert_identical_across_ranks(strategy.last_aggregate, what=f"aggregate of step {strategy.steps_done}")
    assert_identical_across_ranks(parameters(strategy.model), what="parameters after training")


def step_on_shard(strategy: Strategy, batch: tuple[torch.Tensor, torch.Tensor], rank: int) -> None:
    inputs, targets = shard(batch, rank, WORLD)
    strategy.step(inputs, targets, F.cross_entropy)


def parameters(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


@torch.no_grad()
def accuracy(model: nn.Module) -> float:
    _, _, test_x, test_y = task()
    return float((model(test_x).argmax(dim=1) == test_y).double().mean())


def backdoor_success(model: nn.Module) -> float:
    """Share of the non-target test inputs that the model sends to the target once triggered."""
    _, _, test_x, test_y = task()
    return attack_success_rate(model, TensorDataset(test_x, test_y), TRIGGER, BACKDOOR_TARGET)


def check_learned(acc: float) -> None:
    """Raise unless the accuracy rose well above chance (the check a 10 %-forever run must fail)."""
    if not acc >= LEARNED_ACCURACY:
        raise AssertionError(f"the model did not learn: accuracy {acc:.3f} < {LEARNED_ACCURACY} (chance {CHANCE})")


def robust(aggregator: str, **options: Any) -> RobustStrategy:
    options.setdefault("f", F_BYZ)
    options.setdefault("aggregator_params", dict(RULE_PARAMS.get(aggregator, {})))
    strategy = build("robust", make_model(), lr=LR, momentum=MOMENTUM, aggregator=aggregator,
                     clients_per_rank=CLIENTS_PER_RANK, **options)
    assert isinstance(strategy, RobustStrategy)
    return strategy


# ---------------------------------------------------------------- property 12: bit-identical on ranks
IDENTITY_RULES: list[tuple[str, dict[str, Any]]] = [
    ("mean", {}),
    ("median", {}),
    ("trimmed_mean", {}),
    ("meamed", {}),
    ("krum", {}),
    ("multi_krum", {}),
    ("bulyan", {}),
    ("geometric_median", {}),
    ("centered_clipping", {}),
    ("median", {"pre": ["nnm"]}),
    ("median", {"pre": [("bucketing", {"s": 2, "seed": 11})]}),
    ("trimmed_mean", {"pre": [("clip", {"c": 1.0})]}),
]


@pytest.mark.dmlbench(world_size=WORLD)
@pytest.mark.parametrize(
    ("aggregator", "extra"), IDENTITY_RULES,
    ids=["mean", "median", "trimmed_mean", "meamed", "krum", "multi_krum", "bulyan", "geometric_median",
         "centered_clipping", "nnm+median", "bucketing+median", "clip+trimmed_mean"],
)
def test_every_rank_aggregates_bit_identically(dist: Any, aggregator: str, extra: dict[str, Any]) -> None:
    """Property 12 under a real process group: f = 2 (bulyan needs n >= 4f + 3 = 11), a seeded gaussian
    attack; after each of 5 steps the aggregates' and parameters' SHA-256 agree on all ranks."""
    strategy = robust(aggregator, f=2, attack="gaussian", attack_params={"scale": 0.5}, **extra)
    for batch in global_batches(5):
        step_on_shard(strategy, batch, dist.rank)
        assert strategy.last_aggregate is not None and bool(torch.isfinite(strategy.last_aggregate).all())
        assert_identical_across_ranks(strategy.last_aggregate, what=f"{aggregator} aggregate")
        assert_identical_across_ranks(parameters(strategy.model), what=f"{aggregator} parameters")


@pytest.mark.dmlbench(world_size=WORLD)
def test_bit_identity_check_catches_rank_dependent_aggregation(dist: Any) -> None:
    """Negative control: bucketing seeded with the rank aggregates differently per rank; the check sees it."""
    strategy = robust("median", f=2, pre=[("bucketing", {"s": 2, "seed": dist.rank})])
    step_on_shard(strategy, global_batches(1)[0], dist.rank)
    assert strategy.last_aggregate is not None
    mismatched = disagreeing_ranks(strategy.last_aggregate)
    assert mismatched, "rank-seeded bucketing gave identical aggregates: the identity check cannot fail"
    with pytest.raises(AssertionError, match="not bit-identical"):
        assert_identical_across_ranks(strategy.last_aggregate, what="rank-seeded aggregate")


# ------------------------------------------------------------------------ accuracy under attack
ROBUST_RULES = ["median", "trimmed_mean", "krum", "centered_clipping"]
REPORTED_RULES = ["geometric_median", "meamed", "multi_krum"]
ATTACKS: dict[str, dict[str, Any]] = {
    "none": {},
    "sign_flip": {"attack": "sign_flip"},
    "alie": {"attack": "alie"},
    "ipm_eps4": {"attack": "ipm", "attack_params": {"eps": 4.0}},
    "inf": {"attack": "inf"},
    "nan": {"attack": "nan"},
}
MEAN_COLLAPSES = {"ipm_eps4", "inf", "nan", "sign_flip_half"}
MATRIX = [(rule, name) for rule in ["mean", *ROBUST_RULES, *REPORTED_RULES] for name in ATTACKS]
MATRIX.append(("mean", "sign_flip_half"))
MATRIX.append(("centered_clipping_tau1", "ipm_eps4"))  # recorded: the tau sensitivity


def attack_options(name: str) -> dict[str, Any]:
    if name == "sign_flip_half":
        return {"attack": "sign_flip", "byzantine_ranks": list(range(N // 2))}
    return dict(ATTACKS[name])


@pytest.mark.dmlbench(world_size=WORLD)
@pytest.mark.parametrize(("aggregator", "attack_name"), MATRIX, ids=[f"{a}-{k}" for a, k in MATRIX])
def test_accuracy_under_attack(dist: Any, dmlbench: Any, aggregator: str, attack_name: str) -> None:
    """Records the final accuracy per (aggregator, attack); asserts the thresholds of the module docstring."""
    if aggregator == "centered_clipping_tau1":
        strategy = robust("centered_clipping", aggregator_params={"tau": 1.0}, **attack_options(attack_name))
    else:
        strategy = robust(aggregator, **attack_options(attack_name))
    train(strategy, dist.rank)
    acc = accuracy(strategy.model)
    dmlbench.record("accuracy", [acc])
    finite = bool(torch.isfinite(parameters(strategy.model)).all())
    error = None
    if aggregator in ROBUST_RULES and attack_name != "none":
        if not (finite and acc >= ROBUST_ACCURACY):
            error = f"{aggregator} under {attack_name}: accuracy {acc:.3f} < {ROBUST_ACCURACY} or non-finite"
    elif aggregator == "mean" and attack_name in MEAN_COLLAPSES:
        if not acc <= COLLAPSED_ACCURACY:
            error = f"mean under {attack_name} did not collapse: accuracy {acc:.3f} > {COLLAPSED_ACCURACY}"
    elif aggregator != "mean" and not finite:
        error = f"{aggregator} under {attack_name}: parameters became non-finite"
    raise_on_all_ranks(error, what="accuracy threshold")


@pytest.mark.dmlbench(world_size=WORLD)
def test_learning_actually_happens(dist: Any, dmlbench: Any) -> None:
    """Mean, no attack: accuracy must rise well above chance; the never-updated model fails the check."""
    strategy = robust("mean", f=0)
    untouched = copy.deepcopy(strategy.model)
    train(strategy, dist.rank)
    acc = accuracy(strategy.model)
    dmlbench.record("accuracy", [acc])
    check_learned(acc)
    with pytest.raises(AssertionError, match="did not learn"):
        check_learned(accuracy(untouched))
    clean_rate = backdoor_success(strategy.model)
    dmlbench.record("attack_success_rate", [clean_rate])
    assert clean_rate <= CLEAN_BACKDOOR_RATE, f"unpoisoned model sends {clean_rate:.3f} of triggered inputs to 0"


# ------------------------------------------------------------------------------- data attacks
DATA_MATRIX = [(rule, how) for rule in ["mean", *ROBUST_RULES] for how in ("label_flip", "backdoor")]


@pytest.mark.dmlbench(world_size=WORLD)
@pytest.mark.parametrize(("aggregator", "how"), DATA_MATRIX, ids=[f"{a}-{h}" for a, h in DATA_MATRIX])
def test_data_poisoning(dist: Any, dmlbench: Any, aggregator: str, how: str) -> None:
    """The F Byzantine clients train on poisoned data (labels flipped, or every sample triggered and
    relabelled as class 0). Records accuracy and, for the backdoor, the attack success rate on the
    triggered test inputs; the model must still learn (accuracy >= 0.60)."""
    strategy = robust(aggregator)
    train(strategy, dist.rank, data_attack=how)
    acc = accuracy(strategy.model)
    dmlbench.record("accuracy", [acc])
    if how == "backdoor":
        rate = backdoor_success(strategy.model)
        dmlbench.record("attack_success_rate", [rate])
        if aggregator == "mean":  # the metric sees a backdoor that is there
            assert rate >= IMPLANTED_BACKDOOR_RATE, f"backdoor through the mean: success rate only {rate:.3f}"
    check_learned(acc)


# ---------------------------------------------------------------------------------- integrity
TAMPERED_CLIENT = 4  # lives on rank 1
INTEGRITY_STEPS = 6
SECRET = b"robust-training-case-secret"


def integrity_run(rank: int, *, integrity: bool, tamper: bool) -> RobustStrategy:
    strategy = robust("mean", f=0, integrity=integrity, session_secret=SECRET,
                      tamper_ranks=[TAMPERED_CLIENT] if tamper else [])
    for batch in global_batches(INTEGRITY_STEPS):
        step_on_shard(strategy, batch, rank)
    return strategy


@pytest.mark.dmlbench(world_size=WORLD)
def test_tampered_update_is_rejected_on_every_rank(dist: Any) -> None:
    """A client whose update changes by one bit after signing is rejected and counted on every rank."""
    strategy = integrity_run(dist.rank, integrity=True, tamper=True)
    assert strategy.rejected_updates == INTEGRITY_STEPS
    assert strategy.verifier is not None
    assert dict(strategy.verifier.rejections) == {TAMPERED_CLIENT: INTEGRITY_STEPS}
    assert_identical_across_ranks(parameters(strategy.model), what="parameters with a rejected client")
    # negative control: without the integrity layer the same tampering passes unnoticed and changes training
    unchecked = integrity_run(dist.rank, integrity=False, tamper=True)
    clean = integrity_run(dist.rank, integrity=False, tamper=False)
    assert unchecked.rejected_updates == 0
    assert not torch.equal(parameters(unchecked.model), parameters(clean.model))


@pytest.mark.dmlbench(world_size=WORLD)
def test_model_hash_chain_verifies_and_detects_edits(dist: Any) -> None:
    """Every step appends the parameters' SHA-256 to the chain; the chain verifies and is the same on every
    rank; an edited entry (negative control) fails verification."""
    strategy = integrity_run(dist.rank, integrity=True, tamper=False)
    log = strategy.model_log
    assert strategy.rejected_updates == 0
    assert len(log.entries) == INTEGRITY_STEPS and log.verify()
    final = {str(i): p for i, p in enumerate(strategy.params)}
    assert log.entries[-1][1] == model_digest(final), "the chain's last entry is not the final model"
    last_chain_hash = torch.frombuffer(bytearray(bytes.fromhex(log.entries[-1][2])), dtype=torch.uint8)
    assert_identical_across_ranks(last_chain_hash, what="hash chain head")
    step, model_hash, chain_hash = log.entries[2]
    edited = ModelHashChain(list(log.entries))
    edited.entries[2] = (step, model_hash[:-1] + ("0" if model_hash[-1] != "0" else "1"), chain_hash)
    assert not edited.verify() and edited.first_invalid() == 2


# ------------------------------------------------------------------------------- bytes per step
@pytest.mark.dmlbench(world_size=WORLD)
@pytest.mark.parametrize("integrity", [False, True], ids=["plain", "integrity"])
def test_bytes_per_step_match_the_docstring(dist: Any, dmlbench: Any, integrity: bool) -> None:
    """One all_gather of clients_per_rank * P * 4 bytes (float32), plus 32 bytes per client with
    integrity; the no-communication twin hands nothing to communication."""
    strategy = robust("median", integrity=integrity, session_secret=SECRET)
    twin = strategy.twin()
    batch = global_batches(1)[0]
    step_on_shard(strategy, batch, dist.rank)
    step_on_shard(twin, batch, dist.rank)
    p = sum(param.numel() for param in strategy.model.parameters())
    expected = CLIENTS_PER_RANK * p * 4 + (CLIENTS_PER_RANK * SIGNATURE_BYTES if integrity else 0)
    assert strategy.comm_bytes_by_op == {"all_gather": expected}
    assert twin.comm_bytes_last_step == 0
    dmlbench.record("comm_bytes_per_step", [strategy.comm_bytes_last_step])
