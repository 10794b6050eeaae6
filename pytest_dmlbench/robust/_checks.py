"""Input validation and the small numeric helpers every rule shares."""

from __future__ import annotations

import torch
from torch import Tensor


def check_updates(updates: object, rule: str) -> Tensor:
    """Return ``updates`` if it is a floating ``(n, d)`` tensor with n, d >= 1, else raise."""
    if not isinstance(updates, Tensor):
        raise TypeError(
            f"{rule}: updates must be a torch.Tensor of shape (n, d), got {type(updates).__name__}; "
            "stack the flattened per-rank vectors with torch.stack"
        )
    if updates.dim() != 2 or updates.shape[0] < 1 or updates.shape[1] < 1:
        raise ValueError(
            f"{rule}: updates must have shape (n, d) with n >= 1 and d >= 1, got {tuple(updates.shape)}; "
            "flatten each update to one row"
        )
    if not updates.is_floating_point():
        raise TypeError(f"{rule}: updates must have a floating dtype, got {updates.dtype}; use .float()")
    return updates


def check_f(f: object, n: int, rule: str) -> int:
    """Return ``f`` if it is an integer in [0, n], else raise naming the value."""
    if isinstance(f, bool) or not isinstance(f, int):
        raise TypeError(f"{rule}: f must be an int (number of Byzantine inputs), got {f!r}")
    if not 0 <= f <= n:
        raise ValueError(f"{rule}: f must satisfy 0 <= f <= n, got f={f}, n={n}")
    return f


def require(condition: bool, rule: str, precondition: str, **values: object) -> None:
    """Raise ``ValueError`` naming the rule, its precondition and the offending values."""
    if not condition:
        shown = ", ".join(f"{k}={v}" for k, v in values.items())
        raise ValueError(f"{rule} requires {precondition}, got {shown}")


def finite_rows(x: Tensor) -> Tensor:
    """Boolean mask of the rows whose entries are all finite.

    A row sum is non-finite whenever the row holds inf or NaN, so the cheap row sum screens every row
    and only the flagged rows (possibly finite rows whose sum overflowed) are checked element-wise.
    """
    mask = torch.isfinite(x.sum(dim=1))
    if not bool(mask.all()):
        flagged = (~mask).nonzero().flatten()
        mask[flagged] = torch.isfinite(x[flagged]).all(dim=1)
    return mask


def compute_dtype(x: Tensor) -> torch.dtype:
    """float32 for half-precision inputs (CPU kernels and accuracy), the input dtype otherwise."""
    return torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype


def row_norms(rows: Tensor) -> Tensor:
    """Euclidean norm of each row, rescaling the rows whose plain norm overflows (finite but huge)."""
    norms: torch.Tensor = torch.linalg.vector_norm(rows, dim=1)
    overflow = torch.isinf(norms)
    if bool(overflow.any()):
        index = overflow.nonzero().flatten()
        big = rows[index]
        scale = big.abs().amax(dim=1, keepdim=True)
        norms[index] = scale.squeeze(1) * torch.linalg.vector_norm(big / scale, dim=1)
    return norms
