"""Byzantine-robust aggregation, attacks and an integrity layer.

    from pytest_dmlbench.robust import aggregate, attack
    bad = attack("alie", honest, f=2)                      # (2, d) rows the attackers send
    g = aggregate("krum", torch.cat([honest, bad]), f=2)   # (d,)
    g = aggregate("median", x, f=2, pre=["nnm"])           # nearest-neighbour mixing first
    g = aggregate("krum", x, f=1, pre=[("clip", {"c": 1.0}), "nnm"])
    g = aggregate("trimmed_mean", x, f=1, pre=[("bucketing", {"s": 2, "seed": 7})])

``pre`` is a name, a ``(name, params)`` pair, or a list of them, applied left to right before the rule;
every step receives the same f. Definitions and conventions (median of even n = mean of the two middle
values, Krum ties to the lowest index, ...) are in each rule's docstring. Bad (n, f) raise ``ValueError``
naming the rule's precondition; unknown names list the valid ones. Inputs are never modified; every rule
is deterministic (bucketing and gaussian take seeds). Rows holding inf or NaN sort to the extremes and lie
at infinite distance, so a rule whose f covers them still returns a finite result.

Data attacks: ``LabelFlipDataset``, ``BackdoorDataset`` (+ ``attack_success_rate``). Integrity:
``sign_update`` / ``UpdateVerifier`` (HMAC-SHA256 per rank and round) and ``ModelHashChain`` (SHA-256
hash-chained log of the model per round, ``verify()``).

Training: ``strategies.build("robust", model, lr=..., aggregator="krum", f=2, attack="alie")`` (module
:mod:`pytest_dmlbench.robust.strategy`, imported on first use) all-gathers every gradient, lets the
Byzantine rows attack, aggregates identically on every rank and steps; ``integrity=True`` adds signing.
"""

from __future__ import annotations

from pytest_dmlbench.robust.api import AGGREGATORS, ATTACKS, aggregate, attack
from pytest_dmlbench.robust.data_attacks import (
    BackdoorDataset,
    LabelFlipDataset,
    Trigger,
    apply_trigger,
    attack_success_rate,
)
from pytest_dmlbench.robust.integrity import ModelHashChain, UpdateVerifier, derive_rank_key, sign_update
from pytest_dmlbench.robust.pre import PRE_AGGREGATIONS

__all__ = [
    "AGGREGATORS",
    "ATTACKS",
    "PRE_AGGREGATIONS",
    "BackdoorDataset",
    "LabelFlipDataset",
    "ModelHashChain",
    "Trigger",
    "UpdateVerifier",
    "aggregate",
    "apply_trigger",
    "attack",
    "attack_success_rate",
    "derive_rank_key",
    "sign_update",
]
