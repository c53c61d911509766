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

    def summary(self, dim=("launch", "sample")) -> xr.Dataset:
        """Per point: median, mean and minimum time over all samples of all launches, and bandwidth.

        Bandwidth is size / median time, in bytes per second (divide by 1e6 for MB/s).
        """
        time = self._ds["time"]
        median = time.median(dim=list(dim))
        out = xr.Dataset({
            "median": median,
            "mean": time.mean(dim=list(dim)),
            "min": time.min(dim=list(dim)),
            "count": time.count(dim=list(dim)),
            "bandwidth": self._ds["size"] / median,
        })
        out["bandwidth"].attrs["units"] = "B/s"
        for name in ("median", "mean", "min"):
            out[name].attrs["units"] = "s"
        return out

    def failed_runs(self):
        """A table of the (library, placement, kernel, launch) cells whose launch gave no data."""
        table = self._ds["status"].to_dataframe()[["status"]]
        return table[table["status"] != "ok"]
