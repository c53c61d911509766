"""The `ds.commlens` accessor: campaign-level analysis of a commlens dataset.

Importing this module (or `commlens.analysis`, or calling `commlens.open_campaign`) registers it.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from commlens.data.samples import CURVE_DIMS, POINT_DIMS, curve_cube, curve_slice


@xr.register_dataset_accessor("commlens")
class CommlensAccessor:
    """Campaign-level views of a commlens dataset; results broadcast over the remaining dims."""

    def __init__(self, ds: xr.Dataset):
        self._ds = ds

    def summary(self, ci: bool = True, confidence: float = 0.95) -> xr.Dataset:
        """Per point over its launches, from the per-point statistics (commlens.analysis.stats): the
        median, mean, interquartile mean and quantiles (with p50, p90 and p99 picked from them, as
        OSU's -z) each the median over launches of every launch's own value (the launch is the
        experimental unit; nothing is pooled across launches of unequal sample counts), min, count,
        `launches` (how many measured the point), bandwidth (bytes the kernel moves / median, B/s:
        commlens.data.quantities.bandwidth) and, with ci, the intervals of the median and of the
        mean over launches (`median_ci`, `mean_ci`: with one launch, its own) and `bandwidth_ci`."""
        from commlens.analysis.stats import summarize_points

        return summarize_points(self._ds, ci=ci, confidence=confidence)

    def samples(self, **labels) -> xr.DataArray:
        """The samples of one point (labels for every point dim), or of one curve (library,
        placement, kernel) as a (size, launch, sample) array NaN-padded: read from disk, only these."""
        ds = self._ds
        missing = [dim for dim in CURVE_DIMS if dim not in labels]
        unknown = sorted(set(labels) - set(POINT_DIMS))
        if missing or unknown:
            raise ValueError(f"samples(): give library, placement and kernel (and size and launch for one point); "
                             f"missing {missing}, unknown {unknown}")
        cell = tuple(int(np.flatnonzero(ds[dim].values == labels[dim])[0]) for dim in CURVE_DIMS)
        counts, starts, values = curve_slice(ds, cell)
        cube = curve_cube(counts, starts, values, limit=None, sort=False)
        curve = xr.DataArray(cube, dims=("size", "launch", "sample"),
                             coords={"size": ds["size"].values, "launch": ds["launch"].values},
                             attrs=ds["time"].attrs)
        if "size" in labels or "launch" in labels:
            point = curve.sel({d: labels[d] for d in ("size", "launch") if d in labels})
            return point.dropna("sample", how="all") if point.ndim == 1 else point
        return curve

    def failed_runs(self):
        """A table of the (library, placement, kernel, launch) cells whose launch gave no data, with
        its status and reason; cells the campaign never asked for (a kernel's `placements` leave
        them out: `skipped`) are not listed."""
        columns = [name for name in ("status", "reason") if name in self._ds]   # older datasets have no reason
        table = self._ds[columns].to_dataframe()[columns]
        return table[~table["status"].isin(["ok", "skipped"])]

    def integrity_errors(self):
        """A table (pandas DataFrame) of the points whose integrity check found corrupted bytes:
        library, placement, kernel, size and launch, with their `errors` count. Empty when no
        point checked found any (points not checked are NaN and never listed)."""
        errors = self._ds["errors"]
        table = errors.where(errors > 0).to_dataframe()[["errors"]].dropna().reset_index()
        return table.astype({"errors": "int64"})

    def _curves(self):
        """Every (library, placement, kernel) with any data: its position, labels, sizes (bytes),
        sample cubes (n_sizes, n_launches, m) of at most commlens.data.samples.CUBE_SAMPLES order
        statistics per point, the true sample counts and where in its launch each point was measured
        (both (n_sizes, n_launches); positions None where the dataset has none); the sizes it never
        measured dropped. One curve's samples are read at a time."""
        ds = self._ds
        measured_curves = ds["sample_count"].transpose(*POINT_DIMS).values.any(axis=(3, 4))
        sizes = ds["size"].values
        # Not recorded by every source (synthetic rows, another suite's results): then none is used.
        positions = ds["position"].transpose(*POINT_DIMS).values if "position" in ds.data_vars else None
        for cell in zip(*np.nonzero(measured_curves)):
            counts, starts, values = curve_slice(ds, cell)
            measured = counts.any(axis=1)
            labels = {dim: ds[dim].values[i] for dim, i in zip(CURVE_DIMS, cell)}
            yield (cell, labels, sizes[measured], curve_cube(counts, starts, values)[measured], counts[measured],
                   None if positions is None else positions[cell][measured])

    def fit(self, model: str, **options) -> xr.Dataset:
        """Fits `model` ("hockney", "piecewise", "packet" or "regimes", see commlens.analysis.models) to every curve.

        Returns a Dataset over (library, placement, kernel) of the fit's coefficients and
        intervals, named with their units (latency_s, bandwidth_Bps, ...), with a `bound`
        dim (low, high) for intervals, `segment` / `breakpoint` dims for piecewise fits and a
        `switch` dim for regimes; NaN where a curve has no data or too few sizes for the model.
        `options` go to the fit function (e.g. max_segments, n_boot).
        """
        from commlens.analysis.models import FITS

        if model not in FITS:
            raise ValueError(f"unknown model {model!r}; known: {', '.join(FITS)}")
        results = {}
        for cell, _, sizes, times, counts, _ in self._curves():
            try:
                results[cell] = FITS[model](sizes, times, counts=counts, **options).variables()
            except ValueError:
                continue  # too few sizes for this model: the curve stays NaN
        return self._stack(results, model)

    def _stack(self, results: dict, model: str) -> xr.Dataset:
        """{cell: {name: (dims, values)}} -> one Dataset over the curve dims; shorter
        per-curve arrays (fewer segments) are padded with NaN."""
        shape = tuple(self._ds.sizes[dim] for dim in CURVE_DIMS)
        dims_of: dict[str, tuple[str, ...]] = {}
        lengths: dict[str, int] = {}
        for variables in results.values():
            for name, (dims, values) in variables.items():
                dims_of[name] = dims
                for dim, length in zip(dims, np.shape(values)):
                    lengths[dim] = max(lengths.get(dim, 0), length)
        data_vars = {}
        for name, dims in dims_of.items():
            array = np.full(shape + tuple(lengths[dim] for dim in dims), np.nan)
            for cell, variables in results.items():
                values = np.asarray(variables[name][1], dtype=float)
                array[cell + tuple(slice(0, n) for n in values.shape)] = values
            data_vars[name] = (CURVE_DIMS + dims, array)
        coords: dict[str, np.ndarray | list[str]] = {dim: self._ds[dim].values for dim in CURVE_DIMS}
        coords.update({dim: ["low", "high"] if dim == "bound" else np.arange(n) for dim, n in lengths.items()})
        return xr.Dataset(data_vars, coords=coords, attrs={"model": model})

    def compare(self, baseline: str, candidate: str, dim: str | None = None, **options) -> xr.Dataset:
        """Two rows of this dataset against each other: two libraries (`baseline="mpich-4.2.3",
        candidate="mpich-5.0.2"`), placements or kernels (`"pingpong.send"`, `"pingpong.ssend"`),
        the dim found from the labels unless given. Per cell of the other dims: ratio, interval,
        p and q values and a verdict; see commlens.analysis.compare for the method and `options`."""
        from commlens.analysis.compare import within

        return within(self._ds, baseline, candidate, dim=dim, **options)

    def anomalies(self, **options):
        """Every finding of commlens.analysis.anomalies.detect_launches on every curve (found in each launch
        and kept where the launches agree), as one pandas DataFrame whose first columns are library,
        placement and kernel; `options` go to detect_launches."""
        import pandas as pd

        from commlens.analysis.anomalies import COLUMNS, detect_launches, empty_table

        tables = [detect_launches(sizes, times, counts=counts, positions=positions, **options).assign(**labels)
                  for _, labels, sizes, times, counts, positions in self._curves()]
        tables = [table for table in tables if len(table)]
        if not tables:
            empty = empty_table()
            tables = [empty.assign(**{dim: pd.Series(dtype=object) for dim in CURVE_DIMS})]
        return pd.concat(tables, ignore_index=True)[[*CURVE_DIMS, *COLUMNS]]

    def pairs(self, library: str, placement: str, kernel: str, size: int, **options):
        """Slow nodes and links seen by an all-pairs kernel (allpairs.*) at one size, its launches the
        repetitions: node effects and link effects with intervals and which are named (a PairFindings;
        `.named()` reads them as sentences). `options` go to find_slow_nodes_and_links (groups: those
        of .groups() on a tree of switches; confidence, min_effect); see commlens.analysis.network
        for the method."""
        from commlens.analysis.network import find_slow_nodes_and_links, node_pair_times

        times, nodes = node_pair_times(self._ds, library, placement, kernel, size)
        return find_slow_nodes_and_links(times, nodes, **options)

    def groups(self, library: str, placement: str, kernel: str, size: int, **options):
        """Groups of nodes that share a switch, seen by an all-pairs kernel at one size (its launches the
        repetitions): pairs across groups slower than pairs within them beyond what the nodes explain (a
        NodeGroups; `.named()` reads it). `options` go to find_groups (confidence, min_effect);
        see commlens.analysis.network.groups for the method."""
        from commlens.analysis.network import find_groups, node_pair_times

        times, nodes = node_pair_times(self._ds, library, placement, kernel, size)
        return find_groups(times, nodes, **options)

    def configuration(self, library: str | None = None):
        """The libraries' control variables (MPI_T cvars) as their launches read them, one row per (library,
        cvar), as a pandas DataFrame: library, cvar, value (text; empty where the row's launches differ:
        status `varies`, each launch's in `cvar_launch_value`), status (read, varies, unreadable: why),
        default (the build's own run, nothing set), datatype, scope and description. Empty for a dataset of
        launches that recorded none. See commlens.analysis.configuration."""
        from commlens.analysis.configuration import configuration

        return configuration(self._ds, library)

    def configuration_difference(self, baseline: str, candidate: str):
        """The control variables whose value differs between two library rows, appeared or disappeared,
        with their descriptions and the environment variable that set them where one did (a pandas
        DataFrame: cvar, change, baseline, candidate, placements, set_by, also_as, description); see
        commlens.analysis.configuration.difference."""
        from commlens.analysis.configuration import difference

        return difference(self._ds, baseline, candidate)

    def topology(self):
        """Where each rank ran, in hwloc's terms, per library, placement and binding (a pandas DataFrame:
        library, placement, binding, rank, host, cpus, cores, numa_nodes, packages, caches, peer,
        shared_with_peer, relation, launches), from each host's recorded topology (`host_topology`) and the
        launches' cpu_binding. Empty for a dataset without topology. See commlens.analysis.topology."""
        from commlens.analysis.topology import rank_table

        return rank_table(self._ds)

    def guidelines(self, **options):
        """Measurements that the same library's other measurements contradict beyond noise (time
        that drops with size, a collective slower than a mock-up of simpler calls, Ssend faster than
        Send), one row per range of sizes, as a pandas DataFrame; kept apart from anomalies(), which
        looks at one curve at a time. See commlens.analysis.guidelines for the columns, the method and
        `options` (min_effect, confidence)."""
        from commlens.analysis.guidelines import check

        return check(self._ds, **options)
