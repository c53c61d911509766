"""One lock around the netCDF-C library for every thread of a process: xarray's own.

netCDF-C and the HDF5 under it are not thread-safe, and netCDF4-python lets other threads run while
it opens, reads, writes or closes a file. xarray holds this lock while it opens a file, reads an array
and closes it (not while it reads a file's metadata); a file it opened may also be closed by the
garbage collector in whichever thread runs it (a Jupyter kernel's, a test worker's). commlens's own
netCDF4 calls hold the same lock, so that none of them overlaps those of xarray's.
"""

from __future__ import annotations

import contextlib
import sys


def netcdf_lock():
    """xarray's lock for netCDF4 files (not reentrant: never held around a call into xarray); none
    where this process has not loaded xarray (the workflow's own process), which then makes no call
    that ours could overlap."""
    if "xarray" not in sys.modules:
        return contextlib.nullcontext()
    from xarray.backends.netCDF4_ import NETCDF4_PYTHON_LOCK

    return NETCDF4_PYTHON_LOCK
