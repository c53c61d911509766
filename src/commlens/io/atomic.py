"""Files written whole or not at all: each is written to a temporary beside its place and renamed
over it, so that a reader (or the next run of the workflow) sees the previous file or the new one,
never half of one. A write that fails removes its temporary and raises WriteError, one line naming
the file and the cause: "no space left on device writing results/quick/quick.nc"."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

# Below this much free space, a failed write is put down to a full disk even where the library that
# failed did not say why (HDF5 reports "7725 requested and 7517 written").
NEARLY_FULL_BYTES = 1 << 20


class WriteError(OSError):
    """A file that could not be written; its message names the file and the cause."""

    def __init__(self, message: str, path=None, errno_: int | None = None):   # pickled as (message,)
        super().__init__(message)
        self.errno, self.filename = errno_, None if path is None else str(path)

    def __str__(self) -> str:
        return self.args[0]


def free_bytes(path) -> int | None:
    """Space an unprivileged writer has left on the filesystem holding `path` (or its nearest existing
    folder); None where it cannot be told."""
    path = Path(path)
    for folder in (path, *path.parents):
        if folder.exists():
            try:
                return shutil.disk_usage(folder).free
            except OSError:
                return None
    return None


def write_failure(error: BaseException, path) -> WriteError:
    """The error `error` raised while writing `path`, as one line: the cause, then the file."""
    if isinstance(error, WriteError):
        return error
    code = getattr(error, "errno", None)
    if code in (errno.ENOSPC, errno.EDQUOT):
        cause = os.strerror(code).lower()
    elif (free := free_bytes(path)) is not None and free < NEARLY_FULL_BYTES:
        cause, code = f"no space left on device ({free} bytes free)", errno.ENOSPC
    elif isinstance(error, OSError) and error.strerror:
        cause = error.strerror[0].lower() + error.strerror[1:]
    else:
        cause = f"{type(error).__name__}: {error}"
    return WriteError(f"{cause} writing {path}", path, code)


def temporary_beside(path) -> Path:
    """The temporary a write of `path` goes to first: in its folder, so that the rename is atomic, and
    named after it, so that one a killed write left behind is the next write's to replace."""
    path = Path(path)
    return path.with_name(f"{path.name}.tmp")


@contextlib.contextmanager
def replacing(path, sync: bool = True) -> Iterator[Path]:
    """Yields a temporary path to write; when the block ends it replaces `path`. When the block (or
    the rename) fails, the temporary is removed, `path` is left as it was, and WriteError is raised."""
    path = Path(path)
    tmp = temporary_beside(path)
    try:
        yield tmp
        if sync:
            _sync(tmp)
        os.replace(tmp, path)
    except BaseException as error:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(error, Exception) and not isinstance(error, WriteError) and _is_write_error(error):
            raise write_failure(error, path) from error
        raise


def write_text(path, text: str) -> None:
    """`text` as the whole of `path` (UTF-8), or WriteError with `path` untouched."""
    write_bytes(path, text.encode())


def write_bytes(path, data: bytes) -> None:
    """`data` as the whole of `path`, or WriteError with `path` untouched."""
    with replacing(path) as tmp:
        tmp.write_bytes(data)


def _is_write_error(error: Exception) -> bool:
    """Errors of the file system or of a library writing to it (netCDF4 raises RuntimeError)."""
    return isinstance(error, (OSError, RuntimeError))


def _sync(path: Path) -> None:
    """The data on disk before the rename, so that a crash cannot leave the new name on an empty file."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
