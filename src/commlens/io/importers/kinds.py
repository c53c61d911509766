"""Which imported tables are launches of one row: those of one kernel whose files state the same
kind of run (Measurement.kind: benchmark, options, datatype, window...).

Tables of one kernel and one kind are launches 0, 1, ... of the kernel's row. Where a batch holds
several kinds of one kernel (osu_latency with and without -z, osu_put_latency beside osu_put_bw),
each kind is a row of its own, labelled with what sets it apart: `pingpong.send` and
`pingpong.send@z`, `rma.put@osu-put-latency` and `rma.put@osu-put-bw` (the kind whose
distinguishing values are all empty keeps the plain name). The labels depend only on the set of
kinds, never on the order of the files.
"""

from __future__ import annotations

import re

from commlens.campaign import kernel_of
from commlens.io.importers.common import ImportFileError, Measurement


def _key(m: Measurement) -> tuple:
    return tuple(sorted(m.kind.items()))


def _tag(value: str) -> str:
    """A value as a piece of a kernel label (letters, digits, '.', '+', '-')."""
    return re.sub(r"[^A-Za-z0-9.+-]+", "-", str(value)).strip("-")


def assign_labels(measurements: list[Measurement], requested: str | None = None) -> list[str]:
    """Sets each measurement's `label` (see the module's docstring); `requested` (--kernel) names the
    row of the batch's one kernel instead of the kernel's own name. Returns a line per kernel whose
    files were of several kinds, saying how they were kept apart."""
    notes = []
    for kernel in dict.fromkeys(m.kernel for m in measurements):
        runs = [m for m in measurements if m.kernel == kernel]
        base = requested or kernel
        if requested is not None and kernel_of(requested) != kernel:
            raise ImportFileError(runs[0].path, f"{runs[0].benchmark} measures what {kernel} does; --kernel "
                                                f"{requested} does not match (allowed: {kernel}, or {kernel}@LABEL)")
        kinds = {_key(m): m.kind for m in runs}
        if len(kinds) == 1:
            for m in runs:
                m.label = base
            continue
        differing = [name for name in dict.fromkeys(n for kind in kinds.values() for n in kind)
                     if len({kind.get(name, "") for kind in kinds.values()}) > 1]
        labels = {}
        for key, kind in sorted(kinds.items()):
            tag = "-".join(piece for name in differing if (piece := _tag(kind.get(name, ""))))
            labels[key] = base if not tag else f"{base}-{tag}" if "@" in base else f"{base}@{tag}"
        if len(set(labels.values())) < len(labels):
            raise ValueError(f"files of {kernel} of different kinds cannot be told apart by "
                             f"{', '.join(differing)}: import them separately")
        for m in runs:
            m.label = labels[_key(m)]
        described = "; ".join(f"{label}: " + ", ".join(f"{name} {kinds[key].get(name, '') or '(none)'}"
                                                        for name in differing)
                              for key, label in sorted(labels.items(), key=lambda item: item[1]))
        notes.append(f"{kernel}: files of different kinds are rows of their own, not launches of one ({described})")
    return notes
