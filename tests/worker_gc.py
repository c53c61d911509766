"""Garbage collected in the main thread of an xdist worker, between tests.

A worker runs its tests in the main thread and talks to the controller from another (execnet's). The
garbage collector runs in whichever thread allocates when a collection is due, and collecting a dataset
that xarray opened closes its netCDF file there. netCDF-C and HDF5 are not thread-safe, netCDF4-python
lets other threads run inside their calls, and xarray reads a file's metadata without its lock: a close
in execnet's thread can overlap a test's open. (Measured: two threads opening netCDF files through
xarray crash this environment within seconds; one clean run failed to open an intact dataset with
"NetCDF: HDF error", never seen with the tests in one process.) So workers collect only here, after each
test: the youngest generation each time (microseconds), everything every FULL_EVERY tests (0.1 s).
"""

import gc
import itertools

FULL_EVERY = 25
_finished = itertools.count(1)


def pytest_configure(config):
    if hasattr(config, "workerinput"):
        gc.disable()


def pytest_runtest_logfinish(nodeid, location):
    if not gc.isenabled():
        gc.collect(2 if next(_finished) % FULL_EVERY == 0 else 0)
