"""Where a dataset's curves come from: measured by commlens, or imported from another suite's files
(commlens.data.imported), as each cell records it: the library row's `imported` flag, each launch's
`kernel_info` (the file's suite, version, benchmark, options, path and hash, and the `reported`
column that is its value), `partial`, and the curve's `reported` columns and quantiles.

The summary, the export and the report mark imported rows through this module, so that all of them
say the same thing, read from the cells alone: a merged dataset keeps its campaign's attributes, so
nothing here reads the import's dataset-level attributes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import xarray as xr

# The percentiles a file can report (OSU's -z), as the summary and the export name them.
TAIL = {0.5: "P50", 0.9: "P90", 0.99: "P99"}


@dataclass(frozen=True)
class Origin:
    """An imported curve (one library row, placement and kernel): the files its launches came from."""

    suites: tuple[tuple[str, str], ...]   # (suite, version): ('OSU Micro-Benchmarks', '7.4')
    benchmarks: tuple[str, ...]    # 'osu_latency -z', as the files ran it
    files: tuple[dict, ...]        # each launch's kernel_info (file, sha256, ranks_stated, ...)
    value: str                     # what the one value per size is: 'OSU's Avg Latency'
    tails: tuple[str, ...]         # the percentiles the files report ('P50', 'P90', 'P99'), if any
    partial: tuple[str, ...]       # why launches stop short of what they were to run

    @property
    def source(self) -> str:
        """'OSU Micro-Benchmarks 7.4'; a version that is no plain number is said as the file has it."""
        return ", ".join(f"{suite} {version}" if version and len(version.split()) == 1
                         else f"{suite}, version {version or 'not recorded'}" for suite, version in self.suites)

    @property
    def label(self) -> str:
        """'imported from OSU Micro-Benchmarks 7.4: osu_latency -z'."""
        return f"imported from {self.source}: {', '.join(self.benchmarks)}"

    @property
    def mark(self) -> str:
        """What a row shows beside its numbers: 'imported' or 'imported, partial'."""
        return "imported, partial" if self.partial else "imported"

    def numbers(self) -> str:
        """What the numbers are and, where the files have none, that there is no spread; why partial."""
        spread = (f"{', '.join(self.tails)} as reported; no interval" if self.tails
                  else "no per-sample spread (no percentiles, no interval)")
        text = f"{self.value} as reported, one value per size; {spread}"
        if self.partial:
            text += f"; partial ({len(self.partial)} of {len(self.files)} files): {self.partial[0]}"
        return text


def legends(origins: dict[tuple, Origin]) -> tuple[dict[tuple, int], list[str]]:
    """Numbered legend lines for imported curves ({curve: number from 1}, lines): curves from one
    suite whose numbers are alike share one line, which lists their benchmarks."""
    groups: dict[tuple, list[str]] = {}
    for origin in origins.values():
        groups.setdefault((origin.source, origin.numbers()), []).extend(origin.benchmarks)
    keys = list(groups)
    numbers = {curve: keys.index((origin.source, origin.numbers())) + 1 for curve, origin in origins.items()}
    lines = [f"imported from {source}: {', '.join(dict.fromkeys(groups[source, text]))}; {text}"
             for source, text in keys]
    return numbers, lines


def curve_marks(origins: dict[tuple, Origin]) -> dict[tuple, str]:
    """{curve: 'imported [1]' or 'imported, partial [2]'}: its mark, citing its line of legends(origins)."""
    numbers = legends(origins)[0]
    return {curve: f"{origin.mark} [{numbers[curve]}]" for curve, origin in origins.items()}


def imported_libraries(ds: xr.Dataset) -> list[str]:
    """The library rows marked imported (none where the dataset has no `imported` coordinate)."""
    if "imported" not in ds.coords:
        return []
    return [str(lib) for lib, imported in zip(ds["library"].values, ds["imported"].values) if bool(imported)]


def launch_records(ds: xr.Dataset, library, placement, kernel) -> list[tuple[int, dict]]:
    """(launch, kernel_info) of the curve's launches that gave data and recorded one."""
    cell = dict(library=library, placement=placement, kernel=kernel)
    infos: np.ndarray | list[str] = ds["kernel_info"].sel(cell).values if "kernel_info" in ds else []
    status = ds["status"].sel(cell).values if "status" in ds else ["ok"] * len(infos)
    records = []
    for launch, (info, state) in enumerate(zip(infos, status)):
        if state == "ok" and str(info).strip():
            records.append((launch, json.loads(str(info))))
    return records


def curve_origin(ds: xr.Dataset, library, placement, kernel) -> Origin | None:
    """The Origin of an imported curve; None for a curve commlens measured (or that has no data)."""
    if str(library) not in imported_libraries(ds):
        return None
    records = launch_records(ds, library, placement, kernel)
    if not records:
        return None
    cell = dict(library=library, placement=placement, kernel=kernel)
    suites = tuple(dict.fromkeys((str(r.get("suite", "unknown")), str(r.get("version", ""))) for _, r in records))
    benchmarks = _distinct(" ".join([r.get("benchmark", "")] + _flags(r.get("options"))) for _, r in records)
    partial = ds["partial"].sel(cell).values if "partial" in ds else np.zeros(len(ds["launch"]), bool)
    reasons = tuple(str(r.get("partial") or "stopped short") for launch, r in records if bool(partial[launch]))
    return Origin(suites, benchmarks, tuple(r for _, r in records), _value(ds, [r for _, r in records]),
                  _tails(ds, cell), reasons)


def curve_origins(ds: xr.Dataset) -> dict[tuple[str, str, str], Origin]:
    """{(library, placement, kernel): Origin} of every imported curve with data."""
    found = {}
    for library in imported_libraries(ds):
        for placement in ds["placement"].values:
            for kernel in ds["kernel"].values:
                origin = curve_origin(ds, library, placement, kernel)
                if origin is not None:
                    found[str(library), str(placement), str(kernel)] = origin
    return found


def _distinct(values) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v for v in values if v))


def _flags(options) -> list[str]:
    """The command-line options a file states (OSU's ['-z']); a suite that states none as a list has none."""
    return [str(o) for o in options] if isinstance(options, list) else []


def _value(ds: xr.Dataset, records: list[dict]) -> str:
    """What each size's value is: the meaning of its `reported` column up to its first parenthesis or
    colon ("OSU's Avg Latency"), or 'the value' where the import did not record its column."""
    columns = _distinct(r.get("sample_column", "") for r in records)
    if not columns or "reported_meaning" not in ds.coords:
        return "the value"
    meanings = dict(zip(ds["reported_column"].values.tolist(), ds["reported_meaning"].values.tolist()))
    return " or ".join(meanings.get(c, c).split(":")[0].split(" (")[0] for c in columns)


def _tails(ds: xr.Dataset, cell: dict) -> tuple[str, ...]:
    """The percentiles the curve has (from the files: an imported point has one sample, no others)."""
    if "quantiles" not in ds:
        return ()
    quantiles = ds["quantiles"].sel(cell)
    return tuple(name for q, name in TAIL.items()
                 if q in quantiles["quantile"].values and np.isfinite(quantiles.sel(quantile=q).values).any())
