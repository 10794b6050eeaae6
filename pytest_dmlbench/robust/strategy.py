"""``robust``: Byzantine-robust data parallelism: all-gather every gradient, aggregate with a robust rule.

Each step every rank splits its shard into ``clients_per_rank`` equal client batches (default 1) and
computes one flat gradient per client, so the stack has ``n = world_size * clients_per_rank`` rows
(row ``i`` belongs to client ``i``, which lives on rank ``i // clients_per_rank``). The rows are
all-gathered; the rows of the Byzantine clients (``byzantine_ranks``: indices into the n rows, default
the first ``f``) are replaced by ``attack(name, honest_rows, f=len(byzantine), **attack_params)``; every
rank aggregates the same stack with ``aggregate(aggregator, stack, f=f, pre=pre, **aggregator_params)``
and applies the result as the gradient of one SGD step (momentum supported).

The attacker is simulated as omniscient: its rows are computed from the honest rows of the same step on
every rank identically (an attack that takes a ``seed`` gets ``seed + step`` unless one is given), which
models colluding ranks that see the honest updates without a second round of communication.

Integrity (``integrity=True``): each client signs its row with HMAC-SHA256 under a per-client key
derived from a session secret (``session_secret``, else 32 random bytes broadcast from rank 0 when the
strategy is built); the 32-byte signatures are all-gathered beside the rows, every rank verifies every
row, and rows whose signature does not match are dropped before aggregation (counted in
``rejected_updates``; the rule still assumes ``f`` Byzantine rows among the rest). After each step the
SHA-256 of the parameters is appended to ``model_log``, a hash chain that ``model_log.verify()`` checks.
Signing proves where a row comes from and that it was not changed after signing; it does not stop a
Byzantine client, which holds a valid key. ``tamper_ranks`` (fault injection) flips one byte of those
clients' rows after signing (the sign bit of the largest-magnitude entry).

Communication per step, for ``P`` parameters of ``s`` bytes each and ``c`` clients per rank: one
``all_gather`` to which this rank hands ``c * P * s`` bytes (it receives ``n * P * s``); with integrity a
second ``all_gather`` of ``32 c`` bytes. Buffers (BatchNorm statistics) are not communicated: they stay
local. The no-communication twin aggregates ``world_size`` copies of its own rows.
``byzantine_ranks`` only matters with a model-poisoning ``attack``; data attacks (``label_flip``,
``backdoor``) are applied by the caller to the attackers' data.
The keys are derived from one shared secret, as HMAC requires verifiers to hold the signer's key: the
layer protects against changes outside the ranks, not against a rank forging another rank's signature.
Tested for: ranks aggregate bit-identically for every rule; accuracy under attack; bytes per step as
stated; tampered rows rejected on every rank; the hash chain verifies and an edited one does not.
"""

from __future__ import annotations

import inspect
import secrets
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from pytest_dmlbench.errors import ConfigError
from pytest_dmlbench.robust.api import AGGREGATORS, ATTACKS, aggregate, attack
from pytest_dmlbench.robust.integrity import ModelHashChain, UpdateVerifier, sign_update
from pytest_dmlbench.robust.pre import PreSpec
from pytest_dmlbench.strategies.base import LossFn, Strategy, register

SIGNATURE_BYTES = 32
_SECRET_BYTES = 32


def flip_sign_bit_of_largest(row: torch.Tensor) -> None:
    """Fault injection: flip, in place, the sign bit (one bit of the top byte) of the largest entry."""
    index = int(row.abs().argmax())
    top_byte = row.element_size() - 1 if sys.byteorder == "little" else 0
    row.view(torch.uint8).view(-1, row.element_size())[index, top_byte] ^= 0x80


@register("robust")
class RobustStrategy(Strategy):
    """Gradients all-gathered, Byzantine rows replaced by an attack, robust aggregation, SGD step."""

    name = "robust"

    def __init__(
        self,
        model: nn.Module,
        *,
        aggregator: str = "median",
        f: int = 0,
        attack: str | None = None,
        byzantine_ranks: Sequence[int] | None = None,
        aggregator_params: Mapping[str, Any] | None = None,
        attack_params: Mapping[str, Any] | None = None,
        pre: PreSpec | Sequence[PreSpec] | None = None,
        clients_per_rank: int = 1,
        integrity: bool = False,
        session_secret: bytes | None = None,
        tamper_ranks: Sequence[int] = (),
        **common: Any,
    ) -> None:
        super().__init__(model, **common)
        if aggregator not in AGGREGATORS:
            raise ConfigError(f"robust: unknown aggregator {aggregator!r}; valid: {', '.join(AGGREGATORS)}")
        if attack is not None and attack not in ATTACKS:
            raise ConfigError(f"robust: unknown attack {attack!r}; valid: {', '.join(ATTACKS)} or None "
                              "(data attacks such as label_flip and backdoor poison the attackers' data instead)")
        if isinstance(clients_per_rank, bool) or not isinstance(clients_per_rank, int) or clients_per_rank < 1:
            raise ConfigError(f"robust: clients_per_rank must be an int >= 1, got {clients_per_rank!r}")
        self.clients_per_rank = clients_per_rank
        self.n = self.world_size * clients_per_rank
        if isinstance(f, bool) or not isinstance(f, int) or not 0 <= f < self.n:
            raise ConfigError(f"robust: f must be an int in [0, n) with n = {self.n} rows, got {f!r}")
        self.aggregator = aggregator
        self.f = f
        self.attack = attack
        self.pre = pre
        self.aggregator_params = dict(aggregator_params or {})
        self.attack_params = dict(attack_params or {})
        self.byzantine = self._rows("byzantine_ranks", range(f) if byzantine_ranks is None else byzantine_ranks)
        if attack is None:
            self.byzantine = []
        self.honest = [i for i in range(self.n) if i not in set(self.byzantine)]
        if attack is not None and not self.honest:
            raise ConfigError("robust: an attack needs at least one honest row to compute from")
        self.tamper = self._rows("tamper_ranks", tamper_ranks)
        self.integrity = integrity
        self.steps_done = 0
        self.rejected_updates = 0
        self.model_log = ModelHashChain()
        self.last_aggregate: torch.Tensor | None = None
        self.verifier: UpdateVerifier | None = None
        if integrity:
            self.verifier = UpdateVerifier(self._session_secret(session_secret))
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        dtypes = {p.dtype for p in self.params}
        if len(dtypes) != 1:
            raise ConfigError(f"robust: the trainable parameters must share one dtype, got {sorted(map(str, dtypes))}")
        self._broadcast_parameters_from(0)
        self.optimizer = self._optimizer(self.params)

    def _rows(self, what: str, rows: Sequence[int] | range) -> list[int]:
        chosen = list(rows)
        if len(set(chosen)) != len(chosen) or not all(isinstance(i, int) and 0 <= i < self.n for i in chosen):
            raise ConfigError(f"robust: {what} must be distinct row indices in [0, {self.n}), got {chosen!r}")
        return sorted(chosen)

    def _session_secret(self, given: bytes | None) -> bytes:
        if given is not None:
            if len(given) < 16:
                raise ConfigError(f"robust: session_secret must be at least 16 bytes, got {len(given)}")
            return given
        secret = torch.frombuffer(bytearray(secrets.token_bytes(_SECRET_BYTES)), dtype=torch.uint8)
        if self.communicate and self.world_size > 1:
            secret = secret.to(self.device)
            dist.broadcast(secret, 0)
        return bytes(secret.cpu().tolist())

    # ------------------------------------------------------------------------------------------ step
    def _step(self, inputs: torch.Tensor | None, targets: torch.Tensor | None, loss_fn: LossFn) -> float:
        x = self._to_device(inputs, "inputs")
        y = self._to_device(targets, "targets")
        rows, loss = self._client_gradients(x, y, loss_fn)
        first = self.rank * self.clients_per_rank
        signatures = self._sign(rows, first) if self.verifier is not None else None
        for j in range(self.clients_per_rank):
            if first + j in self.tamper:
                flip_sign_bit_of_largest(rows[j])
        stack, all_signatures = self._gather(rows, signatures)
        keep = self._verified(stack, all_signatures) if self.verifier is not None else list(range(self.n))
        stack = self._with_attack(stack, keep)
        aggregated = aggregate(self.aggregator, stack[keep], f=self.f, pre=self.pre, **self.aggregator_params)
        self.last_aggregate = aggregated
        self._apply(aggregated)
        if self.integrity:
            self.model_log.append(self.steps_done, {str(i): p for i, p in enumerate(self.params)})
        self.steps_done += 1
        return loss

    def _client_gradients(self, x: torch.Tensor, y: torch.Tensor, loss_fn: LossFn) -> tuple[torch.Tensor, float]:
        """One flat gradient row per client batch of this rank's shard, and the shard's mean loss."""
        c = self.clients_per_rank
        if x.shape[0] % c or x.shape[0] == 0:
            raise ConfigError(f"robust: a shard of {x.shape[0]} samples does not split into {c} equal non-empty "
                              f"client batches; use a shard size that is a multiple of clients_per_rank={c}")
        rows = []
        total = 0.0
        for xs, ys in zip(x.chunk(c), y.chunk(c), strict=True):
            loss = loss_fn(self.model(xs), ys)
            grads = torch.autograd.grad(loss, self.params, allow_unused=True)
            rows.append(torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1)
                                   for p, g in zip(self.params, grads, strict=True)]))
            total += float(loss.detach())
        return torch.stack(rows), total / c

    def _sign(self, rows: torch.Tensor, first: int) -> torch.Tensor:
        assert self.verifier is not None
        tags = [sign_update(self.verifier.key(first + j), first + j, self.steps_done, rows[j])
                for j in range(rows.shape[0])]
        return torch.frombuffer(bytearray(b"".join(tags)), dtype=torch.uint8).reshape(len(tags), SIGNATURE_BYTES)

    def _gather(self, rows: torch.Tensor, signatures: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The ``(n, P)`` stack (and ``(n, 32)`` signatures) of every client, in client order."""
        if not self.communicate or self.world_size == 1:
            stack = rows.repeat(self.world_size, 1)
            return stack, None if signatures is None else signatures.repeat(self.world_size, 1)
        parts = [torch.empty_like(rows) for _ in range(self.world_size)]
        dist.all_gather(parts, rows.contiguous())
        gathered = None
        if signatures is not None:
            mine = signatures.to(self.device)
            tag_parts = [torch.empty_like(mine) for _ in range(self.world_size)]
            dist.all_gather(tag_parts, mine)
            gathered = torch.cat(tag_parts).cpu()
        return torch.cat(parts), gathered

    def _verified(self, stack: torch.Tensor, signatures: torch.Tensor | None) -> list[int]:
        """Indices of the rows whose signature verifies (the twin checks its own copies as its own)."""
        assert self.verifier is not None and signatures is not None
        keep = []
        for i in range(self.n):
            signer = i if self.communicate else self.rank * self.clients_per_rank + i % self.clients_per_rank
            if self.verifier.verify(signer, self.steps_done, stack[i], bytes(signatures[i].tolist())):
                keep.append(i)
            else:
                self.rejected_updates += 1
        return keep

    def _with_attack(self, stack: torch.Tensor, keep: list[int]) -> torch.Tensor:
        """The stack with the Byzantine rows (among ``keep``) replaced by the attack on the honest ones."""
        byzantine = [i for i in self.byzantine if i in set(keep)]
        if self.attack is None or not byzantine:
            return stack
        honest = [i for i in self.honest if i in set(keep)]
        params = dict(self.attack_params)
        if "seed" in inspect.signature(ATTACKS[self.attack]).parameters and "seed" not in params:
            params["seed"] = self.steps_done
        bad = attack(self.attack, stack[honest], f=len(byzantine), **params)
        out = stack.clone()
        out[byzantine] = bad.to(out.dtype)
        return out

    def _apply(self, aggregated: torch.Tensor) -> None:
        offset = 0
        for p in self.params:
            size = p.numel()
            p.grad = aggregated[offset : offset + size].view_as(p).clone()
            offset += size
        self.optimizer.step()
