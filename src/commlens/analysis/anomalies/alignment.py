"""Alignment classes: residue classes of sizes (size % modulus == residue) whose residuals from
the structural model sit above or below the other sizes'."""

from __future__ import annotations

import numpy as np

from commlens.analysis.constants import MEDIAN_EFFICIENCY

# Alignment is looked for modulo 4, 8, ... up to this.
MAX_MODULUS = 4096
MAX_ALIGNMENT_FINDINGS = 3


def _interleaved(members: np.ndarray) -> bool:
    """A residue class says something about alignment only if it alternates with the other sizes;
    a class that is just the small or the large sizes would be a size effect in disguise."""
    starts = members & ~np.concatenate([[False], members[:-1]])
    return starts.sum() >= 3


def _most_distinct_class(sizes, z, explained):
    """The residue class (size % m == r, m = 4, 8, ...) whose residuals sit furthest from the
    others', on either side: (score, modulus, residue, members), the score signed (below 0: the
    class is faster), or None.

    Either side, because alignment shows both ways: a few sizes slower (a residue class that
    straddles a boundary) or, as on most machines, every size slower but the aligned ones. Where
    a class and its complement split the sizes evenly (size % 8 == 0 or 4 on a 4-byte grid), both
    descriptions score the same and the first found, residue 0, is kept: the aligned sizes.
    """
    best = None
    modulus = 4
    while modulus <= min(MAX_MODULUS, sizes[-1]):
        residues = sizes % modulus
        for residue in np.unique(residues):
            members = residues == residue
            n_in, n_out = members.sum(), (~members).sum()
            if n_in < 3 or n_out < 3 or not _interleaved(members) or explained[members].all():
                continue  # too few, not interleaved, or part of a class already found
            excess = np.median(z[members]) - np.median(z[~members])
            score = excess / (MEDIAN_EFFICIENCY * np.sqrt(1 / n_in + 1 / n_out))
            if best is None or abs(score) > abs(best[0]):
                best = (score, modulus, int(residue), members)
        modulus *= 2
    return best


def alignment_classes(sizes, z, residual_s, threshold) -> list[tuple[dict, np.ndarray]]:
    """Residue classes whose residuals sit above or below the others' (see _most_distinct_class),
    strongest first, each as its finding and its members; each class found is levelled before the
    next is looked for. The finding's magnitude is the class's median residual less the other
    sizes': below 0 where the class is faster."""
    classes, explained = [], np.zeros(sizes.size, bool)
    z = z.copy()
    for _ in range(MAX_ALIGNMENT_FINDINGS):
        best = _most_distinct_class(sizes, z, explained)
        if best is None or abs(best[0]) < threshold:
            break
        score, modulus, residue, members = best
        row = {"kind": "alignment", "size": sizes[members][0],
               "magnitude": float(np.median(residual_s[members]) - np.median(residual_s[~members])),
               "score": float(abs(score)), "modulus": float(modulus), "residue": float(residue)}
        classes.append((row, members))
        z[members] -= np.median(z[members]) - np.median(z[~members])
        explained |= members
    return classes
