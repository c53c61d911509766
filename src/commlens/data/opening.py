"""Opening a campaign dataset from its file, whatever the working directory and whenever it was written.

Samples are a ragged array (commlens.data.samples); figures, tables, fits and comparisons read
the per-point statistics, and only ask for samples (`ds.commlens.samples(...)`, one curve at
a time for the fits) where the statistics do not suffice.
"""

from __future__ import annotations

import json
from pathlib import Path

import xarray as xr

from commlens.io.dataset_errors import DatasetError, DatasetNotFoundError
from commlens.data.samples import (POINT_DIMS, POINT_STATISTICS, RAGGED_TIME, STAT_COORDS, from_cube, is_ragged,
                                   start_variable)
from commlens.io import file_kinds
from commlens.io.conventions import LayoutError, decode, decode_layout
from commlens.locations import candidates, resolve

# Datasets written before the rename carry their writer's version under the former name; none is read
# (nothing was released under it), but each is told apart from a file that is no dataset at all.
_FORMER_NAME_ATTRIBUTE = "commbench_version"


def check_dataset(path) -> Path:
    """The dataset file `path` means (results/<campaign>/<campaign>.nc, a results/<campaign> folder, a
    relative path found from any working directory: commlens.locations), checked to be a commlens
    dataset without reading its values. Raises DatasetError naming the file and the problem in one
    line. What writes from a dataset (the report) calls this first, so that bad input writes nothing."""
    path, ds = _open_lazily(path)
    ds.close()
    return path


def open_campaign(path) -> xr.Dataset:
    """Opens results/<campaign>/<campaign>.nc (or a results/<campaign> folder), a relative path
    found from any working directory (commlens.locations: a notebook's folder, $COMMLENS_RESULTS,
    the checkout). Everything but the samples is loaded; the samples stay on disk and are read
    where asked for. A dataset written
    before samples were ragged (a dense `time` with a `sample` dim per point) is converted. Text axes
    are indexed by their labels and the samples counted per point (`sample_count`, `sample_start`),
    whether the file holds them as CF label variables and a ragged array over `point`
    (commlens.io.conventions) or, written before, as text coordinates and counts per point. The
    launch `status` is text and `started` datetimes, whether the file holds them as CF flags and
    CF time or, written before, as text. A file that is missing, empty,
    truncated, damaged or not a commlens dataset raises DatasetError, one line naming it and why."""
    path, ds = _open_lazily(path)
    dense = not is_ragged(ds)
    try:
        loaded = ds.load() if dense else ds.drop_vars("time").load()
    except (OSError, RuntimeError, ValueError) as error:    # netCDF's errors reading a damaged variable
        ds.close()
        raise DatasetError(f"{path}: not a commlens dataset ({_unreadable(path, error)})") from None
    if dense:
        with ds:
            return decode(ragged(loaded))
    return decode(loaded.assign(time=ds["time"]))


def _open_lazily(path) -> tuple[Path, xr.Dataset]:
    """The dataset's file and the dataset opened on it (nothing read but its metadata), or DatasetError."""
    path = resolve(path)
    if path.is_dir():
        path = path / f"{path.name}.nc"
    if not path.exists():
        tried = ", ".join(str(place) for place in candidates(path))
        raise DatasetNotFoundError(f"{path}: no such campaign dataset (tried {tried}; make campaign writes "
                                   f"results/<campaign>/<campaign>.nc, ${{COMMLENS_RESULTS}} moves results/)")
    if not path.is_file():
        raise DatasetError(f"{path}: not a commlens dataset (not a file)")
    try:
        ds = xr.open_dataset(path)
    except (OSError, ValueError, RuntimeError) as error:   # netCDF's "HDF error", xarray's "no backend matched"
        raise DatasetError(f"{path}: not a commlens dataset ({_unreadable(path, error)})") from None
    if "commlens_version" in ds.attrs:
        ds = _in_memory_layout(path, ds)
    if "commlens_version" not in ds.attrs:
        ds.close()
        if _FORMER_NAME_ATTRIBUTE in ds.attrs:
            raise DatasetError(f"{path}: written before the project took the name commlens (its "
                               f"{_FORMER_NAME_ATTRIBUTE} attribute); recollect it from its raw files with "
                               f"this version")
        raise DatasetError(f"{path}: not a commlens dataset (no commlens_version attribute)")
    if "time" not in ds or ds["time"].dims not in (("sample",), POINT_DIMS + ("sample",)):
        ds.close()
        raise DatasetError(f"{path}: a commlens dataset without samples in a known layout (time over "
                           f"{ds['time'].dims if 'time' in ds else 'nothing'}); recollect it from its raw files")
    problem = _incomplete(ds)
    if problem:
        ds.close()
        raise DatasetError(f"{path}: {problem}")
    return path, ds


def _in_memory_layout(path: Path, ds: xr.Dataset) -> xr.Dataset:
    """`ds` with its labels and counts as commlens works with them (commlens.io.conventions.decode_layout),
    all else still on disk; DatasetError naming the file where they cannot be read or do not fit."""
    try:
        decoded = decode_layout(ds)
    except LayoutError as error:
        ds.close()
        raise DatasetError(f"{path}: a commlens dataset whose samples do not fit its axes ({error}); "
                           f"recollect it from its raw files") from None
    except (OSError, RuntimeError, ValueError) as error:     # netCDF's errors reading a damaged variable
        ds.close()
        raise DatasetError(f"{path}: not a commlens dataset ({_unreadable(path, error)})") from None
    # The counts over the point axes in the order collect makes them in.
    decoded = decoded.assign({name: decoded[name].transpose(*POINT_DIMS) for name in ("sample_count", "sample_start")
                              if name in decoded and set(decoded[name].dims) == set(POINT_DIMS)})
    decoded.set_close(ds.close)       # closing it closes the file (xarray's operations forget the file)
    return decoded


def _incomplete(ds: xr.Dataset) -> str | None:
    """What a file that says it is a commlens dataset lacks of what every reader relies on (a variable or
    dimension, a readable campaign), or None. A dense dataset gets its statistics when it is opened."""
    dims = [dim for dim in POINT_DIMS if dim not in ds.dims]
    if dims:
        return f"a commlens dataset without the dimension {', '.join(dims)}; recollect it from its raw files"
    wanted = ["sample_count", *POINT_STATISTICS] if is_ragged(ds) else []
    missing = [name for name in wanted if name not in ds.variables]
    if missing:
        return (f"a commlens dataset without the variable{'s' * (len(missing) > 1)} {', '.join(missing)}; "
                f"recollect it from its raw files")
    text = ds.attrs.get("campaign_config")
    if text is not None:
        try:
            config = json.loads(text)
        except (TypeError, ValueError) as error:
            return f"its campaign_config attribute is not the campaign as JSON ({error}); recollect it"
        if not isinstance(config, dict):
            return (f"its campaign_config attribute is not the campaign as JSON (a {type(config).__name__}); "
                    "recollect it")
    return None


def _unreadable(path: Path, error: Exception) -> str:
    """What the file is, from its first bytes; netCDF's own words where those say nothing more."""
    try:
        kind = file_kinds.describe(path)
    except OSError as cannot:
        return f"cannot be read: {cannot.strerror or cannot}"
    if kind.startswith("damaged"):     # netCDF's words, without the errno and the path this message names
        words = error.strerror if isinstance(error, OSError) and error.strerror else str(error) or type(error).__name__
        return f"{kind}: {words.splitlines()[0][:200]}"
    return kind


def ragged(ds: xr.Dataset) -> xr.Dataset:
    """A dataset with a dense `time` (POINT_DIMS + sample, NaN where absent), as older campaigns and
    synthetic cubes have it, in the ragged layout with per-point statistics."""
    samples, stats = from_cube(ds["time"])
    out = ds.drop_vars(["time"] + [name for name in ("sample",) if name in ds.coords])
    out = out.assign_coords({name: values for name, values in STAT_COORDS.items()})
    out = out.assign(stats.variables()).assign(start_variable(stats.values["sample_count"]))
    out["time"] = ("sample", samples, {**ds["time"].attrs, "long_name": f"time per sample; {RAGGED_TIME}"})
    return out
