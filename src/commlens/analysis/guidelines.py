"""Self-consistency: measurements of one library that its own other measurements contradict.

An MPI library's operations bound each other: a collective should not be slower than the
simpler calls that could stand in for it, a larger message should not take less time than a
smaller one (a user would pad the message). These are the self-consistent MPI performance
guidelines of Traff, Gropp and Thakur, which PGMPI (Hunold et al.) checks on measured
libraries. `check(ds)` looks at every library and placement of a campaign for three of them,
wherever the dataset has the measurements they need:

- monotony: a kernel's time does not drop from one measured size to the next.
- mock-up: a collective is not slower than a mock-up of simpler calls measured in the same
  campaign, its time the sum of theirs: Bcast(n) against Scatter(n/p) + Allgather(n/p),
  Allreduce(n) against Reduce(n) + Bcast(n), Allgather(n) against Gather(n) + Bcast(p n).
  Sizes are bytes per rank (kernels/collectives.c), p is the placement's `nprocs`; a size
  is checked only where every part was measured at the size it needs (with powers of two
  for sizes and ranks, every size has its parts), and the mock-ups that scale sizes by p
  only where the dataset has `nprocs`. Parts are taken with the collective's variant
  (coll.bcast@upper against coll.scatter@upper + coll.allgather@upper). The kernels' default
  methods differ (Bcast and Scatter acknowledged, the others timed back to back: a lower
  bound, see kernels/collectives.c), so a mock-up of defaults can be optimistic; measuring
  all of them with one method (@upper, or @lower) makes the check like for like.
- ssend: a synchronous send is not faster than a standard one: <family>.ssend[@variant]
  against <family>.send[@variant] (pingpong, multipingpong).

"Measurably" is judged as commlens.analysis.compare judges a change, with the launch as the unit: each
check is the measurement against its reference, size by size, compare's unpaired t test on the logs of
the launches' medians, their variance moderated across neighbouring sizes. The mock-up's launch i is the
sum of its parts' launches i: the parts ran in separate launches, so these are independent draws of the
sum. A cell breaks its guideline where compare finds the measurement on the wrong side of its reference
by at least `min_effect` and the one-sided q value passes 1 - confidence: p values towards breaking,
adjusted (Benjamini-Hochberg) over every cell of every check of the dataset at once, so the false
discovery rate holds for the whole table. Consecutive such sizes (of those the check could be made at)
are one row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from commlens.analysis.compare import benjamini_hochberg, compare
from commlens.analysis.ranges import changed_ranges
from commlens.data.samples import CURVE_DIMS, POINT_DIMS

GUIDELINES = {
    "monotony": "time does not drop from one measured size to the next",
    "mock-up": "a collective is not slower than the sum of the simpler calls that can stand in for it",
    "ssend": "MPI_Ssend is not faster than MPI_Send",
}
COLUMNS = ("library", "placement", "kernel", "kind", "guideline", "size_from", "size_to", "sizes",
           "measured", "reference", "ratio", "ratio_low", "ratio_high", "q_value")
# Each collective's mock-up: its parts, each at the collective's size times nprocs ** exponent.
MOCK_UPS = {
    "bcast": (("scatter", -1), ("allgather", -1)),
    "allreduce": (("reduce", 0), ("bcast", 0)),
    "allgather": (("gather", 0), ("bcast", 1)),
}
# compare's verdicts for a measurement faster and slower than its reference.
FASTER, SLOWER = "improved", "regressed"
# Per-launch statistics compare reads: the median, and (for one-launch cells) its interval and quartiles.
COMPARED_STATISTICS = ("median", "sample_count", "median_ci", "quantiles")


def empty_table() -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype=float if name in ("ratio", "ratio_low", "ratio_high", "q_value")
                                         else object) for name in COLUMNS})


@dataclass(frozen=True)
class _Check:
    """One measurement held against its reference over the dataset's size axis: each a dict of
    per-launch statistics over (size, launch[, bound | quantile])."""

    library: str
    placement: str
    kernel: str
    guideline: str
    measured: str
    reference: str
    violated_when: str           # FASTER or SLOWER: the verdict that breaks the guideline
    measured_stats: dict
    reference_stats: dict
    previous_size: dict | None = None   # monotony: each size's reference size


def check(ds: xr.Dataset, min_effect: float = 0.05, confidence: float = 0.95) -> pd.DataFrame:
    """Every guideline broken beyond noise, one row per range of consecutive sizes; an empty table
    (with the columns) when none is.

    Columns: library, placement, kernel (the measurement's kernel); kind ("guideline", as
    commlens.analysis.anomalies' findings have one); guideline (a key of GUIDELINES); size_from and
    size_to (bytes, the measurement's first and last size of the range) and sizes (how many
    sizes the range holds); measured (what was measured) and reference (what it was held
    against: the same kernel at the next smaller size, a sum of parts with their sizes in terms
    of the measurement's size n, or the standard send); ratio (measured / reference time, the
    median over the range of each size's ratio of the launches' geometric means: below 1 where
    the measurement is faster), ratio_low and ratio_high (its `confidence` interval, medians
    over the range) and q_value (the smallest over the range of the one-sided adjusted p values).
    See the module's docstring for the method.
    """
    stats = _launch_statistics(ds)
    checks = [*_monotony_checks(ds, stats), *_mock_up_checks(ds, stats), *_ssend_checks(ds, stats)]
    if not checks:
        return empty_table()
    reference, measured = (_stacked(ds, checks, side) for side in ("reference_stats", "measured_stats"))
    result = _violations(compare(reference, measured, min_effect=min_effect, confidence=confidence), checks)
    runs = changed_ranges(result, ("violated",), split_by_ratio=False)
    rows = [_row(checks[int(run["check"])], run) for _, run in runs.iterrows()]
    return pd.DataFrame(rows, columns=list(COLUMNS)) if rows else empty_table()


def _violations(result: xr.Dataset, checks: list[_Check]) -> xr.Dataset:
    """compare's result with the verdict `violated` where a cell breaks its guideline, and one-sided
    q values.

    compare tests both ways and adjusts over every cell; here most cells differ the expected way
    (a collective well under its mock-up, a size twice the one before taking longer), and counted
    as discoveries they would lower the bar for the rest. So each cell's p value is taken one-sided,
    towards breaking the guideline, and adjusted over those alone; a cell is violated where compare
    gives it the breaking verdict (the one-launch rule included) and that q value passes too.
    """
    violated_when = np.array([one.violated_when for one in checks])[:, None]
    faster = violated_when == FASTER
    breaking_side = np.where(faster, result["ratio"].values < 1, result["ratio"].values > 1)
    p_value = result["p_value"].values
    one_sided = np.where(breaking_side, p_value / 2, 1 - p_value / 2)
    q_value = benjamini_hochberg(one_sided)
    alpha = 1 - result.attrs["confidence"]
    violated = (result["verdict"].values == violated_when) & (q_value <= alpha)
    verdict = np.where(violated, "violated", np.where(result["verdict"].values == "missing", "missing", "kept"))
    return result.assign(verdict=(result["verdict"].dims, verdict), q_value=(result["q_value"].dims, q_value))


def _row(one: _Check, run) -> dict:
    """The table's row for one run of consecutive violated sizes of `one` (a changed_ranges row)."""
    reference = one.reference
    if one.previous_size:
        first, last = one.previous_size[run["size_from"]], one.previous_size[run["size_to"]]
        reference = f"{one.kernel} at {first} B" if first == last else \
            f"{one.kernel} at the size before each ({first} B to {last} B)"
    return {"library": one.library, "placement": one.placement, "kernel": one.kernel, "kind": "guideline",
            "guideline": one.guideline, "size_from": int(run["size_from"]), "size_to": int(run["size_to"]),
            "sizes": int(run["sizes"]), "measured": one.measured, "reference": reference,
            **{name: float(run[name]) for name in ("ratio", "ratio_low", "ratio_high", "q_value")}}


# --------------------------------------------------------------------------- statistics

def _launch_statistics(ds: xr.Dataset) -> dict:
    """The per-launch statistics as arrays over POINT_DIMS (then bound or quantile)."""
    missing = [name for name in ("median", "sample_count") if name not in ds]
    if missing:
        raise ValueError(f"guidelines need a campaign dataset with per-point statistics: no {', '.join(missing)}")
    stats = {}
    for name in COMPARED_STATISTICS:
        if name in ds:
            extra = [dim for dim in ds[name].dims if dim not in POINT_DIMS]
            stats[name] = ds[name].transpose(*POINT_DIMS, *extra).values
    return stats


def _curve(stats: dict, cell: tuple) -> dict:
    """One curve's statistics over (size, launch[, ...])."""
    return {name: values[cell] for name, values in stats.items()}


def _absent(like: dict) -> dict:
    """Statistics of no measurement at all, shaped as `like`."""
    return {name: np.zeros_like(values) if name == "sample_count" else np.full(values.shape, np.nan)
            for name, values in like.items()}


def _measured_sizes(curve: dict) -> np.ndarray:
    return np.flatnonzero((curve["sample_count"] > 0).any(axis=1))


def _labels(ds: xr.Dataset, dim: str) -> list[str]:
    return [str(label) for label in ds[dim].values]


def _stacked(ds: xr.Dataset, checks: list[_Check], side: str) -> xr.Dataset:
    """One side of every check as a dataset over (check, size, launch[, ...]), as compare reads it."""
    coords = {"check": np.arange(len(checks)), "size": ds["size"].values, "launch": ds["launch"].values}
    variables = {}
    for name in getattr(checks[0], side):
        values = np.stack([getattr(one, side)[name] for one in checks])
        extra = [dim for dim in ds[name].dims if dim not in POINT_DIMS]
        variables[name] = (("check", "size", "launch", *extra), values)
        coords.update({dim: ds[dim].values for dim in extra})
    return xr.Dataset(variables, coords=coords)


# --------------------------------------------------------------------------- the guidelines

def _monotony_checks(ds: xr.Dataset, stats: dict):
    """Every curve against itself one measured size earlier."""
    sizes = ds["size"].values
    counts = stats["sample_count"]
    for cell in zip(*np.nonzero((counts > 0).any(axis=(3, 4)))):
        curve = _curve(stats, cell)
        measured = _measured_sizes(curve)
        if measured.size < 2:
            continue
        earlier = _absent(curve)
        for name, values in curve.items():
            earlier[name][measured[1:]] = values[measured[:-1]]
        library, placement, kernel = (_labels(ds, dim)[i] for dim, i in zip(CURVE_DIMS, cell))
        yield _Check(library, placement, kernel, "monotony", kernel, f"{kernel} at the size before",
                     FASTER, curve, earlier,
                     previous_size={int(sizes[b]): int(sizes[a]) for a, b in zip(measured[:-1], measured[1:])})


def _split_kernel(kernel: str) -> tuple[str, str, str]:
    """'coll.bcast@upper' -> ('coll.', 'bcast', '@upper')."""
    name, at, variant = kernel.partition("@")
    family, dot, operation = name.rpartition(".")
    return family + dot, operation, at + variant


def _mock_up_checks(ds: xr.Dataset, stats: dict):
    """Each collective with a mock-up whose parts were all measured for its library and placement."""
    kernels = _labels(ds, "kernel")
    nprocs = ds["nprocs"].values if "nprocs" in ds.coords else None
    for k, kernel in enumerate(kernels):
        family, operation, variant = _split_kernel(kernel)
        parts = MOCK_UPS.get(operation)
        if parts is None or any(f"{family}{part}{variant}" not in kernels for part, _ in parts):
            continue
        if nprocs is None and any(exponent for _, exponent in parts):
            continue  # the parts' sizes depend on the number of ranks, which the dataset does not say
        for i, library in enumerate(_labels(ds, "library")):
            for p, placement in enumerate(_labels(ds, "placement")):
                collective = _curve(stats, (i, p, k))
                if not collective["sample_count"].any():
                    continue
                ranks = int(nprocs[p]) if nprocs is not None else 1
                mock_up = _sum_of_parts(ds, stats, (i, p), [(kernels.index(f"{family}{part}{variant}"), exponent)
                                                            for part, exponent in parts], ranks)
                if not mock_up["sample_count"].any():
                    continue
                reference = " + ".join(f"{family}{part}{variant}({_scaled('n', exponent, ranks)})"
                                       for part, exponent in parts)
                yield _Check(library, placement, kernel, "mock-up", f"{kernel}(n)", reference, SLOWER,
                             collective, mock_up)


def _scaled(size: str, exponent: int, ranks: int) -> str:
    return {-1: f"{size}/{ranks}", 0: size, 1: f"{ranks}{size}"}[exponent]


def _sum_of_parts(ds: xr.Dataset, stats: dict, row: tuple, parts: list, ranks: int) -> dict:
    """The mock-up's statistics at each of the dataset's sizes: launch by launch, each statistic
    summed over the parts, each part at its own size; absent where any part is."""
    sizes = ds["size"].values
    total: dict | None = None
    for kernel, exponent in parts:
        part = _curve(stats, row + (kernel,))
        at = _part_sizes(sizes, exponent, ranks)
        placed = _absent(part)
        known = at >= 0
        for name, values in part.items():
            placed[name][known] = values[at[known]]
        if total is None:
            total = placed
            continue
        total = {name: np.minimum(total[name], values) if name == "sample_count" else total[name] + values
                 for name, values in placed.items()}
    assert total is not None        # a mock-up has parts (MOCK_UPS)
    absent = total["sample_count"] == 0
    for name, values in total.items():
        if name != "sample_count":
            values[absent] = np.nan       # a launch of one part without its partner is no mock-up
    return total


def _part_sizes(sizes: np.ndarray, exponent: int, ranks: int) -> np.ndarray:
    """For each size, the index of size * ranks ** exponent among `sizes`, or -1 where it is not one."""
    if exponent >= 0:
        wanted, whole = sizes * ranks ** exponent, np.ones(sizes.size, bool)
    else:
        wanted, whole = sizes // ranks ** -exponent, sizes % ranks ** -exponent == 0
    index = np.searchsorted(sizes, wanted).clip(max=sizes.size - 1)
    return np.where(whole & (sizes[index] == wanted), index, -1)


def _ssend_checks(ds: xr.Dataset, stats: dict):
    """Each synchronous send against the standard send of its family and variant."""
    kernels = _labels(ds, "kernel")
    for k, kernel in enumerate(kernels):
        family, operation, variant = _split_kernel(kernel)
        standard = f"{family}send{variant}"
        if operation != "ssend" or standard not in kernels:
            continue
        for i, library in enumerate(_labels(ds, "library")):
            for p, placement in enumerate(_labels(ds, "placement")):
                synchronous = _curve(stats, (i, p, k))
                if synchronous["sample_count"].any():
                    yield _Check(library, placement, kernel, "ssend", kernel, standard, FASTER, synchronous,
                                 _curve(stats, (i, p, kernels.index(standard))))
