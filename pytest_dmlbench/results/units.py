"""Units: one formatter per kind of quantity, used by the terminal table, verdict messages and plots.

Bytes are shown in SI units (1 kB = 10^3 B, 1 MB = 10^6 B, 1 GB = 10^9 B), the system the metrics are
recorded in (``peak_rss_mb`` in MB, bandwidth in GB/s as nccl-tests defines it). A figure recorded in a
multiple (``MB``, ``GB/s``, ``ms``) keeps that unit, the one its name gives: ``busbw_gbps`` is always in
GB/s, ``peak_rss_mb`` in MB; only a base unit (``s``, ``bytes``, ``B/s``) is scaled to read well. The table
shows every figure in its metric's own unit (:func:`named_scale`). Fractions show as percent. Numbers never
take an exponent (:func:`format_number`). Parameter values such as ``16MB`` or ``4KiB`` sort by the
quantity they name (:func:`natural_key`), so 1MB comes before 4MB before 16MB.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

SIGNIFICANT_DIGITS = 4
BYTES_SYSTEM = "SI bytes (1 MB = 10^6 B)"

_SCALES: dict[str, tuple[tuple[float, str], ...]] = {
    "s": ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")),
    "bytes": ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1.0, "B")),
    "B/s": ((1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s"), (1.0, "B/s")),
}
# Units recorded in a multiple of a base unit: shown as recorded, the unit a metric's name gives.
_MULTIPLES = frozenset({"ms", "us", "ns", "B", "kB", "KB", "MB", "GB", "KiB", "MiB", "GiB", "MB/s", "GB/s"})
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
    """One format for every figure, never an exponent: from 1000 on the whole number (``13974``, beside
    an IQR of ``2731``), below it 4 significant digits without trailing zeros (``248.2``, ``0.00549``);
    ``inf``/``-inf``/``nan`` spelled out."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if abs(value) >= 10.0**(SIGNIFICANT_DIGITS - 1) - 0.5:
        return f"{value:.0f}"
    if value == 0:
        return "0"
    decimals = max(0, SIGNIFICANT_DIGITS - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:.{decimals}f}"
    text = text.rstrip("0").rstrip(".") if "." in text else text
    return "0" if text in ("-0", "") else text


def named_scale(unit: str) -> Scale:
    """A metric's figures in the unit it was recorded in (its name's): ``GB/s`` stays GB/s, ``MB`` MB,
    ``s`` s; a fraction shows as percent."""
    return Scale(100.0, "%") if unit in _PERCENT_UNITS else Scale(1.0, unit)


def scale_for(unit: str, reference: float | None) -> Scale:
    """The display scale that makes ``reference`` (a value recorded in ``unit``) readable.

    ``scale_for("s", 0.0123)`` shows milliseconds, ``scale_for("bytes", 1.5e9)`` gigabytes,
    ``scale_for("fraction", 0.25)`` percent. A unit recorded in a multiple (``MB``, ``GB/s``, ``ms``) is kept
    as it is (:func:`named_scale`). Several values shown together (median, IQR, baseline) share one scale.
    """
    if unit in _PERCENT_UNITS or unit in _MULTIPLES:
        return named_scale(unit)
    scales = _SCALES.get(unit)
    if scales is None:
        return Scale(1.0, unit)
    if reference is None or not math.isfinite(reference) or reference == 0:
        base_label = next(label for divisor, label in scales if divisor == 1.0)
        return Scale(1.0, base_label)  # nothing to scale by: the base unit (s, B, B/s)
    for divisor, label in scales:
        if abs(reference) >= divisor * (1 - 1e-12):
            return Scale(1.0 / divisor, label)
    divisor, label = scales[-1]
    return Scale(1.0 / divisor, label)


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
