"""The locks that keep launches apart.

- One per launch, beside its raw file (`launch0.jsonl.lock`): a launch is never run twice at once,
  even when a workflow was killed (`kill -9`) and a rerun starts it again while the killed run's
  launch is still ending. The second waits for the first, then runs.
- One per machine (machine_lock_path()): launches of different campaigns, or of different
  checkouts or users, on one host never overlap. A launch that finds the machine busy waits, says
  so, and records how long it waited (`waited_for_machine_s` in its launch record). Launches inside
  a Slurm allocation do not take it: the allocation is the launch's own.

Both are flock(2) locks on a file: the kernel drops a lock when the process holding it ends, however
it ends, so a killed holder never leaves a stale lock behind. A launch's supervisor holds them with
the launch (held_descriptors()): a launch whose launcher was killed outright keeps them until the
supervisor has ended its processes and removed what they left. The lock file says who holds it (for
the waiting one's message); a launch's lock file is removed by its holder when the launch ends.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

POLL_S = 0.2
_HELD: set[int] = set()    # the descriptors of the locks this process holds now (held_descriptors)


def machine_lock_path() -> Path:
    """A folder every user of this host shares and may write: /run/lock (Debian, Fedora, ...), else
    /var/lock, else the temporary folder. `COMMLENS_MACHINE_LOCK` names another file (a host whose
    users share no such folder)."""
    if os.environ.get("COMMLENS_MACHINE_LOCK"):
        return Path(os.environ["COMMLENS_MACHINE_LOCK"])
    for folder in ("/run/lock", "/var/lock"):
        if os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK):
            return Path(folder) / "commlens-machine.lock"
    return Path(tempfile.gettempdir()) / "commlens-machine.lock"


class LockTimeout(RuntimeError):
    """A lock still held by another process after the longest wait allowed."""


def holder_line(what: str) -> str:
    """Who holds a lock, as the waiting side reads it: what, process, host and since when."""
    return f"{what} (pid {os.getpid()} on {socket.gethostname()}, since {time.strftime('%Y-%m-%d %H:%M:%S')})"


@contextlib.contextmanager
def held(path, holder: str, *, wait_s: float | None = None, on_wait: Callable[[str], None] | None = None,
         remove: bool = False) -> Iterator[float]:
    """Holds the flock of `path` for the block; yields the seconds it waited for it. While another
    process holds it, `on_wait` is told once who (what it wrote in the file) and the lock is tried
    again every POLL_S (signals still reach this process), up to `wait_s` (None: without end), then
    LockTimeout. `remove`: the file goes when the block ends (a launch's; the machine's stays)."""
    path = Path(path)
    t0 = time.monotonic()
    told = False
    while True:
        fd = _open(path)
        try:
            if _try_lock(fd):
                if _same_file(fd, path):
                    break
                os.close(fd)          # removed by its last holder after we opened it: take the new one
                continue
            if not told and on_wait is not None:
                on_wait(_read(fd) or "another process")
                told = True
            if wait_s is not None and time.monotonic() - t0 > wait_s:
                raise LockTimeout(f"{path} is still held by {_read(fd) or 'another process'} "
                                  f"after {time.monotonic() - t0:.0f} s")
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
        time.sleep(POLL_S)
    waited = time.monotonic() - t0
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, (holder + "\n").encode(), 0)
    except OSError:
        pass                          # read-only (another user's machine lock): the lock still holds
    _HELD.add(fd)
    try:
        yield waited
    finally:
        _HELD.discard(fd)
        if remove:
            with contextlib.suppress(OSError):
                path.unlink()         # while still held: a waiter that opened it takes a new one
        else:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
        os.close(fd)                  # drops the lock


def held_descriptors() -> tuple[int, ...]:
    """The open files of the locks this process holds: a process started with them (subprocess's
    pass_fds) holds those locks too, for as long as either keeps them open."""
    return tuple(sorted(_HELD))


def machine(what: str, tell: Callable[[str], None] | None = None, *, holder: str | None = None,
            wait_s: float | None = None):
    """The machine's lock, held for `what` (a launch, an interactive launch, engines' clean-up): `held`
    on machine_lock_path(), `tell` given one line while another holds it. `holder`: what the lock file
    says (default: holder_line(what))."""
    path = machine_lock_path()
    on_wait = None if tell is None else (
        lambda other: tell(f"{what}: waiting for the machine: {other} is running there (lock {path})"))
    return held(path, holder or holder_line(what), wait_s=wait_s, on_wait=on_wait)


def _open(path: Path) -> int:
    """The lock file, made if missing and writable by every user (the machine's is shared); opened
    read-only where another user made it without write permission (flock needs no more)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except PermissionError:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    with contextlib.suppress(OSError):
        if os.fstat(fd).st_uid == os.geteuid():
            os.fchmod(fd, 0o666)      # past the umask: other users' launches take it too
    return fd


def _try_lock(fd: int) -> bool:
    """Whether the lock is ours now. A file system without flock (Lustre mounted without it, some NFS)
    gives no lock at all: the launch goes ahead as it would without one."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    except OSError as error:
        if error.errno in (errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL):
            return True
        raise


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 4096, 0).decode(errors="replace").strip()
    except OSError:
        return ""


def launch_lock_path(output) -> Path:
    """The lock of the launch whose raw file is `output`."""
    output = Path(output)
    return output.with_name(output.name + ".lock")

