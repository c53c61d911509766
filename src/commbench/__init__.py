"""commbench: reproducible MPI communication benchmarks whose results land in xarray."""

__version__ = "0.1.0"

from .dataset import CommbenchAccessor, open_campaign  # noqa: E402  (registers ds.commbench)

__all__ = ["open_campaign", "CommbenchAccessor", "__version__"]
