"""What every importer produces from a file: Measurements, as the file states them.

An imported point holds what its file says and nothing more:

- one sample: the file's time per operation (OSU's average over its timed loop, or the time
  derived from its MB/s; IMB's t or t_max), so `sample_count` is 1 and `mean`, `median`, `min`
  and `iqm` are that value. The single operations' times are not in these files: none is made up.
- the spread statistics (`std`, `quantiles`, `median_ci`) are NaN: one loop's average says
  nothing of how single operations spread.
- where the file reports percentiles of single operations (OSU's `-z`: P50, P90, P99), they are
  the point's `quantiles` at 0.5, 0.9 and 0.99 and the P50 is its `median`; `min` and `iqm` are
  then NaN (the average is neither).
- `iters_per_sample` is the iteration count where the file prints one (IMB's #repetitions),
  else 0: not recorded.

commbench.data.imported makes them a dataset in the campaign schema.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from commbench.campaign import kernel_of, shape_from_placement_name


US = 1e-6
MB = 1e6
class ImportFileError(ValueError):
    """A file that cannot be imported; the message names the file (and line) and what is allowed."""

    def __init__(self, path, message: str, line: int | None = None):
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {message}")


@dataclass
class Measurement:
    """One benchmark's table from one file: a launch of `kernel` in the dataset."""

    path: Path
    benchmark: str                 # as its suite names it: osu_latency, IMB-MPI1 PingPong
    kernel: str                    # the commbench kernel that measures the same thing
    metric: str                    # what one value means, and how it was derived from the file
    sizes: np.ndarray              # bytes
    time_s: np.ndarray | None      # seconds per operation (the point's one sample); None: see bandwidth_Bps
    percentiles: dict[float, np.ndarray] = field(default_factory=dict)   # quantile -> seconds
    iterations: np.ndarray | None = None     # per size, where the file prints them
    errors: np.ndarray | None = None         # per size, where the file checked the data
    nprocs: int | None = None                # ranks the file says it ran on (None: it does not say)
    window: int | None = None                # messages per window (windowed kernels)
    provenance: dict = field(default_factory=dict)
    # A bandwidth table's rate (B/s) as the file prints it; its time per operation is derived with the
    # kernel's bytes factor when the dataset is made (commbench.data.imported).
    bandwidth_Bps: np.ndarray | None = None


def file_provenance(path: Path) -> dict:
    """What identifies an input file: its absolute path, size and sha256."""
    data = Path(path).read_bytes()
    return {"file": str(Path(path).resolve()), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def check_kernel(path, benchmark: str, measured_as: str, requested: str | None) -> str:
    """The kernel label a file's rows get: the benchmark's kernel, or `requested` if it is that
    kernel (optionally with an @label, to keep it apart from a campaign's entry)."""
    if requested is None:
        return measured_as
    if kernel_of(requested) != measured_as:
        raise ImportFileError(path, f"{benchmark} measures what {measured_as} does; --kernel {requested} does not "
                                    f"match (allowed: {measured_as}, or {measured_as}@LABEL)")
    return requested


def placement_shape(placement: str, nodes: int | None, ppn: int | None) -> tuple[int, int]:
    """(nodes, ppn) of a placement: given, or read from a name such as 1N2P or 2N1P-1g."""
    if nodes is not None and ppn is not None:
        return nodes, ppn
    shape = shape_from_placement_name(placement)
    if shape is None:
        raise ValueError(f"--placement {placement}: give --nodes and --ppn, or a name that says them "
                         f"(<nodes>N<ppn>P, e.g. 1N2P or 2N1P-ib)")
    return shape
