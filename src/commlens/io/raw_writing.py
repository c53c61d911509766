"""Writing raw launch files: the launch record, and the file written whole or not at all, with room
held for its record while the kernel runs (commlens.io.raw reads them)."""

from __future__ import annotations

import errno
import json
import os
from datetime import datetime, UTC
from pathlib import Path

from commlens.io.atomic import WriteError, replacing, write_failure
from commlens.io.raw import RAW_SCHEMA


def launch_record(status: str, meta: dict, started=None, **details) -> dict:
    """A raw file's first record: the launch's `status`, what it was (`meta`: library, placement,
    kernel, launch...), when it started (now, where it never did) and `details` (command, environment,
    exit code, reason...). The one place a launch record is made, by campaigns and interactive runs."""
    when = started or datetime.now(UTC)
    return {"record": "launch", "schema": RAW_SCHEMA, "status": status, **meta,
            # Milliseconds: a round's short launches follow each other within a second.
            "started": when.isoformat(timespec="milliseconds"), **details}


def failure_reason(status: str, exit_code: int | None, problem: str | None, timeout_s: float) -> str:
    """Why a launch that ran gave no data, in the same words wherever it ran."""
    if status == "timeout":
        return f"killed after the {timeout_s:g} s timeout"
    if problem and not exit_code:
        return problem
    return f"exit code {exit_code}"


# Space held beside a raw file while its launch runs, given back to write the launch record: a kernel
# that fills the disk still leaves room for the record saying what happened. A launch record with a
# console tail is a few KiB.
RECORD_RESERVE_BYTES = 64 << 10


def reserve_record_space(output: Path) -> Path:
    """Holds RECORD_RESERVE_BYTES of disk beside `output` for its launch record (write_raw_file gives
    them back); WriteError where even that much is not free, and nothing is left behind."""
    reserve = _reserve_path(output)
    try:
        with open(reserve, "wb") as file:
            _allocate(file.fileno(), RECORD_RESERVE_BYTES)
    except OSError as error:
        reserve.unlink(missing_ok=True)
        raise write_failure(error, output) from error
    return reserve


def write_raw_file(output: Path, record: dict, partial: Path, with_output: bool, launcher_records=()) -> None:
    """The launch's raw file, whole or not at all: its launch record, then (`with_output`: a launch that
    gave data) `launcher_records` (what the launcher recorded besides: the hosts' topology) and the
    kernel's output in `partial`. The records go in front of the output in the
    partial file itself, which is then renamed: no second copy of the output is ever made. A launch
    that gave no data gets a file of its record alone, and its partial output goes. On failure,
    WriteError names the file and the cause, and neither the partial output nor a temporary is left."""
    output, partial = Path(output), Path(partial)
    _reserve_path(output).unlink(missing_ok=True)   # the space held for this record
    line = json.dumps(record).encode() + b"\n"
    try:
        if with_output:
            _prepend(partial, line + b"".join(json.dumps(extra).encode() + b"\n" for extra in launcher_records))
            os.replace(partial, output)
            return
        partial.unlink(missing_ok=True)             # before writing: the space it held is free again
        with replacing(output) as tmp:
            tmp.write_bytes(line)
    except WriteError:
        partial.unlink(missing_ok=True)
        raise
    except OSError as error:
        partial.unlink(missing_ok=True)
        raise write_failure(error, output) from error


def _reserve_path(output: Path) -> Path:
    return Path(output).with_name(Path(output).name + ".reserved")


def _prepend(path: Path, line: bytes) -> None:
    """`line` in front of the file's contents, in place: the file grows by the line alone, and that
    space is claimed before any byte is overwritten (where the file system can claim it ahead), so a
    full disk fails it with the file unchanged."""
    with open(path, "r+b") as file:
        body = file.read()
        if body and not body.endswith(b"\n"):
            body += b"\n"
        _allocate(file.fileno(), len(line) + len(body))
        file.seek(0)
        file.write(line)
        file.write(body)
        file.flush()
        os.fsync(file.fileno())


def _allocate(fd: int, size: int) -> None:
    """Claims `size` bytes of disk for the file; a file system that cannot say ahead (EOPNOTSUPP, as
    some network file systems) is written without."""
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as error:
        if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
