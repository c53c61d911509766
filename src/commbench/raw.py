"""Reading raw launch files (JSON Lines): a launch record, then run, point... and end records.

A file is accepted whole or refused whole: one that lacks its end record, has a
malformed line, an unknown schema version or impossible values raises
RawFileError naming the file and line. A launch that failed is a complete file
too: its launch record says so and it carries no measurements.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

KNOWN_SCHEMAS = {1}


class RawFileError(ValueError):
    """A raw file that must not enter a dataset."""

    def __init__(self, path, line: int | None, message: str):
        self.path, self.line = str(path), line
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {message}")


@dataclass
class Point:
    size: int
    samples: list[float]
    iters_per_sample: int
    settled: bool
    rse: float
    errors: int | None
    subtracted_s: float = math.nan   # an overhead the kernel subtracted from every sample


@dataclass
class LaunchResult:
    path: str
    launch: dict
    run: dict | None = None
    points: list[Point] = field(default_factory=list)
    end: dict | None = None

    @property
    def status(self) -> str:
        return self.launch["status"]


def _check_schema(record: dict, path, number: int) -> None:
    if record.get("schema") not in KNOWN_SCHEMAS:
        raise RawFileError(path, number, f"unknown schema version {record.get('schema')!r} "
                                         f"(known: {', '.join(map(str, sorted(KNOWN_SCHEMAS)))})")


def _point(record: dict, path, number: int) -> Point:
    try:
        size = record["size"]
        samples = record["samples"]
        iters = record["iters_per_sample"]
    except KeyError as missing:
        raise RawFileError(path, number, f"point record lacks {missing}") from None
    if not isinstance(size, int) or size < 0:
        raise RawFileError(path, number, f"size must be a non-negative integer, got {size!r}")
    if not isinstance(samples, list) or not samples:
        raise RawFileError(path, number, "point record has no samples")
    for value in samples:
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0:
            raise RawFileError(path, number, f"sample {value!r} at size {size} is not a finite positive time")
    if not isinstance(iters, int) or iters < 1:
        raise RawFileError(path, number, f"iters_per_sample must be a positive integer, got {iters!r}")
    rse = record.get("rse")
    return Point(size=size, samples=[float(v) for v in samples], iters_per_sample=iters,
                 settled=bool(record.get("settled")),
                 rse=float(rse) if isinstance(rse, (int, float)) and rse >= 0 else math.nan,
                 errors=record.get("errors"),
                 subtracted_s=float(record.get("subtracted_s", math.nan)))


def read_raw(path) -> LaunchResult:
    """Parses and checks one raw file; raises RawFileError if any of it cannot be trusted."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise RawFileError(path, None, f"cannot read: {exc.strerror}") from None
    lines = text.splitlines()
    if not lines:
        raise RawFileError(path, None, "empty file")
    result = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RawFileError(path, number, f"malformed JSON ({exc.msg})") from None
        kind = record.get("record") if isinstance(record, dict) else None
        if result is None:
            if kind != "launch":
                raise RawFileError(path, number, "the first record must be the launch record")
            _check_schema(record, path, number)
            result = LaunchResult(path=str(path), launch=record)
            continue
        if result.end is not None:
            raise RawFileError(path, number, "records after the end record")
        if kind == "run":
            _check_schema(record, path, number)
            result.run = record
        elif kind == "point":
            if result.run is None:
                raise RawFileError(path, number, "point record before the run record")
            result.points.append(_point(record, path, number))
        elif kind == "end":
            result.end = record
        else:
            raise RawFileError(path, number, f"unknown record type {kind!r}")
    if result.status == "ok":
        if result.end is None:
            raise RawFileError(path, len(lines), "incomplete: no end record (the launch was cut short); "
                                                 "this file is not merged")
        if result.end.get("status") != "ok":
            raise RawFileError(path, len(lines), f"end record status is {result.end.get('status')!r}")
        if result.end.get("points") != len(result.points):
            raise RawFileError(path, len(lines), f"end record counts {result.end.get('points')} points, "
                                                 f"the file has {len(result.points)}")
    elif result.run is not None or result.points:
        raise RawFileError(path, None, f"a {result.status} launch must carry no measurements")
    return result
