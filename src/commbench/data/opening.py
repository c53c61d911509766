"""Opening a campaign dataset from its file, whatever the working directory and whenever it was written.

Samples are a ragged array (commbench.data.samples); figures, tables, fits and comparisons read
the per-point statistics, and only ask for samples (`ds.commbench.samples(...)`, one curve at
a time for the fits) where the statistics do not suffice.
"""

from __future__ import annotations

import xarray as xr

from commbench.data.samples import POINT_DIMS, STAT_COORDS, from_cube, is_ragged, start_variable
from commbench.io.conventions import decode
from commbench.locations import candidates, resolve


def open_campaign(path) -> xr.Dataset:
    """Opens results/<campaign>/<campaign>.nc (or a results/<campaign> folder), a relative path
    found from any working directory (commbench.locations: a notebook's folder, $COMMBENCH_RESULTS,
    the checkout). Everything but the samples is loaded; the samples stay on disk and are read
    where asked for. A dataset written
    before samples were ragged (a dense `time` with a `sample` dim per point) is converted. The
    launch `status` is text and `started` datetimes, whether the file holds them as CF flags and
    CF time (commbench.io.conventions) or, written before, as text."""
    path = resolve(path)
    if path.is_dir():
        path = path / f"{path.name}.nc"
    if not path.exists():
        tried = ", ".join(str(place) for place in candidates(path))
        raise FileNotFoundError(f"{path}: no such campaign dataset (tried {tried}; make campaign writes "
                                f"results/<campaign>/<campaign>.nc, ${{COMMBENCH_RESULTS}} moves results/)")
    ds = xr.open_dataset(path)
    if "commbench_version" not in ds.attrs:
        ds.close()
        raise ValueError(f"{path}: not a commbench dataset (no commbench_version attribute)")
    if "time" not in ds or ds["time"].dims not in (("sample",), POINT_DIMS + ("sample",)):
        ds.close()
        raise ValueError(f"{path}: a commbench dataset without samples in a known layout (time over "
                         f"{ds['time'].dims if 'time' in ds else 'nothing'}); recollect it from its raw files")
    if not is_ragged(ds):
        with ds:
            return decode(ragged(ds.load()))
    return decode(ds.drop_vars("time").load().assign(time=ds["time"]))


def ragged(ds: xr.Dataset) -> xr.Dataset:
    """A dataset with a dense `time` (POINT_DIMS + sample, NaN where absent), as older campaigns and
    synthetic cubes have it, in the ragged layout with per-point statistics."""
    samples, stats = from_cube(ds["time"])
    out = ds.drop_vars(["time"] + [name for name in ("sample",) if name in ds.coords])
    out = out.assign_coords({name: values for name, values in STAT_COORDS.items()})
    out = out.assign(stats.variables()).assign(start_variable(stats.values["sample_count"]))
    out["time"] = ("sample", samples, {**ds["time"].attrs, "long_name": "time per sample; a ragged array, "
                                                                         "see sample_count"})
    return out
