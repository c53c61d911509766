"""Reading raw launch files (JSON Lines): a launch record, then run, point... and end records.

Two records say what the library and the machine were, where a launch recorded them: "topology" after
the launch record (the launcher's: each host's hwloc topology, compressed; commlens.launch.topology) and
"mpi_t" after the run record (the kernel's: every control variable's value as the library ran with it, and
those it could not read; kernels/harness/mpit.c). Files written before either have neither.

A file is accepted whole or refused whole: one that lacks its end record, has a
malformed line, an unknown schema version or impossible values raises
RawFileError naming the file and line. A launch that failed is a complete file
too: its launch record says so and it carries no measurements.

A file is written whole or not at all (commlens.io.raw_writing: beside its place, then renamed), and the
kernel's output goes into it only when it ends in an ok end record: partial
output is never merged. The kernel's output becomes the raw file by a rename, its
launch record put in front of it in place, so that writing it never needs a
second copy of the output: on a nearly full disk, a copy is what would lose a
launch that had finished.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
# numpy is imported where samples are parsed, not here: every launch job of a campaign imports this module
# (for its constants and its check of the kernel's output), and numpy was 0.11 s of each one's start.


RAW_SCHEMA = 1                 # the version of the records this package writes
KNOWN_SCHEMAS = {RAW_SCHEMA}   # the versions it reads


class RawFileError(ValueError):
    """A raw file that must not enter a dataset."""

    def __init__(self, path, line: int | None, message: str):
        self.path, self.line = str(path), line
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {message}")


@dataclass
class Point:
    size: int
    samples: np.ndarray          # seconds, float64
    iters_per_sample: int
    settled: bool
    rse: float
    errors: int | None
    subtracted_s: float = math.nan   # what the kernel timed beside its (raw) samples, to be subtracted
    exit_skew_s: np.ndarray | None = None   # per sample, how far apart the ranks finished (window timing)
    # Samples the harness took and left out: too short after a slowed calibration, the size started again
    # (None: not recorded, another suite's results)
    short_samples_dropped: int | None = 0
    # (samples, ranks, ranks): per sample, seconds per message from each source rank to each destination
    # (NaN: not timed, a rank and itself); None unless the kernel times pairs (allpairs)
    pair_times_s: np.ndarray | None = None


@dataclass
class LaunchResult:
    path: str
    launch: dict
    run: dict | None = None
    points: list[Point] = field(default_factory=list)
    end: dict | None = None
    # {"status": "ok", "cvars": {name: value}, "unreadable": {name: why}, ...} or {"status": "unsupported",
    # "reason": ...}: the library's control variables as this launch's rank 0 read them (None: not recorded)
    mpi_t: dict | None = None
    # {"status": "ok", "machines": [{"hosts": [...], "xml_gz_base64": ..., ...}]} or {"status": ..., "reason":
    # ...}: the hwloc topology of the hosts the launch ran on (None: not recorded)
    topology: dict | None = None

    @property
    def status(self) -> str:
        return self.launch["status"]


# ok, or why a launch gave no data: it failed or timed out, or it never ran because its library's
# environment or build failed or the library cannot do it (unsupported).
# Statuses of a launch that never started, the reason being its library's (environment, build) or
# that it cannot do the kernel or placement.
NOT_RUN = ("env_failed", "build_failed", "unsupported")
LAUNCH_STATUSES = {"ok", "failed", "timeout", *NOT_RUN}


def _check_schema(record: dict, path, number: int) -> None:
    schema = record.get("schema")
    if not _is_int(schema) or schema not in KNOWN_SCHEMAS:
        raise RawFileError(path, number, f"unknown schema version {schema!r} "
                                         f"(known: {', '.join(map(str, sorted(KNOWN_SCHEMAS)))})")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _finite(value) -> float | None:
    """The value as a float if it is a finite JSON number, else None (bools and huge ints too)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def _require(record: dict, key: str, ok, expected: str, path, number: int):
    if key not in record:
        raise RawFileError(path, number, f"{record.get('record')} record lacks {key!r}")
    if not ok(record[key]):
        raise RawFileError(path, number, f"{key} must be {expected}, got {record[key]!r}")
    return record[key]


def _check_launch(record: dict, path, number: int) -> None:
    _check_schema(record, path, number)
    status = record.get("status")
    if not isinstance(status, str) or status not in LAUNCH_STATUSES:
        raise RawFileError(path, number, f"launch status {status!r} is not one of "
                                         f"{', '.join(sorted(LAUNCH_STATUSES))}")
    for key in ("library", "placement", "kernel"):
        _require(record, key, lambda v: isinstance(v, str) and v, "a non-empty string", path, number)
    _require(record, "launch", lambda v: _is_int(v) and v >= 0, "a non-negative integer", path, number)


def _check_run(record: dict, path, number: int) -> None:
    _check_schema(record, path, number)
    _require(record, "library_version", lambda v: isinstance(v, str), "a string", path, number)
    _require(record, "hosts", lambda v: isinstance(v, list) and all(isinstance(h, str) for h in v),
             "a list of host names", path, number)
    for key in ("timer_resolution_s", "harness_overhead_s"):
        _require(record, key, lambda v: (x := _finite(v)) is not None and x >= 0,
                 "a finite non-negative number of seconds", path, number)
    if not isinstance(record.get("cpu_binding", []), list) or not all(
            isinstance(c, str) for c in record.get("cpu_binding", [])):
        raise RawFileError(path, number, f"cpu_binding must be a list of strings, got {record['cpu_binding']!r}")
    if not isinstance(record.get("kernel_info", {}), dict):
        raise RawFileError(path, number, f"kernel_info must be an object, got {record['kernel_info']!r}")
    if not isinstance(record.get("metric", ""), str):
        raise RawFileError(path, number, f"metric must be a string, got {record['metric']!r}")


def _check_mpi_t(record: dict, path, number: int) -> None:
    status = _require(record, "status", lambda v: isinstance(v, str) and v, "a non-empty string", path, number)
    if status != "ok":
        return
    _require(record, "cvars", lambda v: isinstance(v, dict), "an object of control variables", path, number)
    _require(record, "unreadable", lambda v: isinstance(v, dict) and all(isinstance(w, str) for w in v.values()),
             "an object of control variables and why each could not be read", path, number)


def _check_topology(record: dict, path, number: int) -> None:
    status = _require(record, "status", lambda v: isinstance(v, str) and v, "a non-empty string", path, number)
    if status != "ok":
        return
    _require(record, "machines", lambda v: isinstance(v, list) and v and all(
        isinstance(m, dict) and isinstance(m.get("hosts"), list) and isinstance(m.get("xml_gz_base64"), str)
        for m in v), "a list of machines, each with its hosts and xml_gz_base64", path, number)


def _point(record: dict, path, number: int) -> Point:
    for key in ("size", "samples", "iters_per_sample"):
        if key not in record:
            raise RawFileError(path, number, f"point record lacks {key!r}")
    size, samples, iters = record["size"], record["samples"], record["iters_per_sample"]
    if not _is_int(size) or size < 0:
        raise RawFileError(path, number, f"size must be a non-negative integer, got {size!r}")
    if not isinstance(samples, list) or not samples:
        raise RawFileError(path, number, "point record has no samples")
    times = _sample_times(samples)
    if times is None:
        bad = next(value for value in samples if (time := _finite(value)) is None or time <= 0)
        raise RawFileError(path, number, f"sample {bad!r} at size {size} is not a finite positive time")
    if not _is_int(iters) or iters < 1:
        raise RawFileError(path, number, f"iters_per_sample must be a positive integer, got {iters!r}")
    settled = record.get("settled", False)
    if not isinstance(settled, bool):
        raise RawFileError(path, number, f"settled must be true or false, got {settled!r}")
    rse = record.get("rse")
    if rse is not None and _finite(rse) is None:
        raise RawFileError(path, number, f"rse must be a finite number or null, got {rse!r}")
    errors = record.get("errors")
    if errors is not None and (not _is_int(errors) or errors < 0):
        raise RawFileError(path, number, f"errors must be a non-negative integer or null, got {errors!r}")
    subtracted = record.get("subtracted_s")
    if subtracted is not None and _finite(subtracted) is None:
        raise RawFileError(path, number, f"subtracted_s must be a finite number or null, got {subtracted!r}")
    dropped = record.get("short_samples_dropped", 0)
    if not _is_int(dropped) or dropped < 0:
        raise RawFileError(path, number, f"short_samples_dropped must be a non-negative integer, got {dropped!r}")
    n = len(times)
    skews = _per_sample(record, "exit_skew_s", _exit_skews, n, path, number,
                        f"a list of {n} finite non-negative numbers of seconds, one per sample")
    pairs = _per_sample(record, "pair_times_s", _pair_times, n, path, number,
                        f"{n} lists (one per sample) of ranks x ranks numbers of seconds, each positive or null")
    return Point(size=size, samples=times, iters_per_sample=iters, settled=settled,
                 # The kernel writes -1 where the error is undefined (a single sample).
                 rse=math.nan if rse is None or rse < 0 else float(rse), errors=errors,
                 subtracted_s=math.nan if subtracted is None else float(subtracted), exit_skew_s=skews,
                 short_samples_dropped=dropped, pair_times_s=pairs)


def _per_sample(record: dict, key: str, parse, samples: int, path, number: int, expected: str):
    """A point's optional per-sample field `key` parsed by `parse` (None where absent); RawFileError
    saying what it must be where `parse` refuses it."""
    value = record.get(key)
    if value is None:
        return None
    parsed = parse(value, samples)
    if parsed is None:
        raise RawFileError(path, number, f"{key} at size {record['size']} must be {expected}")
    return parsed


def _pair_times(pairs, samples: int) -> np.ndarray | None:
    """A point's pair times as (samples, ranks, ranks) float64 seconds, NaN for null; None unless one
    square matrix per sample, every time positive and finite or null."""
    if not isinstance(pairs, list) or len(pairs) != samples or not all(isinstance(m, list) for m in pairs):
        return None
    cells = {len(matrix) for matrix in pairs}
    ranks = math.isqrt(cells.pop()) if len(cells) == 1 else 0
    if ranks < 2 or ranks * ranks != len(pairs[0]):
        return None
    flat = [value for matrix in pairs for value in matrix]
    if not set(map(type, flat)) <= {float, int, type(None)}:
        return None
    import numpy as np

    values = np.array([np.nan if value is None else value for value in flat], dtype=np.float64)
    timed = values[np.isfinite(values)]
    if np.isinf(values).any() or (timed <= 0).any():
        return None
    return values.reshape(samples, ranks, ranks)


def _exit_skews(skews, samples: int) -> np.ndarray | None:
    """A point's exit skews as float64 seconds, or None unless one finite non-negative number per sample."""
    values = _finite_numbers(skews) if isinstance(skews, list) and len(skews) == samples else None
    return values if values is not None and (values >= 0).all() else None


def _sample_times(samples: list) -> np.ndarray | None:
    """The samples as float64 seconds, or None when any is not a finite positive JSON number."""
    times = _finite_numbers(samples)
    return times if times is not None and (times > 0).all() else None


def _finite_numbers(values: list) -> np.ndarray | None:
    """A list of JSON numbers as float64, or None when any is not a finite number. Vectorised: a campaign
    holds hundreds of millions of samples."""
    if not set(map(type, values)) <= {float, int}:       # bools, strings, null, lists...
        return None
    import numpy as np

    try:
        numbers = np.asarray(values, dtype=np.float64)
    except OverflowError:                                # an integer too large for a double
        return None
    return numbers if np.isfinite(numbers).all() else None


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _parse(line: bytes, path, number: int):
    try:
        return json.loads(line.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise RawFileError(path, number, "not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise RawFileError(path, number, f"malformed JSON ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:
        raise RawFileError(path, number, f"malformed JSON ({exc})") from None


def read_raw(path) -> LaunchResult:
    """Parses and checks one raw file; raises RawFileError if any of it cannot be trusted."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RawFileError(path, None, f"cannot read: {exc.strerror}") from None
    if not data.strip():
        raise RawFileError(path, None, "empty file")
    lines = data.split(b"\n")
    if lines[-1]:
        # Every record is written with its newline: a last line without one was cut short.
        raise RawFileError(path, len(lines), "incomplete: the last line has no newline (the file was cut "
                                             "short); this file is not merged")
    lines.pop()
    result = None
    seen_sizes = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        record = _parse(line, path, number)
        kind = record.get("record") if isinstance(record, dict) else None
        if result is None:
            if kind != "launch":
                raise RawFileError(path, number, "the first record must be the launch record")
            _check_launch(record, path, number)
            result = LaunchResult(path=str(path), launch=record)
            continue
        if result.end is not None:
            raise RawFileError(path, number, "records after the end record")
        if kind == "launch":
            raise RawFileError(path, number, "a second launch record")
        if kind == "run":
            if result.run is not None:
                raise RawFileError(path, number, "a second run record")
            _check_run(record, path, number)
            result.run = record
        elif kind == "point":
            if result.run is None:
                raise RawFileError(path, number, "point record before the run record")
            point = _point(record, path, number)
            if point.size in seen_sizes:
                raise RawFileError(path, number, f"size {point.size} measured twice in one launch")
            seen_sizes.add(point.size)
            result.points.append(point)
        elif kind == "end":
            result.end = record
        elif kind == "mpi_t":
            if result.run is None or result.points or result.mpi_t is not None:
                raise RawFileError(path, number, "an mpi_t record must follow the run record, once, before the points")
            _check_mpi_t(record, path, number)
            result.mpi_t = record
        elif kind == "topology":
            if result.run is not None or result.topology is not None:
                raise RawFileError(path, number, "a topology record must follow the launch record, once")
            _check_topology(record, path, number)
            result.topology = record
        else:
            raise RawFileError(path, number, f"unknown record type {kind!r}")
    if result is None:
        raise RawFileError(path, None, "empty file")
    if result.status == "ok":
        if result.run is None or result.end is None:
            raise RawFileError(path, len(lines), "incomplete: no end record (the launch was cut short); "
                                                 "this file is not merged")
        if result.end.get("status") != "ok":
            raise RawFileError(path, len(lines), f"end record status is {result.end.get('status')!r}")
        points = result.end.get("points")
        if not _is_int(points) or points != len(result.points):
            raise RawFileError(path, len(lines), f"end record counts {points!r} points, "
                                                 f"the file has {len(result.points)}")
    elif result.run is not None or result.points or result.end is not None or result.mpi_t is not None:
        raise RawFileError(path, None, f"a {result.status} launch must carry no measurements")
    return result


def read_launch_record(path) -> dict | None:
    """A raw file's first record, its launch record, as written (unchecked), or None when the file
    or its first line cannot be read: what ran and how, without reading the measurements."""
    try:
        with open(path) as raw:
            record = json.loads(raw.readline())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def read_complete_output(path: Path) -> tuple[list[str], str | None]:
    """The kernel's lines, and why they cannot be used (None when they end in an ok end record)."""
    if not path.exists():
        return [], "the kernel wrote no output"
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    if not lines:
        return [], "the kernel's output is empty"
    try:
        last = json.loads(lines[-1])
    except json.JSONDecodeError:
        return lines, "the kernel's output ends in an incomplete line"
    if last.get("record") != "end" or last.get("status") != "ok":
        return lines, "the kernel's output has no ok end record"
    return lines, None
