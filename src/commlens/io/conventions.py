"""A campaign dataset as the CF conventions (CF-1.10) have it, so that any CF-aware reader (xarray,
cf-xarray, Panoply, ncdump, compliance checkers) understands the file without commlens.

What CF asks of it, and where commlens does it (describe, when a dataset is built; encode and
decode, when it is written and opened):
- global `Conventions`, `title`, `history` (what made the file, and when) and `source` (how the data
  were produced);
- `units` on every numeric variable, in UDUNITS spellings ("s", "bytes", "bit/s"; "1" for counts,
  ratios, indices and flags); text variables (labels, reasons, JSON) have none, as CF units
  describe quantities;
- flags: CF's `flag_values` must be numbers of the variable's own type, so the launch `status`,
  text in memory, is written as a small integer with `flag_values` and `flag_meanings` and read
  back as text. The meanings are read from each file, so a file stays readable whatever statuses
  later versions add. The true/false `settled` and `emulated` are byte flags on disk;
- timestamps: a launch's `started` is a datetime64 (NaT where the launch never started), written as
  milliseconds since 1970-01-01 (UTC), as launch records have them. Global `created` and `first_launch` stay ISO 8601 text, which
  netCDF attributes can hold and people can read.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from commlens.io.raw import NOT_RUN

CONVENTIONS = "CF-1.10"

# Every value a launch's status takes in a dataset: the raw files' (commlens.io.raw.LAUNCH_STATUSES),
# and what collecting adds: refused (a damaged raw file), missing (no raw file), skipped (not asked
# for). Their position is their code on disk.
STATUSES = ("ok", "failed", "timeout", "refused", *NOT_RUN, "missing", "skipped")

# Units (UDUNITS spellings; "1": counts, ratios, indices, flags) and names of the variables that
# collect.build_dataset and commlens.data.samples make without them; a variable made with its own keeps them.
ATTRIBUTES = {
    "size": {"units": "bytes", "long_name": "message size"},
    "launch": {"units": "1", "long_name": "launch number"},
    "quantile": {"units": "1", "long_name": "quantile level"},
    "nodes": {"units": "1", "long_name": "nodes"},
    "ppn": {"units": "1", "long_name": "processes per node"},
    "nprocs": {"units": "1", "long_name": "processes"},
    "emulated": {"units": "1", "long_name": "nodes emulated on one host"},
    "windowed": {"units": "1", "long_name": "a window of messages in flight (--window)"},
    "build_warnings": {"units": "1"},
    "sample_count": {"units": "1"},
    "sample_start": {"units": "1"},
    "rse": {"units": "1"},
    "iters_per_sample": {"units": "1"},
    "errors": {"units": "1"},
    "short_samples_dropped": {"units": "1"},
    "position": {"units": "1"},
    "settled": {"units": "1"},
    "timer_resolution_s": {"units": "s", "long_name": "resolution of the kernel's timer"},
    "harness_overhead_s": {"units": "s", "long_name": "overhead of the harness's timing, as it measured it"},
}

# The true/false variables, as CF flags (xarray writes a bool as a byte).
FLAGS = {"settled": "not_settled settled", "emulated": "not_emulated emulated", "windowed": "not_windowed windowed"}

# How `started` is written: whole milliseconds (launch records have no finer) as integers, which decode
# exactly (a float's milliseconds come back some hundred nanoseconds off); NaT is the _FillValue.
TIME_ENCODING = {"units": "milliseconds since 1970-01-01 00:00:00", "calendar": "proleptic_gregorian",
                 "dtype": "int64", "_FillValue": np.iinfo(np.int64).min}


def describe(ds: xr.Dataset, description: str = "",
             made_by: str = "measured by the commlens benchmark kernels, collected from the campaign's raw "
                             "launch files") -> xr.Dataset:
    """`ds` (a campaign dataset just built, with its `campaign`, `created` and `commlens_version`
    attributes) with what CF asks: global description, units, flags, `started` as datetimes.
    `made_by` says how the data were produced (CF's `source`); `history` starts with the time the
    file was made, as CF asks."""
    ds = ds.copy()
    for name, variable in ds.variables.items():
        variable.attrs.update({key: value for key, value in ATTRIBUTES.get(name, {}).items()
                               if key not in variable.attrs})
        if name in FLAGS and variable.dtype == bool:
            variable.attrs.update(flag_values=np.array([0, 1], dtype=np.int8), flag_meanings=FLAGS[name])
    if "started" in ds:
        started = ds["started"]
        ds["started"] = (started.dims, timestamps(started.values) if started.dtype.kind in "OUS" else started.values,
                         {"long_name": "when the launch started (UTC; NaT: it never did)", **started.attrs})
    version = ds.attrs.get("commlens_version", "")
    ds.attrs.update({
        "Conventions": CONVENTIONS,
        "title": f"commlens campaign {ds.attrs.get('campaign', '')}" + (f": {description}" if description else ""),
        "source": f"commlens {version}: {made_by}",
        "history": f"{ds.attrs.get('created', '')} commlens {version}: {made_by}",
    })
    return ds


def timestamps(values) -> np.ndarray:
    """ISO 8601 texts ("" where none) as datetime64[ns] in UTC, NaT where none."""
    texts = pd.Series(np.asarray(values, dtype=object).ravel()).replace("", None)
    moments = pd.to_datetime(texts, utc=True, format="ISO8601").dt.tz_convert(None)
    return moments.to_numpy(dtype="datetime64[ns]").reshape(np.shape(values))


def encode(ds: xr.Dataset, path) -> tuple[xr.Dataset, dict]:
    """The dataset as written to `path`, and the netCDF encoding of its variables: `status` as codes
    with its flags, `started` as CF time (milliseconds since 1970). A status outside STATUSES is refused,
    naming it."""
    encoding = {}
    if "status" in ds and ds["status"].dtype.kind in "OUS":
        values = ds["status"].values.astype(str)
        unknown = sorted(set(map(str, np.unique(values))) - set(STATUSES))
        if unknown:
            raise ValueError(f"{path}: launch status {', '.join(map(repr, unknown))} is not one of "
                             f"{', '.join(STATUSES)}")
        codes = pd.Categorical(values.ravel(), categories=STATUSES).codes.astype(np.int8).reshape(values.shape)
        flags = {"flag_values": np.arange(len(STATUSES), dtype=np.int8), "flag_meanings": " ".join(STATUSES),
                 "units": "1"}
        ds = ds.assign(status=(ds["status"].dims, codes, {**ds["status"].attrs, **flags}))
    if "started" in ds and ds["started"].dtype.kind == "M":
        encoding["started"] = dict(TIME_ENCODING)
    # CF: a coordinate variable holds no missing values, so it has no _FillValue (xarray gives every
    # floating-point variable one unless told).
    encoding |= {name: {"_FillValue": None} for name in ds.dims if name in ds.coords and ds[name].dtype.kind == "f"}
    return ds, encoding


def decode(ds: xr.Dataset) -> xr.Dataset:
    """The dataset as commlens works with it: `status` as text, from the file's own flags, and
    `started` as datetimes (older files hold it as ISO text)."""
    status = ds["status"] if "status" in ds else None
    if status is not None and status.dtype.kind in "iu" and "flag_meanings" in status.attrs:
        meanings = dict(zip(np.atleast_1d(status.attrs["flag_values"]).tolist(), status.attrs["flag_meanings"].split()))
        text = pd.Series(status.values.ravel()).map(meanings).to_numpy(dtype=str).reshape(status.shape)
        attrs = {k: v for k, v in status.attrs.items() if k not in ("flag_values", "flag_meanings", "units")}
        ds = ds.assign(status=(status.dims, text, attrs))
    if "started" in ds and ds["started"].dtype.kind in "OUS":
        ds = ds.assign(started=(ds["started"].dims, timestamps(ds["started"].values), ds["started"].attrs))
    return ds
