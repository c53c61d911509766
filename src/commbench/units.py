"""Numbers as people write and read them: message sizes in campaign files (4096, "64Ki", "4Mi", "1k"),
and sizes, times, durations and changes in every table, message and report. One place, so that a
size reads "64 KiB" and a change "12% slower" wherever commbench prints one."""

import re

_MULTIPLIERS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
_SIZE = re.compile(r"^\s*(\d+)\s*(Ki|Mi|Gi|k|M|G)?\s*$")


def parse_size(value) -> int:
    """Bytes from an int or a string with an optional k/M/G (decimal) or Ki/Mi/Gi (binary) suffix."""
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"size must be >= 0, got {value}")
        return value
    match = _SIZE.match(str(value))
    if not match:
        raise ValueError(f"not a size: {value!r} (bytes, optionally with k, M, G, Ki, Mi or Gi)")
    number, suffix = match.groups()
    return int(number) * _MULTIPLIERS[suffix or ""]


def format_size(size) -> str:
    """Bytes as people read them: '8 B', '4 KiB', '1.5 MiB' (binary units, one decimal at most)."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{value:.1f}".removesuffix(".0") + f" {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_size_range(low, high) -> str:
    """'4 KiB' or '4 KiB–64 KiB'."""
    return format_size(low) if low == high else f"{format_size(low)}–{format_size(high)}"


def format_change(ratio: float, low: float, high: float) -> str:
    """A ratio of times (candidate / baseline) and its interval as a change: '12% slower [9%, 15%]'."""
    word = "slower" if ratio > 1 else "faster"
    bounds = sorted(abs(value - 1) * 100 for value in (low, high))
    return f"{abs(ratio - 1) * 100:.0f}% {word} [{bounds[0]:.0f}%, {bounds[1]:.0f}%]"


def format_seconds(seconds) -> str:
    """A measured time with its unit: '3.2 ms', '850 ns'; '' for a missing or infinite one."""
    if seconds is None or seconds != seconds or abs(seconds) == float("inf"):
        return ""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if abs(seconds) >= scale or unit == "ns":
            return f"{seconds / scale:.3g} {unit}"
    raise AssertionError("unreachable")


def format_duration(seconds: float) -> str:
    """How long something took or will take, as a person reads it: '0.4 s', '14 s', '6 min', '2.5 h'."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
