"""Opening a campaign dataset, and the `ds.commbench` accessor."""

from __future__ import annotations

from pathlib import Path

import xarray as xr


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
        """A table of the (library, placement, kernel, launch) cells whose launch gave no data."""
        table = self._ds["status"].to_dataframe()[["status"]]
        return table[table["status"] != "ok"]
