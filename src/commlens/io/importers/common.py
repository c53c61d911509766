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

Every number is checked as its row is read (ALLOWED: finite; a time above 0, a size a whole number
of bytes...), and a file is read a line at a time (InputFile), refused from its size above
MAX_FILE_BYTES: what an import holds does not grow with the file.

commlens.data.imported makes them a dataset in the campaign schema.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Iterator

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


# A real OSU, IMB or NetPIPE output is a few hundred KB at most: a larger file is not one, and is
# refused from its size before any of it is read.
MAX_FILE_BYTES = 64 * 2**20
# Files are read a line at a time, so that memory holds one line: a line longer than this is no
# benchmark's output (and would be held whole).
MAX_LINE_BYTES = 2**20
# A run prints a few hundred sizes at most; the rows a file may keep bound what an import holds
# whatever the file (millions of rows of numbers are no run's output).
MAX_ROWS = 10_000

# A number as the suites print them (C's printf: 12, 0.40, 1.5e+03, and inf or nan when a run goes wrong).
NUMBER = r"(?:[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?i:inf(?:inity)?|nan))"
_NUMBER = re.compile(NUMBER)
# What each kind of column may hold: (test of its text and value, what is allowed, as the error
# says it). A printed rate of 0 is one below the file's precision (IMB prints 0.00 MB/s at 1 B); a
# time of 0 or less, a size that is no whole number of bytes, a count of no iterations measure nothing.
WHOLE = re.compile(r"[0-9]+")
AT_LEAST_0 = (lambda text, v: math.copysign(1.0, v) > 0, "a finite number, 0 or more")      # -0.00 is no rate
ALLOWED = {
    "size": (lambda text, v: WHOLE.fullmatch(text) and v < 2**63, "a whole number of bytes, 0 or more"),
    "count": (lambda text, v: WHOLE.fullmatch(text) and 1 <= v < 2**63, "a whole number above 0"),
    "time": (lambda text, v: v > 0, "a finite number above 0"),
    "rate": AT_LEAST_0,
    "amount": AT_LEAST_0,                   # a number printed that is no measurement (NetPIPE's console sizes)
    "check": (None, "Pass or Fail"),
}
CHECK = {"Pass": 0.0, "Fail": 1.0}          # OSU's -c Validation column, as `errors`


def column_kind(reported: str) -> str:
    """What a `reported` column's numbers are: "time" (seconds) or "rate"."""
    return "time" if reported_meaning(reported)[0] == "s" else "rate"


def is_number(text: str) -> bool:
    """Whether `text` is a number as the suites print them: what starts a row of a table."""
    return _NUMBER.fullmatch(text) is not None


def starts_row(text: str) -> bool:
    """Whether a (stripped) line is a row of numbers: its first field is one."""
    return bool(text) and is_number(text.split(None, 1)[0])


class InputFile:
    """A file to import, read a line at a time: refused from its size when over MAX_FILE_BYTES,
    its rows' numbers checked, and its provenance (size, sha256) taken as it is read."""

    def __init__(self, path):
        self.path = Path(path)
        try:
            size = self.path.stat().st_size
        except OSError as error:
            raise ImportFileError(self.path, f"cannot be read: {error.strerror or error}") from None
        if size > MAX_FILE_BYTES:
            raise ImportFileError(self.path, f"{size} bytes ({size / 2**20:.1f} MiB), over the limit of "
                                             f"{MAX_FILE_BYTES} bytes ({MAX_FILE_BYTES // 2**20} MiB) for one "
                                             f"file: an OSU, IMB or NetPIPE output is a few hundred KB")
        self._sha256, self._bytes, self._read_whole, self.rows = hashlib.sha256(), 0, False, 0

    def lines(self) -> Iterator[tuple[int, str]]:
        """(line number, text without its line end), one at a time."""
        try:
            with self.path.open("rb") as stream:
                number = 0
                while raw := stream.readline(MAX_LINE_BYTES + 1):
                    number += 1
                    self._bytes += len(raw)
                    self._sha256.update(raw)
                    if len(raw) > MAX_LINE_BYTES:
                        raise ImportFileError(self.path, f"a line longer than {MAX_LINE_BYTES} bytes: no benchmark "
                                                         f"prints one", number)
                    if self._bytes > MAX_FILE_BYTES:       # grown since its size was taken
                        raise ImportFileError(self.path, f"over the limit of {MAX_FILE_BYTES} bytes for one file "
                                                         f"(it grew while read)", number)
                    yield number, raw.decode("utf-8", "replace").rstrip("\r\n")
        except OSError as error:
            raise ImportFileError(self.path, f"cannot be read: {error.strerror or error}") from None
        self._read_whole = True

    def values(self, number: int, fields: list[str], columns: list[tuple[str, str]]) -> list[float]:
        """A row's numbers, each checked against its column's kind: `columns` is (the name the file
        gives it, kind) a field; a value its kind does not allow is refused with its line."""
        self.rows += 1
        if self.rows > MAX_ROWS:
            raise ImportFileError(self.path, f"more than {MAX_ROWS} rows of numbers: no OSU, IMB or NetPIPE run "
                                             f"prints that many sizes", number)
        return [checked_value(self.path, number, text, name, kind)
                for text, (name, kind) in zip(fields, columns, strict=True)]

    def provenance(self) -> dict:
        """What identifies the file: its absolute path, size and sha256 (once read to its end)."""
        assert self._read_whole, "the provenance of a file is known once it has been read to its end"
        return {"file": str(self.path.resolve()), "bytes": self._bytes, "sha256": self._sha256.hexdigest()}


def checked_value(path: Path, number: int, text: str, name: str, kind: str) -> float:
    """The number `text` of column `name` at line `number`, if its kind (ALLOWED) allows it."""
    test, allowed = ALLOWED[kind]
    if kind == "check" and text in CHECK:
        return CHECK[text]
    if test is not None and is_number(text):
        value = float(text)
        if math.isfinite(value) and test(text, value):
            return value
        if kind == "time" and value == 0:       # printed 0 where the rest say > 0: worth saying why
            allowed += ": no operation takes no time (a 0 is a broken timer, or a time below the precision printed)"
    raise ImportFileError(path, f"{name} {text}: must be {allowed}", number)


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
