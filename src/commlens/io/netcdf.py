"""Writing a campaign dataset to netCDF: CF-encoded, compressed, and never seen half-written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from commlens.io import conventions
from commlens.io.archive import archive_previous
from commlens.io.atomic import replacing
from commlens.io.netcdf_lock import netcdf_lock

SAMPLES_CHUNK = 1 << 22   # samples copied into the file at a time (32 MiB)


def _chunk(values, start: int, count: int) -> np.ndarray:
    """`count` samples from `start`. Collect's samples are a memory map of a file of float64s: read
    from the file instead, because the pages a map has read stay in the process's memory until it is
    unmapped, so writing them all would hold every sample at once (3.9 GiB at make scale's size)."""
    if isinstance(values, np.memmap) and values.filename and values.offset == 0 and values.base is not None \
            and values.size * values.itemsize == Path(values.filename).stat().st_size:
        return np.fromfile(values.filename, dtype=np.float64, count=count, offset=start * values.itemsize)
    return np.asarray(values[start:start + count], dtype=np.float64)


def write_dataset(ds: xr.Dataset, path, keep_previous: bool = True, log=None) -> None:
    """netCDF4 with compression, written beside the target first so a reader never sees half a
    file. The ragged samples are copied in chunks, so a dataset whose samples are a memory map
    (collect's streaming) is written holding one chunk in memory at a time. A dataset already at
    `path` is kept in history/ (archive_previous) unless keep_previous is False. A write that fails
    (a full disk) leaves `path` as it was, removes its temporary and raises commlens.io.atomic.WriteError:
    "no space left on device writing results/quick/quick.nc"."""
    path = Path(path)
    with replacing(path) as tmp:
        _write_netcdf(ds, tmp, path)
        if keep_previous:
            archive_previous(path, log=log)   # only now: a collection that fails to write keeps the old one in place


def _write_netcdf(ds: xr.Dataset, tmp: Path, path: Path) -> None:
    import netCDF4

    rest, encoding = conventions.encode(ds.drop_vars("time"), path)   # status as CF flags, started as CF time
    encoding |= {name: {"zlib": True, "complevel": 4} for name, var in rest.data_vars.items()
                 if var.dtype.kind == "f"}
    rest.to_netcdf(tmp, engine="netcdf4", encoding=encoding)
    time = ds["time"]
    count = time.sizes["sample"]
    lock = netcdf_lock()   # around each of our calls, not around reading the samples (xarray takes it)
    with lock:
        nc = netCDF4.Dataset(tmp, "a")
    try:
        with lock:
            nc.createDimension("sample", count or None)
            variable = nc.createVariable("time", "f8", ("sample",), zlib=True, complevel=1, shuffle=True,
                                         chunksizes=(min(max(count, 1), 1 << 20),))
            variable.setncatts(time.attrs)
        for start in range(0, count, SAMPLES_CHUNK):
            chunk = _chunk(time.data, start, min(SAMPLES_CHUNK, count - start))
            with lock:
                variable[start:start + SAMPLES_CHUNK] = chunk
    finally:
        with lock:
            nc.close()
