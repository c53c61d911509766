"""commlens: reproducible MPI communication benchmarks whose results land in xarray.

The package imports nothing heavy by itself: every launch of a campaign starts a Python that
imports `commlens.launch`, and xarray alone would add most of a second to each. `open_campaign`
(commlens.data.opening) and the `ds.commlens` accessor (commlens.analysis.accessor) are imported
on first use; `commlens.open_campaign` registers the accessor before it opens a dataset.
"""

# The one place the version is written: pyproject.toml reads it from here (a dynamic version).
__version__ = "0.2.0"

__all__ = ["open_campaign", "CommlensAccessor", "DatasetError", "__version__"]


def __getattr__(name: str):
    if name == "DatasetError":     # what open_campaign raises for a file it cannot read; no xarray needed
        from commlens.io.dataset_errors import DatasetError

        return DatasetError
    if name in ("open_campaign", "CommlensAccessor"):
        from commlens.analysis import accessor
        from commlens.data import opening

        return accessor.CommlensAccessor if name == "CommlensAccessor" else opening.open_campaign
    raise AttributeError(f"module 'commlens' has no attribute {name!r}")
