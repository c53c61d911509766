"""Merging datasets: an interactive run's or an import's library appended to a campaign dataset as one
more row.

Labels are never changed by a merge: the encodings a dataset was read with (a netCDF string
coordinate's width among them) are not carried into the merged dataset, so that saving it writes
every label as it is."""

from __future__ import annotations

import json

import numpy as np
import xarray as xr

from commlens.data.samples import POINT_DIMS, ragged_positions, start_variable

# What a cell holds where a dataset has no such library, placement, kernel, size or launch: that side
# never asked for it, so its status is "skipped" (not "missing", a launch asked for that gave no file).
_FILL = {"status": "skipped", "settled": False, "iters_per_sample": 0, "position": -1, "sample_count": 0,
         "round": -1, "round_position": -1, "started": "", "hosts": "", "cpu_binding": "", "launch_env": "",
         "kernel_info": "", "reason": "", "partial": False, "suite_metric": ""}
# The axes a row is appended along (library) or that hold samples, never merged as a union.
_NOT_UNITED = ("library", "sample")


def append_to_campaign(campaign: xr.Dataset, ds: xr.Dataset, library: str | None = None) -> xr.Dataset:
    """The campaign dataset with `ds`'s library added as one more row of the library axis.

    library: the new row's label (default: "<library> (interactive)"), so that a library the
    campaign already measured stays distinct from its interactive measurement. Other axes are
    the union of both; cells one side lacks are NaN with status "skipped": it never asked for them.
    """
    if ds.sizes["library"] != 1:
        raise ValueError("append one library at a time")
    label = library or f"{ds['library'].item()} (interactive)"
    if label in campaign["library"].values:
        raise ValueError(f"library {label!r} is already in the campaign dataset; give another label")
    sources = [campaign, ds.assign_coords(library=[label])]
    # The ragged samples are rebuilt for the combined axes below; the rest is reindexed.
    parts = [part.drop_vars(["time", "sample_start"]) for part in sources]
    # What one side lacks (an older dataset's coordinate, an imported row's `source` or `reported`)
    # is blank there.
    parts = [_completed(parts[0], parts[1]), _completed(parts[1], parts[0])]
    dims = [d for d in dict.fromkeys([*parts[0].dims, *parts[1].dims]) if d not in _NOT_UNITED]
    union = {d: (np.union1d(parts[0][d].values, parts[1][d].values) if parts[0][d].dtype.kind in "iuf"
                 else list(dict.fromkeys([*parts[0][d].values.tolist(), *parts[1][d].values.tolist()])))
             for d in dims}
    # Coordinates along the other axes: the campaign's where it knows the entry, else ds's.
    axis_coords = {}
    for dim in dims:
        for name, coord in parts[0].coords.items():
            if coord.dims == (dim,) and name != dim:
                known: dict = {}
                for part in reversed(parts):
                    known.update(zip(part[dim].values.tolist(), part[name].values.tolist()))
                axis_coords[name] = (dim, [known[label_] for label_ in union[dim]], coord.attrs)
    # Variables along one other axis alone (a host's topology) likewise: the same host measured again
    # is described again, and hwloc's description of it carries what changed since (free memory).
    axis_vars = {}
    for name, var in parts[0].data_vars.items():
        if len(var.dims) == 1 and var.dims[0] in dims and name in parts[1].data_vars:
            dim, known = var.dims[0], {}
            for part in reversed(parts):
                known.update(zip(part[dim].values.tolist(), part[name].values.tolist()))
            axis_vars[name] = (dim, np.array([known[label_] for label_ in union[dim]], dtype=var.dtype), var.attrs)
    parts = [_reindex_filled(part.drop_vars([*axis_coords, *axis_vars]), union) for part in parts]
    combined = xr.concat(parts, dim="library", data_vars="minimal", coords="different",
                         compat="equals", combine_attrs="override")
    combined = combined.assign_coords(axis_coords).assign(axis_vars)
    combined["size"].attrs = campaign["size"].attrs
    combined = combined.assign(_merged_samples(combined, sources))
    for variable in combined.variables.values():
        if variable.dtype.kind in "USO":
            variable.encoding = {}
    appended = json.loads(campaign.attrs.get("appended", "[]"))
    combined.attrs["appended"] = json.dumps(appended + [{"library": label, "created": ds.attrs.get("created", "")}])
    return combined


def _merged_samples(combined: xr.Dataset, sources: list[xr.Dataset]) -> dict:
    """`time` and `sample_start` for `combined`, whose points (and sample counts) come from
    `sources`: each point's samples copied from its source, in the combined dataset's order."""
    counts = combined["sample_count"].transpose(*POINT_DIMS).values
    starts = ragged_positions(counts)
    time = np.empty(int(counts.sum()))
    for source in sources:
        position = [{label: i for i, label in enumerate(combined[dim].values.tolist())} for dim in POINT_DIMS]
        source_counts = source["sample_count"].transpose(*POINT_DIMS).values
        source_starts = source["sample_start"].transpose(*POINT_DIMS).values
        values = np.asarray(source["time"].values)
        for index in zip(*np.nonzero(source_counts)):
            at = tuple(position[d][source[dim].values[i].item()] for d, (dim, i) in enumerate(zip(POINT_DIMS, index)))
            n, start = int(source_counts[index]), int(source_starts[index])
            time[starts[at]:starts[at] + n] = values[start:start + n]
    return {"time": ("sample", time, sources[0]["time"].attrs), **start_variable(counts)}


def _completed(part: xr.Dataset, other: xr.Dataset) -> xr.Dataset:
    """`part` with what `other` has and it lacks: an axis (with its coordinates), coordinates (blank)
    and variables (filled as a cell without data)."""
    for dim in other.dims:
        if dim not in part.dims and dim not in _NOT_UNITED:
            part = part.assign_coords({name: coord for name, coord in other.coords.items() if coord.dims == (dim,)})
    part = part.assign_coords({name: (coord.dims, np.full([part.sizes[d] for d in coord.dims], _blank(coord.dtype)),
                                      coord.attrs)
                               for name, coord in other.coords.items()
                               if name not in part.coords and set(coord.dims) <= set(part.dims) - {"sample"}})
    return part.assign({name: (var.dims, np.full([part.sizes[d] for d in var.dims],
                                                 _FILL.get(str(name), _blank(var.dtype)), dtype=var.dtype), var.attrs)
                        for name, var in other.data_vars.items()
                        if name not in part.data_vars and set(var.dims) <= set(part.dims) - {"sample"}})


def _blank(dtype: np.dtype):
    """What a coordinate of this dtype holds where it says nothing."""
    return {"b": False, "i": 0, "u": 0, "f": np.nan}.get(np.dtype(dtype).kind, "")


def _reindex_filled(ds: xr.Dataset, union: dict) -> xr.Dataset:
    """Reindexed to the union of both datasets' axes, keeping every variable's dtype."""
    # Times (a launch's `started`, datetimes since datasets follow CF) are NaT where there is no launch.
    out = ds.reindex(union, fill_value={name: np.datetime64("NaT") if var.dtype.kind == "M"
                                        else _FILL.get(str(name), np.nan) for name, var in ds.data_vars.items()})
    for name, var in ds.data_vars.items():
        out[name] = out[name].astype(var.dtype if var.dtype.kind != "U" else str)
    return out
