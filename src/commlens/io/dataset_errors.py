"""The error every unreadable dataset raises, importable without xarray (the command line catches it)."""


class DatasetError(ValueError):
    """A file that is not a readable commlens dataset; the message names the file and the problem in
    one line ("results/x/x.nc: not a commlens dataset (truncated HDF5 file: ...)")."""


class DatasetNotFoundError(DatasetError, FileNotFoundError):
    """No dataset where the path points, nor where a relative path is looked for (commlens.locations)."""
