"""Message sizes as people write them in campaign files: 4096, "64Ki", "4Mi", "1k"."""

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
