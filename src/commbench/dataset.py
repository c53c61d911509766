"""Opening a campaign dataset, and the `ds.commbench` accessor."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

CURVE_DIMS = ("library", "placement", "kernel")


def open_campaign(path) -> xr.Dataset:
    """Opens results/<campaign>/<campaign>.nc (or a results/<campaign> folder) into memory."""
    path = Path(path)
    if path.is_dir():
        path = path / f"{path.name}.nc"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such campaign dataset (make campaign writes results/<campaign>/<campaign>.nc)")
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    if "commbench_version" not in ds.attrs:
        raise ValueError(f"{path}: not a commbench dataset (no commbench_version attribute)")
    return ds


@xr.register_dataset_accessor("commbench")
class CommbenchAccessor:
    """Campaign-level views of a commbench dataset; results broadcast over the remaining dims."""

    def __init__(self, ds: xr.Dataset):
        self._ds = ds

    def summary(self, ci: bool = True, n_boot: int = 1000, seed: int = 0) -> xr.Dataset:
        """Per point, over all samples of all launches: median, mean, min, interquartile mean,
        count, bandwidth (size / median, B/s) and, with ci, 95% bootstrap intervals of the mean
        over samples (`mean_ci_samples`) and over launches (`mean_ci_launches`)."""
        from .stats import summarize

        return summarize(self._ds["time"], self._ds["size"], ci=ci, n_boot=n_boot, seed=seed)

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
        """Every (library, placement, kernel) with any data: its position, labels, sizes (bytes) and
        times shaped (n_sizes, n_launches, n_samples), the sizes it never measured dropped."""
        time = self._ds["time"].transpose(*CURVE_DIMS, "size", "launch", "sample")
        sizes, values = self._ds["size"].values, time.values
        for cell in np.ndindex(values.shape[:3]):
            cube = values[cell]
            measured = np.isfinite(cube).any(axis=(1, 2))
            if measured.any():
                labels = {dim: time[dim].values[i] for dim, i in zip(CURVE_DIMS, cell)}
                yield cell, labels, sizes[measured], cube[measured]

    def fit(self, model: str, **options) -> xr.Dataset:
        """Fits `model` ("hockney", "piecewise" or "packet", see commbench.models) to every curve.

        Returns a Dataset over (library, placement, kernel) of the fit's coefficients and
        intervals, named with their units (latency_s, bandwidth_Bps, ...), with a `bound`
        dim (low, high) for intervals and `segment` / `breakpoint` dims for piecewise fits;
        NaN where a curve has no data or too few sizes for the model. `options` go to the
        fit function (e.g. max_segments, n_boot).
        """
        from .models import FITS

        if model not in FITS:
            raise ValueError(f"unknown model {model!r}; known: {', '.join(FITS)}")
        results = {}
        for cell, _, sizes, times in self._curves():
            try:
                results[cell] = FITS[model](sizes, times, **options).variables()
            except ValueError:
                continue  # too few sizes for this model: the curve stays NaN
        return self._stack(results, model)

    def _stack(self, results: dict, model: str) -> xr.Dataset:
        """{cell: {name: (dims, values)}} -> one Dataset over the curve dims; shorter
        per-curve arrays (fewer segments) are padded with NaN."""
        shape = tuple(self._ds.sizes[dim] for dim in CURVE_DIMS)
        dims_of, lengths = {}, {}
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
        coords = {dim: self._ds[dim].values for dim in CURVE_DIMS}
        coords.update({dim: ["low", "high"] if dim == "bound" else np.arange(n) for dim, n in lengths.items()})
        return xr.Dataset(data_vars, coords=coords, attrs={"model": model})

    def anomalies(self, **options):
        """Every finding of commbench.anomalies.detect on every curve, as one pandas DataFrame
        whose first columns are library, placement and kernel; `options` go to detect."""
        import pandas as pd

        from .anomalies import COLUMNS, detect, empty_table

        tables = [detect(sizes, times, **options).assign(**labels)
                  for _, labels, sizes, times in self._curves()]
        tables = [table for table in tables if len(table)]
        if not tables:
            empty = empty_table()
            tables = [empty.assign(**{dim: pd.Series(dtype=object) for dim in CURVE_DIMS})]
        return pd.concat(tables, ignore_index=True)[[*CURVE_DIMS, *COLUMNS]]
