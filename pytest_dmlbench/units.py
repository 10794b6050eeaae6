"""Units: one formatter per kind of quantity, used by the terminal table, verdict messages and plots.

Bytes are shown in SI units (1 kB = 10^3 B, 1 MB = 10^6 B, 1 GB = 10^9 B), the system the metrics are
recorded in (``peak_rss_mb`` in MB, bandwidth in GB/s as nccl-tests defines it). Fractions show as
percent. Every figure has 4 significant digits. Parameter values such as ``16MB`` or ``4KiB`` sort by the
quantity they name (:func:`natural_key`), so 1MB comes before 4MB before 16MB.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

SIGNIFICANT_DIGITS = 4
BYTES_SYSTEM = "bytes in SI units (1 kB = 1000 B, 1 MB = 10^6 B, 1 GB = 10^9 B)"

_SCALES: dict[str, tuple[tuple[float, str], ...]] = {
    "s": ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")),
    "bytes": ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1.0, "B")),
    "B/s": ((1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s"), (1.0, "B/s")),
}
# Units recorded in a multiple of a base unit: (base unit, factor to the base).
_ALIASES: dict[str, tuple[str, float]] = {
    "ms": ("s", 1e-3),
    "us": ("s", 1e-6),
    "ns": ("s", 1e-9),
    "B": ("bytes", 1.0),
    "kB": ("bytes", 1e3),
    "KB": ("bytes", 1e3),
    "MB": ("bytes", 1e6),
    "GB": ("bytes", 1e9),
    "KiB": ("bytes", 2.0**10),
    "MiB": ("bytes", 2.0**20),
    "GiB": ("bytes", 2.0**30),
    "MB/s": ("B/s", 1e6),
    "GB/s": ("B/s", 1e9),
}
_PERCENT_UNITS = frozenset({"fraction"})


@dataclass(frozen=True)
class Scale:
    """How to show numbers recorded in ``unit``: multiply by ``factor`` and write ``label``."""

    factor: float
    label: str

    def number(self, value: float | None) -> str:
        """The scaled number alone (empty for a missing value), 4 significant digits."""
        if value is None or math.isnan(value):
            return ""
        return format_number(value * self.factor)

    def quantity(self, value: float | None) -> str:
        """The scaled number with its label (``n/a`` for a missing value)."""
        text = self.number(value)
        if not text:
            return "n/a"
        return f"{text} {self.label}" if self.label else text


def format_number(value: float) -> str:
    """4 significant digits, no exponent for ordinary magnitudes; ``inf``/``-inf`` spelled out."""
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.{SIGNIFICANT_DIGITS}g}"


def _base(unit: str) -> tuple[str, float]:
    if unit in _SCALES:
        return unit, 1.0
    return _ALIASES.get(unit, (unit, 1.0))


def scale_for(unit: str, reference: float | None) -> Scale:
    """The display scale that makes ``reference`` (a value recorded in ``unit``) readable.

    ``scale_for("s", 0.0123)`` shows milliseconds, ``scale_for("MB", 1500)`` gigabytes, ``scale_for("fraction",
    0.25)`` percent. Several values shown together (median, IQR, baseline) should share one scale.
    """
    if unit in _PERCENT_UNITS:
        return Scale(100.0, "%")
    base, to_base = _base(unit)
    scales = _SCALES.get(base)
    if scales is None:
        return Scale(1.0, unit)
    if reference is None or not math.isfinite(reference) or reference == 0:
        base_label = next(label for divisor, label in scales if divisor == 1.0)
        return Scale(to_base, base_label)  # nothing to scale by: the base unit (s, B, B/s)
    in_base = abs(reference) * to_base
    for divisor, label in scales:
        if in_base >= divisor * (1 - 1e-12):
            return Scale(to_base / divisor, label)
    divisor, label = scales[-1]
    return Scale(to_base / divisor, label)


def format_quantity(value: float | None, unit: str) -> str:
    """A value with its unit, scaled to read well: ``12.3 ms``, ``4.194 MB``, ``22.5 %``, ``n/a``."""
    reference = None if value is None or math.isnan(value) else value
    return scale_for(unit, reference).quantity(value)


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKMGT]i?B|B)\s*$")
_SIZE_FACTORS = {
    "B": 1.0, "kB": 1e3, "KB": 2.0**10, "MB": 2.0**20, "GB": 2.0**30, "TB": 2.0**40,
    "KiB": 2.0**10, "MiB": 2.0**20, "GiB": 2.0**30, "TiB": 2.0**40,
}
_NUMBER_WITH_UNIT = re.compile(r"(\d+(?:\.\d+)?)\s*([kKMGT]i?B\b|B\b)?")


def parse_size(text: str) -> float | None:
    """Bytes named by a size label (``4KB``, ``16MiB``, ``512B``); None when ``text`` is not one.

    Labels written ``KB``/``MB``/``GB`` in parameter ids follow the common binary reading (``16MB`` =
    16 x 2^20 B, as the collective cases allocate them); ``kB`` is 10^3. Used for ordering and plotting.
    """
    match = _SIZE.match(text)
    if match is None:
        return None
    return float(match.group(1)) * _SIZE_FACTORS[match.group(2)]


def natural_key(text: str) -> tuple[tuple[int, float, str], ...]:
    """A sort key that orders numbers (with byte units) by value: ``[x-1MB] < [x-4MB] < [x-16MB]``.

    Text between numbers compares as text; ``bs32`` < ``bs128``; ``1MB`` < ``1GB``.
    """
    parts: list[tuple[int, float, str]] = []
    position = 0
    for match in _NUMBER_WITH_UNIT.finditer(text):
        if match.start() > position:
            parts.append((0, 0.0, text[position : match.start()]))
        number = float(match.group(1))
        unit = match.group(2)
        value = number * _SIZE_FACTORS[unit] if unit else number
        parts.append((1, value, ""))
        position = match.end()
    if position < len(text):
        parts.append((0, 0.0, text[position:]))
    return tuple(parts)
