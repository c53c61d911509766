"""commbench: reproducible MPI communication benchmarks whose results land in xarray.

The package imports nothing heavy by itself: every launch of a campaign starts a Python
that imports `commbench.launcher`, and xarray alone would add most of a second to each.
`open_campaign` and the accessor come from `commbench.dataset`, imported on first use;
importing it (or calling `commbench.open_campaign`) registers `ds.commbench`.
"""

# The one place the version is written: pyproject.toml reads it from here (a dynamic version).
__version__ = "0.1.0"

__all__ = ["open_campaign", "CommbenchAccessor", "__version__"]


def __getattr__(name: str):
    if name in ("open_campaign", "CommbenchAccessor"):
        from . import dataset

        return getattr(dataset, name)
    raise AttributeError(f"module 'commbench' has no attribute {name!r}")
