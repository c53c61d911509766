"""What the Methods section reads from a dataset (`Facts`), and how it words values: durations,
spans, values grouped by the kernels that have them; what the dataset lacks is NOT_RECORDED."""

from __future__ import annotations

import json

import numpy as np

from commlens.units import format_seconds
import xarray as xr

NOT_RECORDED = "not recorded"


class Facts:
    """The dataset with its campaign configuration, read once, and lookups that say when it lacks one."""

    def __init__(self, ds: xr.Dataset):
        self.ds = ds
        self.config = json.loads(ds.attrs.get("campaign_config", "{}"))
        self.kernels = [str(k) for k in ds["kernel"].values]
        self.measured = ds["sample_count"] > 0

    def attr(self, key: str):
        """The attribute, or None where the dataset has none (missing, empty, NaN)."""
        value = self.ds.attrs.get(key)
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        if isinstance(value, (float, np.floating)) and not np.isfinite(value):
            return None
        return value

    def text(self, key: str) -> str:
        value = self.attr(key)
        return NOT_RECORDED if value is None else str(value)

    def option(self, kernel: str, name: str):
        return self.config.get("kernels", {}).get(kernel, {}).get(name)

    def per_run(self, name: str) -> np.ndarray:
        """A per-launch record (library, placement, kernel, launch) over launches that gave data; empty
        where the dataset lacks it."""
        if name not in self.ds or "status" not in self.ds:
            return np.array([])
        values = self.ds[name].transpose("library", "placement", "kernel", "launch").values
        ok = self.ds["status"].transpose("library", "placement", "kernel", "launch").values == "ok"
        return values[ok]

    def coord(self, name: str, dim: str) -> dict:
        """{label: value} of a coordinate along `dim`; {} where the dataset lacks it."""
        if name not in self.ds.coords:
            return {}
        return dict(zip((str(v) for v in self.ds[dim].values), self.ds[name].values.tolist()))


def grouped(values: dict[str, object], describe=str) -> str:
    """'X for every kernel', or each value with the kernels that have it, the commonest last as 'the
    other N kernels'."""
    if not values:
        return NOT_RECORDED
    by_value: dict[str, list[str]] = {}
    for kernel, value in values.items():
        by_value.setdefault(NOT_RECORDED if value is None else describe(value), []).append(kernel)
    if len(by_value) == 1:
        only = next(iter(by_value))
        return only if only == NOT_RECORDED else f"{only} for every kernel"
    ordered = sorted(by_value.items(), key=lambda item: len(item[1]))
    rest_value, rest = ordered.pop()
    listed = [f"{value} for {', '.join(kernels)}" for value, kernels in ordered]
    return "; ".join(listed + [f"{rest_value} for the other {count_of(len(rest), 'kernel')}"])


def count_of(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def duration_words(seconds) -> str:
    return format_seconds(seconds) or NOT_RECORDED


def value_span(values, describe) -> str:
    """'a' or 'a to b' over the finite values; NOT_RECORDED when there are none."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if not values.size:
        return NOT_RECORDED
    low, high = describe(values.min()), describe(values.max())
    return low if low == high else f"{low} to {high}"


def over_launches(per_launch: np.ndarray, best: str) -> str:
    """How a per-launch record varied, after its best value: '' where not recorded."""
    if not per_launch.size:
        return ""
    span = value_span(per_launch, duration_words)
    return " in every launch" if span == best else f" at best, {span} over the launches"
