"""HMAC-signed updates and the SHA-256 hash-chained model log, with tampering as negative controls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from pytest_dmlbench.robust.integrity import (
    ModelHashChain,
    UpdateVerifier,
    derive_rank_key,
    model_digest,
    sign_update,
)

SECRET = b"0123456789abcdef-session"


def test_signed_update_verifies_and_tampering_is_rejected_and_counted() -> None:
    verifier = UpdateVerifier(SECRET)
    update = torch.randn(1000)
    tag = sign_update(derive_rank_key(SECRET, 2), 2, 7, update)
    assert verifier.verify(2, 7, update, tag)
    tampered = update.clone()
    tampered[123] += 1e-6
    assert not verifier.verify(2, 7, tampered, tag)
    assert not verifier.verify(2, 8, update, tag)  # replayed in another round
    assert not verifier.verify(3, 7, update, tag)  # claimed by another rank
    assert not verifier.verify(2, 7, update.double(), tag)  # same values, other dtype
    assert verifier.rejections == {2: 3, 3: 1} and verifier.total_rejected == 4


def test_rank_keys_differ_and_depend_on_the_secret() -> None:
    assert derive_rank_key(SECRET, 0) != derive_rank_key(SECRET, 1)
    assert derive_rank_key(SECRET, 0) != derive_rank_key(SECRET + b"x", 0)
    with pytest.raises(ValueError, match="at least 16 bytes"):
        derive_rank_key(b"short", 0)


def test_hash_chain_verifies_and_detects_any_edited_entry(tmp_path: Path) -> None:
    model = torch.nn.Linear(4, 2)
    chain = ModelHashChain()
    for round in range(5):
        with torch.no_grad():
            model.weight.add_(0.1)
        chain.append(round, model)
    assert chain.verify() and chain.first_invalid() is None
    path = tmp_path / "chain.json"
    chain.save(path)
    assert ModelHashChain.load(path).verify()
    for index, position in [(2, 1), (0, 0), (4, 2)]:
        data = json.loads(path.read_text())
        entry = data["entries"][index]
        entry[position] = (entry[position] + 1) if position == 0 else ("0" * 64)
        edited = tmp_path / f"edited{index}{position}.json"
        edited.write_text(json.dumps(data))
        assert ModelHashChain.load(edited).first_invalid() == index


def test_hash_chain_detects_a_recomputed_entry_without_its_successors() -> None:
    chain = ModelHashChain()
    for round in range(3):
        chain.append(round, [torch.full((3,), float(round))])
    forged = ModelHashChain()
    forged.append(0, [torch.zeros(3)])
    forged.append(1, [torch.full((3,), 99.0)])  # a different model at round 1, chained correctly
    chain.entries[1] = forged.entries[1]
    assert chain.first_invalid() == 2


def test_model_digest_sees_every_parameter_bit() -> None:
    model = torch.nn.Linear(3, 1)
    before = model_digest(model)
    with torch.no_grad():
        model.bias.copy_(torch.nextafter(model.bias, torch.tensor(1.0)))
    assert model_digest(model) != before
