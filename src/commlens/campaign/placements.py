"""Placement names that say their shape: <nodes>N<ppn>P, as in 1N2P, optionally labelled (2N1P-ib)."""

from __future__ import annotations

import re

# <nodes>N<ppn>P, then the name's end or a label after '-', '_', '@' or '.' (2N1P-ib, 1N2P@shm).
_SHAPED_NAME = re.compile(r"^(\d+)N(\d+)P(?:$|[-_@.])")


def shape_from_placement_name(name: str) -> tuple[int, int] | None:
    """(nodes, ppn) a placement's name says, e.g. (2, 1) for 2N1P or 2N1P-ib; None for a name that
    says neither."""
    match = _SHAPED_NAME.match(name)
    return (int(match.group(1)), int(match.group(2))) if match else None
