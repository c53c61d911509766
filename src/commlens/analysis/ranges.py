"""Changed size ranges: a comparison's cells of one verdict, grouped per curve into ranges of
consecutive sizes that tell one story (one verdict, one size of change), and their one-line wording."""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from commlens.analysis import changepoints
from commlens.analysis.constants import normal_quantile
from commlens.units import format_change, format_size_range

RANGE_COLUMNS = ("verdict", "size_from", "size_to", "sizes", "ratio", "ratio_low", "ratio_high",
                 "q_value")


def changed_ranges(result: xr.Dataset, verdicts=("improved", "regressed", "faster", "slower"), *,
                   split_by_ratio: bool = True) -> pd.DataFrame:
    """The cells with one of `verdicts`, grouped per curve into ranges of consecutive measured sizes
    with the same verdict and one ratio: a run of sizes with the same verdict is split where the
    ratio moves by more than its uncertainty (split_where_ratio_moves), so that a range never pools
    a 60% change with a 10% one. One row per range with its sizes, the median over the range of its
    cells' ratios, an interval that holds every one of its cells' intervals (the lowest low end, the
    highest high end: what the range's verdict rests on, not a median of bounds, which is no interval),
    and the smallest q value. split_by_ratio=False keeps each run whole, for verdicts that are yes/no
    properties of a size (a broken guideline) rather than amounts."""
    curve_dims = [d for d in result["verdict"].dims if d != "size"]
    frame = result[["verdict", "ratio", "ratio_low", "ratio_high", "q_value"]].to_dataframe().reset_index()
    frame = frame[frame["verdict"] != "missing"]
    runs = []
    for labels, curve in (frame.groupby(curve_dims, sort=False) if curve_dims else [((), frame)]):
        curve = curve.sort_values("size")
        run = (curve["verdict"] != curve["verdict"].shift()).cumsum()
        labels = labels if isinstance(labels, tuple) else (labels,)
        runs += [(labels, piece) for _, piece in curve.groupby(run, sort=False)
                 if piece["verdict"].iloc[0] in verdicts]
    if split_by_ratio:
        pieces = split_where_ratio_moves([piece for _, piece in runs], result.attrs.get("confidence", 0.95),
                                         result.attrs.get("min_effect", 0.0))
    else:
        pieces = [[piece] for _, piece in runs]
    rows = []
    for (labels, _), parts in zip(runs, pieces):
        for piece in parts:
            rows.append({**dict(zip(curve_dims, labels)), "verdict": piece["verdict"].iloc[0],
                         "size_from": int(piece["size"].iloc[0]), "size_to": int(piece["size"].iloc[-1]),
                         "sizes": len(piece), "ratio": piece["ratio"].median(),
                         "ratio_low": piece["ratio_low"].min(), "ratio_high": piece["ratio_high"].max(),
                         "q_value": piece["q_value"].min()})
    return pd.DataFrame(rows, columns=[*curve_dims, *RANGE_COLUMNS])


def single_value_cells(result: xr.Dataset) -> pd.DataFrame:
    """The cells compare could not test for want of spread (one value a side, as imported suite outputs),
    one row each in changed_ranges' columns: their ratio, with no interval and no q value."""
    from commlens.analysis.compare import NO_SPREAD

    curve_dims = [d for d in result["verdict"].dims if d != "size"]
    frame = result[["verdict", "ratio"]].to_dataframe().reset_index()
    frame = frame[frame["verdict"] == NO_SPREAD]
    rows = [{**{d: cell[d] for d in curve_dims}, "verdict": NO_SPREAD, "size_from": int(cell["size"]),
             "size_to": int(cell["size"]), "sizes": 1, "ratio": cell["ratio"], "ratio_low": np.nan,
             "ratio_high": np.nan, "q_value": np.nan} for _, cell in frame.iterrows()]
    return pd.DataFrame(rows, columns=[*curve_dims, *RANGE_COLUMNS])


def split_where_ratio_moves(runs: list[pd.DataFrame], confidence: float, min_effect: float) -> list[list]:
    """Each run of consecutive sizes (rows with ratio, ratio_low, ratio_high) cut into pieces of one
    ratio: the penalised piecewise-constant fit of the log ratio against size that history uses over
    reruns (commlens.analysis.changepoints.segment), each cell weighted by its interval (standard
    error = half the interval's log width over the normal quantile, an overstatement for a t interval,
    so cuts are cautious), the penalty carried over every run at once (many runs are cut together,
    as many cells are tested together), adjacent pieces closer than min_effect merged, and then
    adjacent pieces of like change (SAME_CHANGE) joined: a split is worth a reader's attention only where
    the change itself differs, not where a narrow interval separates 65% from 59%."""
    if not runs:
        return []
    width = max(len(run) for run in runs)
    log_ratio = np.full((len(runs), width), np.nan)
    scale = np.full((len(runs), width), np.nan)
    for i, run in enumerate(runs):
        log_ratio[i, :len(run)] = np.log(run["ratio"].to_numpy(float))
        scale[i, :len(run)] = (np.log(run["ratio_high"].to_numpy(float) / run["ratio_low"].to_numpy(float))
                               / (2 * normal_quantile(confidence)))
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = np.where(np.isfinite(scale) & (scale > 0), scale, np.nan)
    fit = changepoints.segment(log_ratio, changepoints.NoiseScale(scale=scale, dof=np.full(len(runs), np.inf)),
                               min_effect=min_effect)
    pieces = []
    for i, run in enumerate(runs):
        starts = np.flatnonzero(fit.change[i, :len(run)]).tolist()
        bounds = [0, *starts, len(run)]
        pieces.append(_merge_like_changes([run.iloc[a:b] for a, b in zip(bounds[:-1], bounds[1:]) if b > a]))
    return pieces


# Adjacent pieces whose changes are this close (the smaller log ratio at least this fraction of the
# larger, same direction) tell the reader one story: 65% and 59% faster are one range, 60% and 10% are two.
SAME_CHANGE = 2 / 3


def _merge_like_changes(pieces: list[pd.DataFrame]) -> list[pd.DataFrame]:
    """`pieces` (consecutive, of one run) with neighbours of like change joined, left to right."""
    merged = pieces[:1]
    for piece in pieces[1:]:
        a, b = (float(np.log(p["ratio"].median())) for p in (merged[-1], piece))
        if a * b > 0 and min(abs(a), abs(b)) >= SAME_CHANGE * max(abs(a), abs(b)):
            merged[-1] = pd.concat([merged[-1], piece])
        else:
            merged.append(piece)
    return merged


def describe_range(row) -> str:
    """'pingpong.send 1N2P: 4 KiB-64 KiB 12% slower [9%, 15%]' for a row of changed_ranges."""
    labels = " ".join(str(row[d]) for d in ("library", "kernel", "placement") if d in row.index)
    return (f"{labels}: {format_size_range(row['size_from'], row['size_to'])} "
            f"{format_change(row['ratio'], row['ratio_low'], row['ratio_high'])}")
