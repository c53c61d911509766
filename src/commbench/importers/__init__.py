"""Other suites' results in the campaign schema: OSU Micro-Benchmarks and IMB output tables.

`read_osu(path)` and `read_imb(path, nprocs)` read a file into Measurements (commbench.importers.common),
`to_dataset(...)` makes them one library row of a dataset that `open_campaign`, the summary, the
figures and `commbench compare` take like a campaign's; `import_files` does both, as
`commbench import-osu` and `commbench import-imb` do.
"""

from __future__ import annotations

from pathlib import Path

import xarray as xr

from .common import ImportFileError, Measurement, placement_shape, to_dataset
from .imb import read_imb
from .osu import read_osu

__all__ = ["ImportFileError", "Measurement", "import_files", "read_imb", "read_osu", "to_dataset"]


def import_files(paths, suite: str, library: str, placement: str, kernel: str | None = None,
                 nodes: int | None = None, ppn: int | None = None, name: str | None = None) -> xr.Dataset:
    """The files (all of `suite`: "osu" or "imb") as one library row on one placement; files of one
    benchmark are its launches, in the order given. `kernel` (OSU only) relabels the rows; nodes
    and ppn default to what the placement's name says (1N2P)."""
    nodes, ppn = placement_shape(placement, nodes, ppn)
    paths = [Path(p) for p in paths]
    if suite == "osu":
        measurements = [read_osu(path, kernel) for path in paths]
        suite_name = "OSU Micro-Benchmarks"
    elif suite == "imb":
        if kernel is not None:
            raise ValueError("--kernel is for OSU files (one benchmark each); an IMB file's benchmarks map to "
                             "their kernels by name")
        measurements = [m for path in paths for m in read_imb(path, nodes * ppn)]
        suite_name = "Intel MPI Benchmarks"
    else:
        raise ValueError(f"unknown suite {suite!r}; allowed values: osu, imb")
    return to_dataset(measurements, library, placement, nodes, ppn, name or f"{library}-{placement}", suite_name)


def write(ds: xr.Dataset, output) -> Path:
    """The imported dataset as netCDF at `output` (its folder made), as collect writes a campaign's."""
    from ..collect import write_dataset

    path = Path(output)
    if path.suffix != ".nc":
        raise ValueError(f"--output {output}: give a .nc file (the dataset)")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_dataset(ds, path, keep_previous=False)
    return path


def describe(ds: xr.Dataset) -> list[str]:
    """What an import made, a line each: the row, its kernels with their launches and sizes, and
    what the files held that was not imported."""
    import json

    library, placement = str(ds["library"].values[0]), str(ds["placement"].values[0])
    lines = [f"library row {library} (imported), placement {placement}: {ds.attrs['source']}"]
    counts = ds["sample_count"].isel(library=0, placement=0)
    for kernel in ds["kernel"].values:
        measured = counts.sel(kernel=kernel)
        launches = int((measured > 0).any("size").sum())
        sizes = ds["size"].values[(measured > 0).any("launch").values]
        lines.append(f"  {kernel}: {launches} launch{'es' if launches != 1 else ''}, {len(sizes)} sizes "
                     f"({sizes.min()} to {sizes.max()} B)")
    left_out = {(Path(record["file"]).name, what) for record in json.loads(ds.attrs["imported_files"])
                for what in record.get("not_imported", [])}
    lines += [f"  not imported from {name}: {what}" for name, what in sorted(left_out)]
    return lines
