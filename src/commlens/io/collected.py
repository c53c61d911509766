"""What a dataset was collected from: the raw files' paths, sizes and modification times, kept as a
fingerprint in the dataset's attributes and compared with the raw files before each run of the
workflow. A dataset whose raw files have changed since is out of date, whatever its own modification
time says: a dataset put back by hand, or by any tool that gives it a fresh modification time, is
collected again (the workflow's collect rule takes recollection_param() as a param)."""

from __future__ import annotations

import hashlib
import os
import time

from commlens.io.netcdf_lock import netcdf_lock
from commlens.units import format_duration

FINGERPRINT = "raw_files_fingerprint"   # sha256 of (path, size, mtime) of each raw file
COUNT = "raw_files_count"
BECAUSE = "collected_because"           # why the dataset before this one was out of date ("" when it was not)


def raw_files_fingerprint(paths) -> str:
    """A digest of each file's path, size and modification time, in the order given (a file absent
    counts as absent): a raw file rewritten since, or one more or one less, gives another digest."""
    digest = hashlib.sha256()
    for path in paths:
        try:
            stat = os.stat(path)
            state = f"{stat.st_size} {stat.st_mtime_ns}"
        except OSError:
            state = "absent"
        digest.update(f"{path}\0{state}\n".encode())
    return digest.hexdigest()


def collected_from(paths, because: str = "") -> dict:
    """The attributes that record, in a dataset, the raw files it is collected from (their state now:
    taken before they are read), and `because`: the workflow's recollection_param() for it."""
    paths = [str(path) for path in paths]
    return {FINGERPRINT: raw_files_fingerprint(paths), COUNT: len(paths), BECAUSE: because}


def from_the_future(paths, slack_s: float = 1.0) -> list[str]:
    """Files among `paths` modified later than now (a clock set wrong, a copy from a host ahead of this one),
    each given the time now, as one line naming it for the console. Snakemake takes a job's output older
    than its input for a clock skew and fails the job on every run: a raw file is judged by its content
    (its end record, read by the collection), so its time need only not lie ahead."""
    now = time.time()
    lines = []
    for path in paths:
        try:
            modified = os.stat(path).st_mtime
            if modified > now + slack_s:
                os.utime(path, (now, now))
                stamp = time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(modified))
                lines.append(f"{path}: modified in the future ({stamp}"
                             f", {format_duration(modified - now)} ahead of this host's clock); read by its content, "
                             f"its time set to now")
        except OSError:
            continue
    return lines


def out_of_date(dataset, paths) -> str | None:
    """Why the dataset at `dataset` may not hold what the raw files `paths` hold now (one of them has
    another size or time than when it was collected, or is new or gone), or None where they are as
    they were (or it cannot tell: no dataset, or one written before datasets recorded their raw files).
    Only their sizes and times are read, so this costs a stat per file: a raw file touched or copied
    without its time is collected again, which gives the same dataset."""
    recorded = _recorded(dataset)
    return _why(recorded, [str(path) for path in paths]) if recorded else None


def recollection_param(dataset, paths) -> str:
    """What the workflow gives its collect rule as a param, so that Snakemake collects again exactly when
    the dataset is out of date, whatever the files' times say: where it is, why, with this dataset's
    and the raw files' state (a value no run recorded); where it is not, what the dataset recorded of
    the run that collected it (the value that run recorded), so that no run after it collects again."""
    recorded = _recorded(dataset)
    if not recorded:
        return ""
    paths = [str(path) for path in paths]
    why = _why(recorded, paths)
    if why is None:
        return str(recorded.get(BECAUSE, ""))
    return f"{dataset}: {why} [dataset {os.stat(dataset).st_mtime_ns}, raw files {raw_files_fingerprint(paths)[:16]}]"


def _recorded(dataset) -> dict | None:
    """The dataset's record of its raw files, or None (no file, not netCDF, recorded nothing)."""
    import netCDF4

    try:
        with netcdf_lock(), netCDF4.Dataset(dataset) as nc:
            recorded = {name: nc.getncattr(name) for name in (FINGERPRINT, COUNT, BECAUSE) if name in nc.ncattrs()}
    except (OSError, RuntimeError, ValueError):
        return None
    return recorded if {FINGERPRINT, COUNT} <= set(recorded) else None


def _why(recorded: dict, paths: list[str]) -> str | None:
    if recorded[FINGERPRINT] == raw_files_fingerprint(paths):
        return None
    return (f"it was collected from {int(recorded[COUNT])} raw files, and the campaign's {len(paths)} raw files "
            f"are not those any more (one was rewritten, added or removed since)")
