"""commbench: reproducible MPI communication benchmarks whose results land in xarray.

The package imports nothing heavy by itself: every launch of a campaign starts a Python that
imports `commbench.launch`, and xarray alone would add most of a second to each. `open_campaign`
(commbench.data.opening) and the `ds.commbench` accessor (commbench.analysis.accessor) are imported
on first use; `commbench.open_campaign` registers the accessor before it opens a dataset.
"""

# The one place the version is written: pyproject.toml reads it from here (a dynamic version).
__version__ = "0.1.0"

__all__ = ["open_campaign", "CommbenchAccessor", "DatasetError", "__version__"]


def __getattr__(name: str):
    if name == "DatasetError":     # what open_campaign raises for a file it cannot read; no xarray needed
        from commbench.io.dataset_errors import DatasetError

        return DatasetError
    if name in ("open_campaign", "CommbenchAccessor"):
        from commbench.analysis import accessor
        from commbench.data import opening

        return accessor.CommbenchAccessor if name == "CommbenchAccessor" else opening.open_campaign
    raise AttributeError(f"module 'commbench' has no attribute {name!r}")
