"""Integrity layer: HMAC-SHA256 signed per-rank updates and a SHA-256 hash-chained model log."""

from __future__ import annotations

import hashlib
import hmac
import json
import struct
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

_GENESIS = bytes(32)


def tensor_bytes(tensor: Tensor) -> bytes:
    """The raw bytes of ``tensor`` (CPU, contiguous), with dtype and shape prepended."""
    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    header = f"{flat.dtype}|{tuple(tensor.shape)}|".encode()
    return header + flat.view(torch.uint8).numpy().tobytes()


def derive_rank_key(session_secret: bytes, rank: int) -> bytes:
    """Per-rank key HMAC-SHA256(session_secret, "dmlbench-rank-key" || rank)."""
    if len(session_secret) < 16:
        raise ValueError(f"session secret must be at least 16 bytes, got {len(session_secret)}")
    return hmac.new(session_secret, b"dmlbench-rank-key" + struct.pack(">q", rank), hashlib.sha256).digest()


def sign_update(key: bytes, rank: int, round: int, tensor: Tensor) -> bytes:
    """HMAC-SHA256 tag over (rank, round, dtype, shape, bytes) of one update."""
    mac = hmac.new(key, struct.pack(">qq", rank, round), hashlib.sha256)
    mac.update(tensor_bytes(tensor))
    return mac.digest()


@dataclass
class UpdateVerifier:
    """Checks signed updates with keys derived from one session secret and counts the rejections."""

    session_secret: bytes
    rejections: Counter[int] = field(default_factory=Counter)

    def key(self, rank: int) -> bytes:
        return derive_rank_key(self.session_secret, rank)

    def verify(self, rank: int, round: int, tensor: Tensor, signature: bytes) -> bool:
        """True when ``signature`` is rank's tag for this update and round; else count a rejection."""
        ok = hmac.compare_digest(sign_update(self.key(rank), rank, round, tensor), signature)
        if not ok:
            self.rejections[rank] += 1
        return ok

    @property
    def total_rejected(self) -> int:
        return sum(self.rejections.values())


def model_digest(parameters: Mapping[str, Tensor] | Iterable[Tensor] | torch.nn.Module) -> str:
    """SHA-256 (hex) of a model's parameters: names (when known), dtypes, shapes and bytes, in order."""
    if isinstance(parameters, torch.nn.Module):
        items: Iterable[tuple[str, Tensor]] = parameters.state_dict().items()
    elif isinstance(parameters, Mapping):
        items = parameters.items()
    else:
        items = ((str(i), t) for i, t in enumerate(parameters))
    digest = hashlib.sha256()
    for name, tensor in items:
        digest.update(name.encode() + b"\0" + tensor_bytes(tensor))
    return digest.hexdigest()


def _link(previous: str, round: int, model_hash: str) -> str:
    payload = bytes.fromhex(previous) + struct.pack(">q", round) + bytes.fromhex(model_hash)
    return hashlib.sha256(payload).hexdigest()


@dataclass
class ModelHashChain:
    """Per-round log of model hashes, each entry chained to the previous one by SHA-256.

    ``entries`` holds (round, model_hash, chain_hash); chain_hash = SHA-256(previous chain_hash || round
    || model_hash), starting from 32 zero bytes. Editing any entry breaks ``verify()``.
    """

    entries: list[tuple[int, str, str]] = field(default_factory=list)

    def append(self, round: int, model: Mapping[str, Tensor] | Iterable[Tensor] | torch.nn.Module) -> str:
        model_hash = model_digest(model)
        previous = self.entries[-1][2] if self.entries else _GENESIS.hex()
        chain_hash = _link(previous, round, model_hash)
        self.entries.append((round, model_hash, chain_hash))
        return chain_hash

    def first_invalid(self) -> int | None:
        """Index of the first entry whose chain hash does not follow, or None when the log is intact."""
        previous = _GENESIS.hex()
        for index, (round, model_hash, chain_hash) in enumerate(self.entries):
            if not hmac.compare_digest(_link(previous, round, model_hash), chain_hash):
                return index
            previous = chain_hash
        return None

    def verify(self) -> bool:
        return self.first_invalid() is None

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps({"schema": 1, "entries": self.entries}, indent=1))

    @classmethod
    def load(cls, path: str | Path) -> ModelHashChain:
        data = json.loads(Path(path).read_text())
        if data.get("schema") != 1:
            raise ValueError(f"{path}: not a model hash chain of schema 1")
        return cls([(int(r), str(m), str(c)) for r, m, c in data["entries"]])
