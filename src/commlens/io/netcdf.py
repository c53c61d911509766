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

    encoded = conventions.encode(ds, path)   # labels, ragged samples over `point`, flags, CF time, ACDD
    encoded.dataset.to_netcdf(tmp, engine="netcdf4", encoding=encoded.encoding)
    points = encoded.points
    lock = netcdf_lock()   # around each of our calls, not around reading the samples (xarray takes it)
    with lock:
        nc = netCDF4.Dataset(tmp, "a")
    try:
        if points is not None:
            _write_points(nc, points, lock)
            counts, starts = points.counts, points.source_starts
        else:                      # samples not counted per point: written as they are
            counts, starts = np.array([ds.sizes["sample"]]), np.array([0])
        measured = counts > 0
        count = int(counts.sum())
        with lock:
            nc.createDimension(conventions.SAMPLE, count or None)
            variable = nc.createVariable("time", "f8", (conventions.SAMPLE,), zlib=True, complevel=1, shuffle=True,
                                         chunksizes=(min(max(count, 1), 1 << 20),))
            variable.setncatts(encoded.time_attrs)
        written = 0
        for chunk in _samples_in_file_order(ds["time"].data, starts[measured], counts[measured]):
            with lock:
                variable[written:written + chunk.size] = chunk
            written += chunk.size
    finally:
        with lock:
            nc.close()


def _write_points(nc, points: conventions.Points, lock) -> None:
    """The samples' instances (conventions.Points) over `point`, a chunk of points at a time."""
    variables = points.variables()
    with lock:
        nc.createDimension(conventions.POINT, points.size or None)
        for name, (dtype, width, attrs) in variables.items():
            dims = (conventions.POINT,) + ((nc.createDimension(f"{name}_strlen", width).name,) if width else ())
            variable = nc.createVariable(name, dtype, dims, zlib=True, complevel=1)   # as the samples
            variable.setncatts(attrs)
            variable.set_auto_chartostring(False)     # given as characters below, not as text per its _Encoding
    for begin in range(0, points.size, conventions.POINTS_CHUNK):
        stop = min(begin + conventions.POINTS_CHUNK, points.size)
        for name, values in points.chunk(begin, stop).items():
            width = variables[name][1]
            with lock:
                # Texts of `width` bytes, zero-padded, are that many characters each as they lie in memory.
                nc.variables[name][begin:stop] = (np.ascontiguousarray(values, dtype=f"S{width}").view("S1")
                                                  .reshape(-1, width) if width else values)


def _samples_in_file_order(values, starts: np.ndarray, counts: np.ndarray):
    """The samples of each point, point after point (`starts` and `counts` in `values`, in the file's
    order), in chunks of at most SAMPLES_CHUNK: one read per chunk where the points lie end to end in
    `values` (a dataset as collected or opened), a read per stretch where they do not (a selection of
    one, whose `time` still holds every sample of the dataset it was selected from)."""
    ends = starts + counts
    # Stretches of points that lie end to end in `values`, each (first sample, samples).
    breaks = np.flatnonzero(starts[1:] != ends[:-1]) + 1
    stretches = zip(starts[np.r_[0, breaks]] if starts.size else [], np.add.reduceat(counts, np.r_[0, breaks])
                    if counts.size else [])
    pending, held = [], 0
    for first, total in stretches:
        for start in range(int(first), int(first) + int(total), SAMPLES_CHUNK):
            taken = min(SAMPLES_CHUNK, int(first) + int(total) - start)
            pending.append(_chunk(values, start, taken))
            held += taken
            if held >= SAMPLES_CHUNK:
                yield np.concatenate(pending)
                pending, held = [], 0
    if pending:
        yield np.concatenate(pending)
