"""History of reruns: the datasets a campaign's collections replaced, and what changed across them.

Collecting a campaign again keeps the dataset it replaces (commlens.data.collect.archive_previous):
results/<campaign>/history/<created>/<campaign>.nc, beside that collection's failures.jsonl. Here
those datasets, oldest first, and the current one are the reruns of one series. Cells (library,
placement, kernel, size) are matched by label; a cell a rerun did not measure is NaN there, and so
is a curve a rerun took over unmeasured from the one before (the same launches collected again:
same `started` times), which is not a new measurement of it.

Per cell and rerun the location is the geometric mean over launches of the launch medians, as in
commlens.analysis.compare; commlens.analysis.changepoints finds where it moved by at least `min_effect`, and the
changes are grouped into contiguous size ranges per curve, as compare groups its changed cells.
"""

from __future__ import annotations

import filecmp
import warnings
from typing import cast
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from commlens.analysis import changepoints
from commlens.analysis.constants import normal_quantile
from commlens.io.archive import HISTORY, UNREADABLE
from commlens.analysis.ranges import changed_ranges
from commlens.data.samples import CURVE_DIMS
from commlens.units import format_change, format_size_range

CELL_DIMS = (*CURVE_DIMS, "size")
CONFIDENCE = 0.95
Z_CONFIDENCE = normal_quantile(CONFIDENCE)
TABLE_COLUMNS = (*CURVE_DIMS, "rerun", "created", "verdict", "size_from", "size_to", "sizes", "ratio",
                 "ratio_low", "ratio_high", "series")


def campaign_folder(target) -> tuple[Path, str]:
    """results/<campaign> and the campaign's name, from that folder or its <campaign>.nc."""
    path = Path(target)
    if path.is_dir():
        return path, path.name
    return path.parent, path.stem


def rerun_paths(target) -> list[Path]:
    """The campaign's datasets in time order: every kept one in history/ (folders are named by the
    dataset's creation time, so they sort by it), then the current one where there is one."""
    folder, name = campaign_folder(target)
    kept = sorted(path for path in (folder / HISTORY).glob(f"*/{name}.nc")
                  if not path.parent.name.endswith(UNREADABLE))
    current = folder / f"{name}.nc"
    paths = kept + ([current] if current.exists() else [])
    if not paths:
        raise FileNotFoundError(f"{folder}: no dataset {name}.nc and no {HISTORY}/*/{name}.nc "
                                "(make campaign writes the dataset; rerunning it keeps the previous one)")
    return paths


def open_history(target) -> xr.Dataset:
    """Every rerun of the campaign, over (rerun, library, placement, kernel, size): `location` (s),
    `log_location`, `launch_var` (variance of the log launch medians, NaN below two launches) and
    `launches`; coords `created` and `source` on rerun (numbered from 1, oldest first)."""
    paths = rerun_paths(target)
    reruns = []
    created: list[str] = []
    sources: list[str] = []
    for path in paths:
        statistics = _rerun_statistics(path)
        stamp = str(statistics.attrs.get("created", ""))
        if created and stamp == created[-1] and filecmp.cmp(path, sources[-1], shallow=False):
            continue  # the current dataset is the one last kept (restored after a failed collection)
        reruns.append(statistics)
        created.append(stamp)
        sources.append(str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)   # xarray's changing join default: outer is meant
        series = xr.concat(reruns, dim="rerun", join="outer", combine_attrs="drop_conflicts")
    series = _drop_recollected(series)
    series = series.assign_coords(rerun=np.arange(1, len(reruns) + 1), created=("rerun", created),
                                  source=("rerun", sources))
    series["location"] = cast(xr.DataArray, np.exp(series["log_location"])).assign_attrs(   # a DataArray's exp
        units="s", long_name="geometric mean over launches of the launch medians")
    return series.sortby("size").transpose("rerun", *CELL_DIMS)


def _rerun_statistics(path: Path) -> xr.Dataset:
    """One dataset's per-cell location (log), launch variance and launch count, and per curve the
    start times of its launches (what tells a recollection from a rerun)."""
    ds = _open_statistics(path)
    measured = (ds["sample_count"] > 0) & (ds["median"] > 0)
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        # numpy's stubs: a ufunc of a DataArray is one
        log_median = cast(xr.DataArray, np.log(ds["median"].where(measured)))
        out = xr.Dataset({"log_location": log_median.mean("launch"),
                          "launch_var": log_median.var("launch", ddof=1),
                          "launches": measured.sum("launch").astype(float)})
    if "started" in ds:
        started = ds["started"].transpose(*CURVE_DIMS, "launch").values.astype(str)
        out["measured_at"] = (CURVE_DIMS, np.array(["|".join(row) for row in started.reshape(-1, started.shape[-1])],
                                                   dtype=object).reshape(started.shape[:-1]))
    out.attrs = {"created": ds.attrs.get("created", "")}
    ds.close()
    return out.reset_coords(drop=True).transpose(*CELL_DIMS, ...)


def _open_statistics(path: Path) -> xr.Dataset:
    """The per-point statistics of a dataset, without its samples; an older dense dataset through
    open_campaign, which converts it."""
    from commlens.data.opening import check_dataset

    ds = xr.open_dataset(check_dataset(path))   # a damaged rerun: named, in one line (DatasetError)
    if "commlens_version" in ds.attrs and {"median", "sample_count"} <= set(ds.data_vars):
        names = ["median", "sample_count"] + (["started"] if "started" in ds else [])
        return ds[names].load()
    ds.close()
    from commlens.data.opening import open_campaign

    return open_campaign(path)


def _drop_recollected(series: xr.Dataset) -> xr.Dataset:
    """NaN for a curve in a rerun whose launches are the ones an earlier rerun already had."""
    if "measured_at" not in series:
        return series
    signature = series["measured_at"].transpose("rerun", *CURVE_DIMS).values
    repeats = np.zeros(signature.shape, dtype=bool)
    last = np.full(signature.shape[1:], "", dtype=object)
    for rerun, current in enumerate(signature):
        known = np.array([isinstance(s, str) and s.strip("|") != "" for s in current.ravel()]).reshape(current.shape)
        repeats[rerun] = known & (current == last)
        last = np.where(known, current, last)
    repeated = xr.DataArray(repeats, dims=("rerun", *CURVE_DIMS))
    return series.drop_vars("measured_at").assign(
        log_location=series["log_location"].where(~repeated),
        launch_var=series["launch_var"].where(~repeated),
        launches=series["launches"].where(~repeated, 0.0))


def change_points(series: xr.Dataset, min_effect: float = 0.05, change_penalty: float | None = None) -> xr.Dataset:
    """`series` (from open_history) with the fit of every cell added: `fitted` (the level of the
    segment each rerun belongs to, s), `change` (a new level from this rerun on), `step` (new level
    / previous level at a change) with its interval `step_low`, `step_high`, `noise` (standard
    deviation of a rerun's log location) and `tested` per cell."""
    if min_effect < 0:
        raise ValueError(f"min_effect must be >= 0; got {min_effect}")
    series = series.transpose("rerun", *CELL_DIMS)
    cell_shape = tuple(series.sizes[d] for d in CELL_DIMS)
    n_reruns = series.sizes["rerun"]

    def by_cell(name):
        return np.moveaxis(series[name].values, 0, -1).reshape(-1, n_reruns)

    y = by_cell("log_location")
    rows = np.flatnonzero(np.isfinite(y).any(axis=1))   # cells some rerun measured, curves in size order
    curve = rows // cell_shape[-1]
    noise = changepoints.noise_scale(y[rows], by_cell("launch_var")[rows], by_cell("launches")[rows], curve)
    fit = changepoints.segment(y[rows], noise, min_effect=min_effect, change_penalty=change_penalty)
    log_ratio, log_se = changepoints.steps(fit)

    def to_cells(values, fill):
        full = np.full((y.shape[0], n_reruns), fill, dtype=np.asarray(values).dtype)
        full[rows] = values
        return np.moveaxis(full.reshape(*cell_shape, n_reruns), -1, 0)

    dims = ("rerun", *CELL_DIMS)
    tested = np.zeros(y.shape[0], dtype=bool)
    tested[rows] = fit.tested
    out = series.assign(
        fitted=(dims, np.exp(to_cells(fit.level, np.nan)), {"units": "s", "long_name": "level of the rerun's segment"}),
        change=(dims, to_cells(fit.change, False), {"long_name": "a new level starts at this rerun"}),
        step=(dims, np.exp(to_cells(log_ratio, np.nan)), {"units": "1", "long_name": "new level / previous level"}),
        step_low=(dims, np.exp(to_cells(log_ratio - Z_CONFIDENCE * log_se, np.nan)),
                  {"units": "1", "long_name": f"{CONFIDENCE:.0%} interval, low (given the change's position)"}),
        step_high=(dims, np.exp(to_cells(log_ratio + Z_CONFIDENCE * log_se, np.nan)),
                   {"units": "1", "long_name": f"{CONFIDENCE:.0%} interval, high (given the change's position)"}),
        noise=(dims, to_cells(noise.scale, np.nan), {"units": "1", "long_name": "standard deviation of the rerun's "
                                                                               "log location"}),
        tested=(CELL_DIMS, tested.reshape(cell_shape), {"long_name": "measured in two reruns or more, with a "
                                                                     "noise estimate"}),
    )
    base = changepoints.penalty(n_reruns, rows.size) if change_penalty is None else change_penalty
    out.attrs = {
        "min_effect": min_effect, "penalty": float(base), "cells": int(rows.size),
        "method": "penalised piecewise-constant fit of each cell's log location over reruns (optimal "
                  f"partitioning), penalty {base:.1f} per change (2 log(reruns x cells)) carried to each "
                  "noise estimate's degrees of freedom, adjacent levels closer than "
                  f"{min_effect:.0%} merged",
    }
    return out


def change_table(result: xr.Dataset) -> pd.DataFrame:
    """One row per curve, change rerun and contiguous range of sizes that changed there in the same
    direction: the sizes, the median over them of the step and its interval, and `series`, each
    rerun's location over the level before the change (median over the range's sizes)."""
    changed = result["change"]
    if not bool(changed.any()):
        return pd.DataFrame(columns=list(TABLE_COLUMNS))
    keep = {dim: changed.any([d for d in changed.dims if d != dim]).values for dim in ("rerun", *CURVE_DIMS)}
    sub = result.isel({dim: np.flatnonzero(mask) for dim, mask in keep.items()})
    table = changed_ranges(_as_verdicts(sub))
    table = table.drop(columns="q_value").merge(
        pd.DataFrame({"rerun": result["rerun"].values, "created": result["created"].values}), on="rerun")
    table["series"] = [_series(result, row) for _, row in table.iterrows()]
    table = table.sort_values([*CURVE_DIMS, "size_from", "rerun"], kind="stable").reset_index(drop=True)
    return table[list(TABLE_COLUMNS)]


def _as_verdicts(sub: xr.Dataset) -> xr.Dataset:
    """The shape commlens.analysis.compare.changed_ranges groups: per (rerun, curve, size) `regressed` or
    `improved` at a change, `unchanged` where measured without one (it ends a range), `missing`
    elsewhere and for a (rerun, curve) without any change (nothing there to group)."""
    change = sub["change"].values
    step = sub["step"].values
    measured = np.isfinite(sub["log_location"].values)
    verdict = np.where(change & (step > 1), "regressed",
                       np.where(change, "improved", np.where(measured, "unchanged", "missing")))
    size_axis = sub["change"].dims.index("size")
    verdict = np.where(change.any(axis=size_axis, keepdims=True), verdict, "missing")
    dims = sub["change"].dims
    return xr.Dataset({"verdict": (dims, verdict), "ratio": sub["step"], "ratio_low": sub["step_low"],
                       "ratio_high": sub["step_high"], "q_value": (dims, np.full(change.shape, np.nan))},
                      coords={dim: sub[dim].values for dim in dims},
                      # how changed_ranges splits a range whose steps differ: by their intervals' level
                      attrs={"confidence": CONFIDENCE, "min_effect": sub.attrs.get("min_effect", 0.0)})


def _series(result: xr.Dataset, row) -> str:
    """Each rerun's location relative to the level before the change, median over the row's sizes
    that changed at its rerun; '·' where none of them was measured."""
    curve = result.sel({dim: row[dim] for dim in CURVE_DIMS}).sel(size=slice(row["size_from"], row["size_to"]))
    at = curve.sel(rerun=row["rerun"])
    sizes = at["size"].values[at["change"].values]
    curve = curve.sel(size=sizes)
    before = curve["fitted"].sel(rerun=row["rerun"] - 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        relative = (curve["location"] / before).median("size").values
    words = ["·" if not np.isfinite(value) else f"{value:.2f}" for value in relative]
    index = int(np.flatnonzero(result["rerun"].values == row["rerun"])[0])
    return " ".join(words[:index]) + " | " + " ".join(words[index:])


def history(target, min_effect: float = 0.05, change_penalty: float | None = None) -> tuple[xr.Dataset, pd.DataFrame]:
    """The campaign's reruns with their change points (change_points), and the table of changed size
    ranges (change_table). `target`: results/<campaign> or its <campaign>.nc."""
    result = change_points(open_history(target), min_effect=min_effect, change_penalty=change_penalty)
    return result, change_table(result)


def describe_change(row) -> str:
    """'mpich-5.0.2 pingpong.send 1N2P: 4 KiB–64 KiB: 12% slower [9%, 15%] from rerun 3
    (2026-11-24T16:39)' for a row of change_table."""
    labels = " ".join(str(row[d]) for d in ("library", "kernel", "placement"))
    when = f" ({str(row['created'])[:16]})" if row["created"] else ""
    return (f"{labels}: {format_size_range(row['size_from'], row['size_to'])}: "
            f"{format_change(row['ratio'], row['ratio_low'], row['ratio_high'])} from rerun {row['rerun']}{when}")
