"""What every importer produces from a file: Measurements, as the file states them.

An imported point holds what its file says and nothing more:

- one sample: the number the suite gives as its result (OSU's average over its timed loop, or the
  time derived from its MB/s; IMB's t or t_max; NetPIPE's average time), so `sample_count` is 1 and
  `mean` and `median` are that value. The single operations' times are not in these files: none is
  made up, so `min` and `iqm` (statistics of single samples) are NaN.
- the spread statistics (`std`, `quantiles`, `median_ci`) are NaN: one loop's average says nothing
  of how single operations spread.
- where the file reports percentiles of single operations' times (OSU's `-z`: P50, P90, P99), they
  are the point's `quantiles` and the P50 is its `median`.
- every number the file prints for a point is kept in its own column of `reported` (REPORTED:
  IMB's t_min, t_avg and t_max, OSU's Avg/Min/Max and percentiles, bandwidths, message rates), in
  SI units.
- `iters_per_sample` is the iteration count where the file prints one (IMB's #repetitions, OSU's
  -f Iterations, NetPIPE's repeats), else 0: not recorded.

commlens.data.imported makes them a dataset in the campaign schema.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from commlens.campaign import shape_from_placement_name

US = 1e-6
MB = 1e6

# Every column a file can give a point, by the name it has in the dataset's `reported`:
# (units, what it is). One place for these names: the suites' readers map their headers onto them.
REPORTED = {
    "avg_latency_s": ("s", "OSU's Avg Latency (Latency before 7.0): mean time per operation over its timed loop "
                           "(collectives: each rank's mean, averaged over the ranks)"),
    "min_latency_s": ("s", "OSU's Min Latency (-f): the smallest of the ranks' mean times"),
    "max_latency_s": ("s", "OSU's Max Latency (-f): the largest of the ranks' mean times"),
    "bandwidth_Bps": ("B/s", "the file's bandwidth column (MB/s = 1e6 B/s), in B/s"),
    "message_rate_per_s": ("1/s", "the file's message rate column (OSU's Messages/s)"),
    "t_s": ("s", "IMB's t[usec]: mean time per iteration"),
    "t_min_s": ("s", "IMB's t_min[usec]: the smallest of the ranks' mean times"),
    "t_max_s": ("s", "IMB's t_max[usec]: the largest of the ranks' mean times"),
    "t_avg_s": ("s", "IMB's t_avg[usec]: the ranks' mean times averaged"),
    "time_s": ("s", "NetPIPE's time: one-way time per message, averaged over its trials"),
    "throughput_avg_Bps": ("B/s", "NetPIPE's average throughput (from the average time), in B/s"),
    "throughput_min_Bps": ("B/s", "NetPIPE's smallest throughput (from the longest trial), in B/s"),
    "throughput_max_Bps": ("B/s", "NetPIPE's largest throughput (from the shortest trial), in B/s"),
    "console_time_s": ("s", "NetPIPE's console time (the same average, printed to four digits in its unit)"),
    "console_throughput_Bps": ("B/s", "NetPIPE's console rate (its average throughput, four digits), in B/s"),
}


def percentile_column(p: int, of: str) -> str:
    """The `reported` name of OSU's -z percentile P<p> of latency (of="latency") or bandwidth."""
    return f"p{p}_{of}_s" if of == "latency" else f"p{p}_{of}_Bps"


def reported_meaning(name: str) -> tuple[str, str]:
    """(units, meaning) of a `reported` column."""
    if name in REPORTED:
        return REPORTED[name]
    p, of = name[1:].split("_", 2)[:2]
    if of == "latency":
        return "s", f"OSU's P{p} Tail Lat (-z): the {p}th percentile of the single iterations' times"
    return "B/s", f"OSU's P{p} Tail BW (-z): the {p}th percentile of the single windows' bandwidths, in B/s"


class ImportFileError(ValueError):
    """A file that cannot be imported; the message names the file (and line) and what is allowed."""

    def __init__(self, path, message: str, line: int | None = None):
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {message}")
        self.path, self.reason = path, message


@dataclass
class Measurement:
    """One benchmark's table from one file: a launch of `kernel` in the dataset."""

    path: Path
    suite: str                     # OSU Micro-Benchmarks, Intel MPI Benchmarks, NetPIPE
    benchmark: str                 # as its suite names it: osu_latency, IMB-MPI1 PingPong
    kernel: str                    # the commlens kernel that measures the same thing
    metric: str                    # what one value means as the suite measured it, and how that differs
    sizes: np.ndarray              # bytes
    reported: dict[str, np.ndarray]          # REPORTED name -> values per size, SI units (NaN: not printed)
    sample: str                    # the reported column that is the point's one sample (or gives it)
    percentiles: dict[float, np.ndarray] = field(default_factory=dict)   # quantile -> seconds
    iterations: np.ndarray | None = None     # per size, where the file prints them
    errors: np.ndarray | None = None         # per size, where the file checked the data
    nprocs: int | None = None                # ranks the file says it ran on (None: it does not say)
    options: dict = field(default_factory=dict)   # kernel options the file states (window, sync)
    # What the file states that decides whether two runs measured the same thing (benchmark,
    # options, datatype...): files of one kernel are launches of one row only where these agree.
    kind: dict = field(default_factory=dict)
    partial: str = ""              # why the file stops short of what it was to run ("" when whole)
    provenance: dict = field(default_factory=dict)
    label: str = ""                # the kernel's label in the dataset (set by commlens.io.importers.kinds)

    @property
    def time_s(self) -> np.ndarray | None:
        """The sample in seconds where the sample is a time; None for a rate (see data.imported)."""
        return self.reported[self.sample] if self.sample.endswith("_s") else None


def read_text_lines(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError as error:
        raise ImportFileError(path, f"cannot be read: {error.strerror or error}") from None


def file_provenance(path: Path) -> dict:
    """What identifies an input file: its absolute path, size and sha256."""
    data = Path(path).read_bytes()
    return {"file": str(Path(path).resolve()), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def doubling(low: int, high: int) -> list[int]:
    """low, 2 low, ... up to high; from 0, then 1 (as OSU's and IMB's size loops)."""
    sizes, size = [], low
    while size <= high:
        sizes.append(size)
        size = size * 2 if size else 1
    return sizes


def check_complete(path: Path, sizes, expected: list[int], what: str, partial: bool, hint: str = "") -> str:
    """'' when the file has every size of `expected` (what it says it was to run), else why not:
    raised as an error (with `hint`, another way out) unless `partial`, when it is returned to mark
    the import partial."""
    have = {int(s) for s in sizes}
    missing = [s for s in expected if s not in have]
    if not missing:
        return ""
    last = max(have) if have else None
    why = (f"truncated: {what} was to run {len(expected)} sizes, {expected[0]} to {expected[-1]} B; the file has "
           f"{len(expected) - len(missing)}" + (f" and stops at {last} B" if last is not None else "")
           + f" ({len(missing)} missing, from {missing[0]} B)")
    if not partial:
        raise ImportFileError(path, why + f"; give --partial to import what it has, marked partial{hint}")
    return why


def placement_shape(placement: str, nodes: int | None, ppn: int | None) -> tuple[int, int]:
    """(nodes, ppn) of a placement: given, or read from a name such as 1N2P or 2N1P-1g."""
    if nodes is not None and ppn is not None:
        return nodes, ppn
    shape = shape_from_placement_name(placement)
    if shape is None:
        raise ValueError(f"--placement {placement}: give --nodes and --ppn, or a name that says them "
                         f"(<nodes>N<ppn>P, e.g. 1N2P or 2N1P-ib)")
    return shape
