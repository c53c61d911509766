"""A campaign dataset as the CF conventions (CF-1.10) and the Attribute Convention for Data Discovery
(ACDD-1.3) have it, so that any CF-aware reader (xarray, cf-python, Panoply, ncdump, the IOOS
compliance checker, cfchecker) reads the file whole without commlens, and a catalogue finds it.

What they ask of it, and where commlens does it (describe, when a dataset is built; encode, when it
is written; decode, when it is opened):
- global `Conventions`, `title`, `history` (what made the file, and when), `source` (how the data
  were produced), and ACDD's discovery attributes: `summary` (written from the dataset's own axes),
  `keywords`, `id` (the campaign and its configuration's hash), `date_created` (the collection),
  `license` (commlens's own), `creator_name` and `institution` (commlens.data.attributes);
- `units` on every numeric variable, in UDUNITS spellings ("s", "bytes", "bit/s"; "1" for counts,
  ratios, indices and flags), a `long_name` on every variable, and ACDD's `coverage_content_type` on
  every data variable; text variables (labels, reasons, JSON) have no units, as CF units describe
  quantities;
- labels: CF allows no text coordinate variable (a coordinate variable is numeric and monotonic), so
  a text axis (library, placement, kernel, bound, ...) is a plain dimension on disk, its labels a CF
  label variable `<axis>_label` (an auxiliary coordinate); opened, the labels index the axis again,
  and `ds.sel(library=...)` works as on the dataset that was written;
- text is written as CF character arrays (a `<name>_strlen` dimension, UTF-8): every CF reader takes
  them, where variable-length strings are refused by some (cfchecker);
- samples: a CF contiguous ragged array (CF 9.3.3) of featureType timeSeries: each point (a cell of
  the point axes: library, placement, kernel, size, launch) is one series of samples in the order
  they were measured. On disk the points lie along one instance dimension `point`, in the order
  their samples lie in `time`, with the count variable `point_sample_count(point)`, the series'
  name `point_id` (cf_role timeseries_id: "mpich-5.0.2/1N2P/pingpong.send/0/1024") and the point's
  axes as auxiliary coordinates `point_<axis>` (a size's and launch's value, a text axis's position
  along it), so each series says which point it is without commlens (Points). Every point of the
  axes has its instance, those without samples a count of 0. Opened, the counts are `sample_count`
  over the point axes again, with `sample_start`, each point's first sample;
- flags: CF's `flag_values` must be numbers of the variable's own type, so the launch `status`,
  text in memory, is written as a small integer with `flag_values` and `flag_meanings` and read
  back as text. The meanings are read from each file, so a file stays readable whatever statuses
  later versions add. The true/false `settled` and `emulated` are byte flags on disk;
- timestamps: a launch's `started` is a datetime64 (NaT where the launch never started), written as
  milliseconds since 1970-01-01 (UTC), as launch records have them. Global `created` and
  `first_launch` stay ISO 8601 text, which netCDF attributes can hold and people can read;
- no path of the machine that wrote the file: a global attribute's absolute paths are written
  relative to the checkout (or the folder the campaign ran in, or the campaign file's folder), a
  home folder as `~` (commlens.io.conventions.machine_independent).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from commlens.io.raw import NOT_RUN
from commlens.locations import CHECKOUT
from commlens.units import format_size

CONVENTIONS = "CF-1.10, ACDD-1.3"   # comma-separated, as ACDD writes it (CF takes either)
FEATURE_TYPE = "timeSeries"      # each point's samples: one series, in the order they were measured

# Every value a launch's status takes in a dataset: the raw files' (commlens.io.raw.LAUNCH_STATUSES),
# and what collecting adds: refused (a damaged raw file), missing (no raw file), skipped (not asked
# for). Their position is their code on disk.
STATUSES = ("ok", "failed", "timeout", "refused", *NOT_RUN, "missing", "skipped")

# Units (UDUNITS spellings; "1": counts, ratios, indices, flags) and names of the variables that
# collect.build_dataset and commlens.data.samples make without them; a variable made with its own keeps them.
ATTRIBUTES = {
    "library": {"long_name": "library: an MPI library, or a version or configuration of one (the campaign's rows)"},
    "placement": {"long_name": "placement: nodes x processes per node"},
    "kernel": {"long_name": "benchmark kernel"},
    "bound": {"long_name": "bound of the interval"},
    "pair_kernel": {"long_name": "the kernels that timed every pair of ranks"},
    "reported_column": {"long_name": "a column of the imported suite's output"},
    "reported_units": {"long_name": "units of the imported column's values in `reported`"},
    "reported_meaning": {"long_name": "what the imported column means"},
    "imported": {"long_name": "measured outside commlens, imported"},
    "source": {"long_name": "where the row's numbers come from"},
    "size": {"units": "bytes", "long_name": "message size"},
    "launch": {"units": "1", "long_name": "launch number"},
    "quantile": {"units": "1", "long_name": "quantile level"},
    "nodes": {"units": "1", "long_name": "nodes"},
    "ppn": {"units": "1", "long_name": "processes per node"},
    "nprocs": {"units": "1", "long_name": "processes"},
    "transport": {"long_name": "how ranks on different nodes talked: shm (one node), tcp, or as the launches say"},
    "emulated": {"units": "1", "long_name": "nodes emulated on one host"},
    "windowed": {"units": "1", "long_name": "a window of messages in flight (--window)"},
    "library_version": {"long_name": "the library's version, as MPI_Get_library_version reports it"},
    "mpi": {"long_name": "the MPI installation the row uses (envs/mpi/<mpi>.yaml)"},
    "family": {"long_name": "the MPI family: mpich, openmpi, ..."},
    "compiler": {"long_name": "the compiler the kernels were built with"},
    "library_status": {"long_name": "whether the library could be used: ok, env_failed or build_failed"},
    "library_reason": {"long_name": "why the library could not be used (empty: it could)"},
    "library_log_tail": {"long_name": "the end of the failed environment's or build's log (empty: none failed)"},
    "library_env": {"long_name": "environment variables the campaign sets for the row (JSON)"},
    "metric": {"long_name": "what one sample's time means, as the kernel documents it"},
    "hosts": {"long_name": "the node of each rank, comma-separated"},
    "build_warnings": {"units": "1"},
    "sample_count": {"units": "1"},
    "sample_start": {"units": "1", "long_name": "index in `time` of the point's first sample"},  # as opened
    "rse": {"units": "1"},
    "iters_per_sample": {"units": "1"},
    "errors": {"units": "1"},
    "short_samples_dropped": {"units": "1"},
    "position": {"units": "1"},
    "settled": {"units": "1"},
    "started": {"standard_name": "time", "long_name": "when the launch started (UTC; NaT: it never did)"},
    "timer_resolution_s": {"units": "s", "long_name": "resolution of the kernel's timer"},
    "harness_overhead_s": {"units": "s", "long_name": "overhead of the harness's timing, as it measured it"},
}

# ACDD's coverage_content_type of the data variables: what was measured, what says how well, and the
# rest (how and when it was measured: auxiliaryInformation).
MEASURED = {"time", "median", "mean", "min", "iqm", "std", "quantiles", "median_ci", "pair_time", "reported",
            "subtracted_s", "exit_skew_s", "timer_resolution_s", "harness_overhead_s"}
QUALITY = {"settled", "rse", "errors", "short_samples_dropped", "status", "reason", "partial", "retried_after"}

# The true/false variables, as CF flags (xarray writes a bool as a byte).
FLAGS = {"settled": "not_settled settled", "emulated": "not_emulated emulated", "windowed": "not_windowed windowed"}

# How `started` is written: whole milliseconds (launch records have no finer) as integers, which decode
# exactly (a float's milliseconds come back some hundred nanoseconds off); NaT is the _FillValue.
TIME_ENCODING = {"units": "milliseconds since 1970-01-01 00:00:00", "calendar": "proleptic_gregorian",
                 "dtype": "int64", "_FillValue": np.iinfo(np.int64).min}

# On disk: a text axis's labels, and the ragged samples' instance dimension and its variables.
LABEL_SUFFIX = "_label"
SAMPLE = "sample"
POINT = "point"
POINT_COUNT = "point_sample_count"
POINT_ID = "point_id"
POINT_AXIS_PREFIX = "point_"
POINTS_CHUNK = 1 << 18          # points whose variables are made or read at a time (their texts: some 10 MiB)
COUNT = "sample_count"          # in memory: samples per point, over the point axes
START = "sample_start"


def describe(ds: xr.Dataset, description: str = "",
             made_by: str = "measured by the commlens benchmark kernels, collected from the campaign's raw "
                             "launch files") -> xr.Dataset:
    """`ds` (a campaign dataset just built, with its `campaign`, `created`, `config_hash` and
    `commlens_version` attributes) with what CF and ACDD ask: global description, units, names,
    flags, `started` as datetimes. `made_by` says how the data were produced (CF's `source`);
    `history` starts with the time the file was made, as CF asks."""
    ds = ds.copy()
    for name, variable in ds.variables.items():
        variable.attrs.update({key: value for key, value in ATTRIBUTES.get(str(name), {}).items()
                               if key not in variable.attrs})
        if name in FLAGS and variable.dtype == bool:
            variable.attrs.update(flag_values=np.array([0, 1], dtype=np.int8), flag_meanings=FLAGS[name])
    if "started" in ds and ds["started"].dtype.kind in "OUS":
        ds["started"] = ds["started"].copy(data=timestamps(ds["started"].values))
    version = ds.attrs.get("commlens_version", "")
    ds.attrs.update({
        "Conventions": CONVENTIONS,
        "title": f"commlens campaign {ds.attrs.get('campaign', '')}" + (f": {description}" if description else ""),
        "source": f"commlens {version}: {made_by}",
        "history": f"{ds.attrs.get('created', '')} commlens {version}: {made_by}",
        **discovery_attributes(ds),
    })
    return ds


def discovery_attributes(ds: xr.Dataset) -> dict:
    """ACDD's discovery attributes a dataset's own attributes and axes give (creator_name and institution
    are provenance: commlens.data.attributes)."""
    return {
        "summary": summary(ds),
        "keywords": keywords(ds),
        "id": f"{ds.attrs.get('campaign', '')}-{str(ds.attrs.get('config_hash', ''))[:16]}",
        "date_created": ds.attrs.get("created", ""),   # ACDD's name for the collection's time
        "license": license_of_commlens(),
        "processing_level": "every sample as measured (a timed batch's time per iteration, see each kernel's metric), "
                            "and statistics of each point's samples",
        **({"time_coverage_start": ds.attrs["first_launch"]} if ds.attrs.get("first_launch") else {}),
    }


def summary(ds: xr.Dataset) -> str:
    """ACDD's summary, from the dataset's axes: what was measured, on what, and what the file holds."""
    def listed(axis: str, noun: str) -> str:
        labels = [str(label) for label in ds[axis].values] if axis in ds.coords else []
        return f"{len(labels)} {noun}{'s' * (len(labels) != 1)}" + (f" ({', '.join(labels)})" if labels else "")

    sizes = ds["size"].values if "size" in ds.coords else np.array([])
    launches = ds.sizes.get("launch", 0)
    return (f"Communication benchmark measurements of commlens campaign {ds.attrs.get('campaign', '')}: "
            f"{listed('library', 'MPI library row')} on "
            f"{listed('placement', 'placement')}, {listed('kernel', 'kernel')}"
            + (f", message sizes {format_size(sizes.min())} to {format_size(sizes.max())}" if sizes.size else "")
            + f", {launches} launch{'es' * (launches != 1)} of each. The file holds every timed sample (seconds, a "
              "CF ragged array, one series per point), per-point statistics (median, mean, minimum, quantiles, "
              "95% interval of the median), how each point and launch was measured, and the provenance of the "
              "libraries, builds and hosts.")


def keywords(ds: xr.Dataset) -> str:
    """ACDD's keywords: what any such dataset is about, and the kernel and library families it has."""
    families = [str(value) for name in ("kernel_family", "family") if name in ds.coords
                for value in ds[name].values if str(value) and str(value) != "unknown"]
    return ", ".join(dict.fromkeys(["MPI", "HPC", "communication", "benchmark", "latency", "bandwidth", "commlens",
                                    *families]))


def license_of_commlens() -> str:
    """The license commlens is distributed under (pyproject.toml's, from the installed package's metadata)."""
    from importlib.metadata import PackageNotFoundError, metadata

    try:
        meta = metadata("commlens")
    except PackageNotFoundError:
        return "unknown"
    # metadata() returns an email.message.Message, whose get() the PackageMetadata protocol leaves out.
    return meta.get("License-Expression") or meta.get("License") or "unknown"  # type: ignore[attr-defined]


def timestamps(values) -> np.ndarray:
    """ISO 8601 texts ("" where none) as datetime64[ns] in UTC, NaT where none."""
    texts = pd.Series(np.asarray(values, dtype=object).ravel()).replace("", None)
    moments = pd.to_datetime(texts, utc=True, format="ISO8601").dt.tz_convert(None)
    return moments.to_numpy(dtype="datetime64[ns]").reshape(np.shape(values))


def machine_independent(text: str, roots) -> str:
    """`text` with every absolute path under one of `roots` (folders, tried in order) written relative to
    it, and one under the home folder as ~/...; paths elsewhere (/usr, /opt: which installation was
    used) stay as they are. A path counts where it starts a word or follows -I or -L (compiler flags)."""
    for root, replacement in [*((str(root).rstrip("/"), "") for root in roots), (str(Path.home()).rstrip("/"), "~")]:
        if not root:           # the file system's root: no folder of this machine's
            continue
        pattern = rf"(?:(?<=-[IL])|(?<![\w./~-])){re.escape(root)}(/|(?![\w./-]))"
        def replaced(match: re.Match[str], replacement: str = replacement) -> str:
            return (f"{replacement}/" if replacement else "") if match.group(1) else replacement or "."

        text = re.sub(pattern, replaced, text)
    return text


def path_roots(attrs: dict) -> list[Path]:
    """Where a dataset's paths are written relative to: the checkout, the folder the campaign ran in (the
    working directory: the workflow's --directory) and the campaign file's folder."""
    roots = [root for root in (CHECKOUT, Path.cwd()) if root is not None and root != Path.home()]
    campaign_file = Path(str(attrs.get("campaign_file", "")))
    if campaign_file.is_absolute():
        roots.append(campaign_file.parent)
    return roots


class LayoutError(ValueError):
    """A file's samples that do not fit its axes: what decode_layout refuses, naming what."""


@dataclass
class Points:
    """The ragged samples' instances as written: every point of the point axes, the axes nested in
    `order` (outermost first: the order the samples lie in `time`), each point's samples `counts` and
    where they lie in the dataset's own `time` (`source_starts`). On disk each point is named by its
    `point_id` (its labels and values, `/` between them) and placed by its `point_<axis>`: a numeric
    axis's value (size in bytes, launch), a text axis's position along it (its label is
    `<axis>_label` there; numbers, so that opening a dataset of a million points reads no text per
    point). The variables are made a chunk of points at a time (`chunk`), so writing them holds a
    chunk's names, not a name per point of the whole dataset."""

    order: list[str]
    labels: dict[str, np.ndarray]    # each axis's labels (UTF-8 bytes) or values, along it
    units: dict[str, str]            # each numeric axis's units
    counts: np.ndarray
    source_starts: np.ndarray
    count_attrs: dict

    @property
    def size(self) -> int:
        return int(self.counts.size)

    @property
    def coordinates(self) -> str:
        """The count's and the samples' auxiliary coordinates: the name, then the axes in `order`."""
        return " ".join([POINT_ID, *(POINT_AXIS_PREFIX + dim for dim in self.order)])

    def variables(self) -> dict[str, tuple[np.dtype, int, dict]]:
        """Each variable over `point`: its type, its text's width in bytes (0: a number), its attributes."""
        widths = [int(values.dtype.itemsize) if values.dtype.kind == "S" else len(str(values.max(initial=0)))
                  for values in self.labels.values()]
        variables = {POINT_ID: (np.dtype("S1"), sum(widths) + len(widths) - 1,
                                {"_Encoding": "utf-8", "long_name": f"the point: its {', '.join(self.order)}, "
                                                                    f"with / between them",
                                 "cf_role": "timeseries_id"})}
        for dim, values in self.labels.items():
            text = values.dtype.kind == "S"
            variables[POINT_AXIS_PREFIX + dim] = (
                np.dtype(np.int32) if text else values.dtype, 0,
                {"long_name": f"the point's {dim}" + (f": its position along {dim} (its label: {dim}{LABEL_SUFFIX} "
                                                      f"there, from 0)" if text else ""),
                 "units": "1" if text else self.units.get(dim, "1")})
        variables[POINT_COUNT] = (np.dtype(np.int32), 0, {**self.count_attrs, "units": "1", "sample_dimension": SAMPLE,
                                                          "coordinates": self.coordinates})
        return variables

    def chunk(self, start: int, stop: int) -> dict[str, np.ndarray]:
        """The variables' values for points start to stop (names as UTF-8 bytes)."""
        at = np.unravel_index(np.arange(start, stop), [self.labels[dim].size for dim in self.order])
        parts = [self.labels[dim][index] for dim, index in zip(self.order, at)]
        name = parts[0].astype("S")
        for part in parts[1:]:
            name = np.char.add(np.char.add(name, b"/"), part.astype("S"))
        axes = {POINT_AXIS_PREFIX + dim: index.astype(np.int32) if self.labels[dim].dtype.kind == "S"
                else self.labels[dim][index] for dim, index in zip(self.order, at)}
        return {POINT_ID: name, **axes, POINT_COUNT: self.counts[start:stop].astype(np.int32)}


@dataclass
class Encoded:
    """A dataset as written: `dataset` (all but the samples and their instances), each variable's netCDF
    `encoding`, the samples' instances (`points`, None for a dataset without samples per point) and
    `time`'s attributes."""

    dataset: xr.Dataset
    encoding: dict
    points: Points | None
    time_attrs: dict


def encode(ds: xr.Dataset, path) -> Encoded:
    """The dataset as written to `path` (see the module's docstring): labels as label variables,
    samples as a ragged array over `point`, text as characters, `status` as codes with its flags,
    `started` as CF time (milliseconds since 1970), ACDD's attributes, no absolute path of this
    machine. A status outside STATUSES is refused, naming it."""
    ds = ds.copy()
    for variable in ds.variables.values():
        variable.encoding = {}    # as read from another file (its string widths, chunks): written afresh
    # What the axes say is said of the dataset as written (a merge adds a row); what a dataset written
    # before these attributes lacks is added.
    discovered = discovery_attributes(ds)
    time_attrs = {key: value for key, value in ds["time"].attrs.items()} if "time" in ds else {}
    ds = ds.drop_vars([name for name in ("time",) if name in ds])
    encoding = {}
    ds = _status_as_flags(ds, path)
    if "started" in ds and ds["started"].dtype.kind == "M":
        encoding["started"] = dict(TIME_ENCODING)
    for name, variable in ds.variables.items():
        variable.attrs.update({key: value for key, value in ATTRIBUTES.get(str(name), {}).items()
                               if key not in variable.attrs})
        # CF readers name an axis or a plot by it; a variable made without one (a user's) gets its own name.
        variable.attrs.setdefault("long_name", str(name).replace("_", " "))
        if name in ds.data_vars:
            variable.attrs.setdefault("coverage_content_type", "physicalMeasurement" if name in MEASURED else
                                      "qualityInformation" if name in QUALITY else "auxiliaryInformation")
    ds, points = _ragged_over_points(ds, path)
    ds = _labels_as_variables(ds, path)
    time_attrs.setdefault("coverage_content_type", "physicalMeasurement")
    if points is not None:
        time_attrs["coordinates"] = points.coordinates
    # Text as CF character arrays (UTF-8), each with its own length dimension.
    encoding |= {str(name): {"dtype": "S1", "char_dim_name": f"{name}_strlen", "zlib": True, "complevel": 4}
                 for name, variable in ds.variables.items() if variable.dtype.kind in "OUS"}
    encoding |= {str(name): {"zlib": True, "complevel": 4} for name, variable in ds.data_vars.items()
                 if variable.dtype.kind == "f"}
    # CF: a coordinate variable holds no missing values, so it has no _FillValue (xarray gives every
    # floating-point variable one unless told).
    encoding |= {str(name): {"_FillValue": None} for name in ds.dims
                 if name in ds.coords and ds[name].dtype.kind == "f"}
    version = ds.attrs.get("commlens_version", "")
    described = {"title": f"commlens campaign {ds.attrs.get('campaign', '')}", "source": f"commlens {version}",
                 "history": f"{ds.attrs.get('created', '')} commlens {version}"}    # a dataset from before CF
    attrs = {**described, **discovered, **ds.attrs} | {key: discovered[key] for key in ("summary", "keywords")}
    roots = path_roots(attrs)
    ds.attrs = {key: machine_independent(value, roots) if isinstance(value, str) else value
                for key, value in attrs.items()}
    ds.attrs["Conventions"] = CONVENTIONS        # a file written before says an older CF
    if points is not None:
        ds.attrs["featureType"] = FEATURE_TYPE
    return Encoded(ds, encoding, points, time_attrs)


def _status_as_flags(ds: xr.Dataset, path) -> xr.Dataset:
    if "status" not in ds or ds["status"].dtype.kind not in "OUS":
        return ds
    values = ds["status"].values.astype(str)
    unknown = sorted(set(map(str, np.unique(values))) - set(STATUSES))
    if unknown:
        raise ValueError(f"{path}: launch status {', '.join(map(repr, unknown))} is not one of "
                         f"{', '.join(STATUSES)}")
    codes = pd.Categorical(values.ravel(), categories=STATUSES).codes.astype(np.int8).reshape(values.shape)
    flags = {"flag_values": np.arange(len(STATUSES), dtype=np.int8), "flag_meanings": " ".join(STATUSES),
             "units": "1"}
    return ds.assign(status=(ds["status"].dims, codes, {**ds["status"].attrs, **flags}))


def _ragged_over_points(ds: xr.Dataset, path) -> tuple[xr.Dataset, Points | None]:
    """The dataset without `sample_count` and `sample_start` (over the point axes), and its points as
    CF's instances of the samples: every point of the axes, nested in the order of `sample_count`'s
    `sample_order` (the order a dataset lays its samples out in)."""
    if COUNT not in ds:
        return ds, None
    count = ds[COUNT]
    dims = [str(dim) for dim in count.dims]
    order = str(count.attrs.get("sample_order", " ".join(dims))).split()
    if sorted(order) != sorted(dims):
        raise ValueError(f"{path}: {COUNT}'s sample_order {' '.join(order)!r} is not an order of its dimensions "
                         f"{', '.join(dims)}")
    counts = count.transpose(*order).values.astype(np.int64).ravel()
    starts = (ds[START].transpose(*order).values.astype(np.int64).ravel() if START in ds
              else np.cumsum(counts) - counts)
    if counts.size and counts.max() > np.iinfo(np.int32).max:
        raise ValueError(f"{path}: a point holds {counts.max()} samples, more than a netCDF int can count")
    labels = {}
    for dim in order:
        values = ds[dim].values if dim in ds.coords else np.arange(ds.sizes[dim])
        labels[dim] = np.char.encode(values.astype(str), "utf-8") if values.dtype.kind in "OUS" else values
    # Its sample_order is in memory what the point_<axis> coordinates are on disk.
    kept = {key: value for key, value in count.attrs.items() if key not in ("sample_dimension", "sample_order")}
    points = Points(order=order, labels=labels, units={dim: str(ds[dim].attrs.get("units", "1")) for dim in order
                                                   if dim in ds.coords},
                    counts=counts, source_starts=starts, count_attrs=kept)
    return ds.drop_vars([name for name in (COUNT, START) if name in ds]), points


def _labels_as_variables(ds: xr.Dataset, path) -> xr.Dataset:
    """Each text axis without its coordinate variable, its labels in a label variable `<axis>_label`."""
    for dim in list(ds.dims):
        if dim not in ds.indexes or ds[dim].dtype.kind not in "OUS":
            continue
        label = f"{dim}{LABEL_SUFFIX}"
        if label in ds.variables:
            raise ValueError(f"{path}: variable {label!r} is the name the labels of axis {dim!r} are written "
                             f"under; rename it")
        coordinate = ds[dim]
        ds = ds.drop_vars([dim]).assign_coords({label: (dim, coordinate.values.astype(str), coordinate.attrs)})
    return ds


def decode_layout(ds: xr.Dataset) -> xr.Dataset:
    """A dataset as opened from a file (lazily: only labels and counts are read), with the layout commlens
    works with: text axes indexed by their labels, and `sample_count` and `sample_start` over the point
    axes. A file written before this layout (text coordinate variables, counts over the point axes) is
    returned as it is. Raises LayoutError where the file's points do not fit its axes, naming what."""
    labelled = []
    for label in [str(name) for name in ds.variables if str(name).endswith(LABEL_SUFFIX)]:
        dim = label[:-len(LABEL_SUFFIX)]
        if ds[label].dims == (dim,) and dim not in ds.indexes:
            ds = ds.drop_vars(label).assign_coords({dim: (dim, ds[label].values.astype(str), ds[label].attrs)})
            labelled.append(dim)
    if POINT_COUNT not in ds:
        return ds
    count = ds[POINT_COUNT]
    names = [name for name in str(count.encoding.get("coordinates", "")).split()
             if name.startswith(POINT_AXIS_PREFIX) and name != POINT_ID]
    order = [name[len(POINT_AXIS_PREFIX):] for name in names]
    if not order or count.dims != (POINT,) or any(dim not in ds.dims or name not in ds.variables
                                                  for dim, name in zip(order, names)):
        raise LayoutError(f"{POINT_COUNT} is not a count over `{POINT}` with a point_<axis> auxiliary coordinate "
                         f"for each axis of the points (coordinates: {count.encoding.get('coordinates', '')!r})")
    counts = count.values.astype(np.int64)
    starts = np.cumsum(counts) - counts             # the points' samples lie in `time` in the file's order
    shape = tuple(ds.sizes[dim] for dim in order)
    sample_count = np.zeros(int(np.prod(shape)), dtype=np.int64)
    sample_start = np.zeros(sample_count.size, dtype=np.int64)
    placed = np.zeros(sample_count.size, dtype=bool)
    for begin in range(0, counts.size, POINTS_CHUNK):
        stop = min(begin + POINTS_CHUNK, counts.size)
        at = np.ravel_multi_index([_positions(ds, dim, name, begin, stop, by_position=dim in labelled)
                                   for dim, name in zip(order, names)], shape)
        already = int(np.count_nonzero(placed))
        placed[at] = True
        if np.count_nonzero(placed) - already != at.size:
            raise LayoutError(f"two of the {POINT} instances are the same point (the same {', '.join(order)})")
        sample_count[at], sample_start[at] = counts[begin:stop], starts[begin:stop]
    count_attrs = {key: value for key, value in count.attrs.items() if key not in ("coverage_content_type",)}
    ds = ds.drop_vars([POINT_COUNT, POINT_ID, *names]).assign(
        {COUNT: (order, sample_count.reshape(shape), {**count_attrs, "sample_order": " ".join(order)}),
         START: (order, sample_start.reshape(shape), dict(ATTRIBUTES[START]))})
    ds.attrs = {key: value for key, value in ds.attrs.items() if key != "featureType"}
    return ds


def _positions(ds: xr.Dataset, dim: str, name: str, begin: int, stop: int, by_position: bool) -> np.ndarray:
    """Where points begin to stop lie along `dim`, from their auxiliary coordinate `name`: their
    positions along it (a labelled axis) or their values on it; LayoutError naming one that is neither."""
    values = ds[name][begin:stop].values
    if by_position:
        at = values.astype(np.int64)
    else:        # a few values, each many times: each looked up once
        codes, uniques = pd.factorize(values)
        at = (ds.indexes[dim].get_indexer(uniques) if dim in ds.indexes else np.asarray(uniques, dtype=np.int64))[codes]
    stray = (at < 0) | (at >= ds.sizes[dim])
    if stray.any():
        known = ds.indexes[dim].tolist() if dim in ds.indexes else list(range(ds.sizes[dim]))
        value = values[stray][0]
        raise LayoutError(f"{name} holds {value.item() if isinstance(value, np.generic) else value!r}, which is not "
                         + (f"a position along {dim} (0 to {ds.sizes[dim] - 1})" if by_position else
                            f"a {dim} of the dataset ({dim}: {', '.join(map(str, known[:10]))}"
                            f"{', ...' if len(known) > 10 else ''})"))
    return at


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
